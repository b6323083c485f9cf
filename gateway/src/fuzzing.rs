//! Entry points for the fuzz targets under `fuzz/`, not an API: each reaches one part of
//! the gateway that is crate-private, and nothing else of it. The parsers that are public
//! (`RequestContext::parse`, the framers, `check_replacement`) are fuzzed directly.

use bytes::Bytes;
use http::{Request, Response, StatusCode};

use crate::error::BoxError;
use crate::local::LocalError;
use crate::reply::ResponseBody;
use crate::request::RequestContext;

pub use crate::server::{HubFixture, SECRET_VALUE};
pub use crate::stream::reference_objects;

/// The local proxy's offline answer to a write: a create is echoed with 201, kubelet's
/// lease renewal (`create` false) with 200.
pub async fn offline_write<B>(
    context: &RequestContext,
    request: Request<B>,
    create: bool,
) -> Result<Response<ResponseBody>, LocalError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    match create {
        true => crate::local::create(context, request).await,
        false => crate::local::echo(request, StatusCode::OK).await,
    }
}
