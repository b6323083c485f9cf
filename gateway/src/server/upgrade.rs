//! Protocol upgrades (exec, attach, port-forward over SPDY or WebSocket): once the apiserver
//! answers `101 Switching Protocols`, bytes are copied both ways until either side closes.

use http::{Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::headers;
use crate::reply::ResponseBody;

/// Returns the apiserver's answer to the client; if it switched protocols, a task splices
/// the two upgraded connections together.
pub fn tunnel(client: OnUpgrade, mut response: Response<Incoming>) -> Response<ResponseBody> {
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        headers::strip_hop_by_hop(response.headers_mut(), false);
        return response.map(|body| body.map_err(Into::into).boxed_unsync());
    }
    let upstream = hyper::upgrade::on(&mut response);
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(pair) => pair,
            Err(error) => {
                tracing::debug!(%error, "upgrade did not complete");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            Ok((up, down)) => tracing::debug!(up, down, "upgraded stream closed"),
            Err(error) => tracing::debug!(%error, "upgraded stream ended with an error"),
        }
    });
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}
