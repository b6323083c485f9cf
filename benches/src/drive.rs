//! Running the gateway's stream pipeline to its end on a body held in memory and cut into
//! network-sized chunks, so a benchmark measures the pipeline and nothing of a socket.

use bytes::Bytes;
use edgegate::stream::{self, ListSink, Pipeline, WatchSink};
use futures_util::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;

/// The size of the chunks a body arrives in: what one read from a busy socket returns.
pub const CHUNK: usize = 64 << 10;

/// `body` cut into [`CHUNK`]-sized pieces, as they would arrive.
pub fn chunks(body: &[u8]) -> Vec<Bytes> {
    body.chunks(CHUNK).map(Bytes::copy_from_slice).collect()
}

type Upstream = StreamBody<
    futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::convert::Infallible>>>,
>;

fn upstream(chunks: &[Bytes]) -> Upstream {
    let frames: Vec<_> = chunks.iter().map(|c| Ok(Frame::data(c.clone()))).collect();
    StreamBody::new(futures_util::stream::iter(frames))
}

/// A runtime for driving pipelines on the current thread.
pub fn runtime() -> tokio::runtime::Runtime {
    // A current-thread runtime never fails to build without I/O drivers to set up.
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|error| panic!("cannot build a tokio runtime: {error}"))
}

/// Sends a list body through `stream::list` with `pipeline`; the bytes the client would get.
pub fn list(
    rt: &tokio::runtime::Runtime,
    chunks: &[Bytes],
    pipeline: Pipeline<dyn ListSink>,
) -> usize {
    rt.block_on(async {
        let out = stream::list(upstream(chunks), pipeline);
        drain(out).await
    })
}

/// Sends a watch body through `stream::watch` with `pipeline`; the bytes the client would get.
pub fn watch(
    rt: &tokio::runtime::Runtime,
    chunks: &[Bytes],
    pipeline: Pipeline<dyn WatchSink>,
) -> usize {
    rt.block_on(async {
        let out = stream::watch(upstream(chunks), pipeline);
        drain(out).await
    })
}

async fn drain<S>(out: S) -> usize
where
    S: futures_util::Stream<Item = Result<Frame<Bytes>, edgegate::error::BoxError>>,
{
    let mut out = std::pin::pin!(out);
    let mut sent = 0;
    while let Some(frame) = out.next().await {
        match frame {
            Ok(frame) => sent += frame.data_ref().map_or(0, Bytes::len),
            Err(error) => panic!("the pipeline failed on a well-formed body: {error}"),
        }
    }
    sent
}

/// A pipeline with no filter, no cache tee and no stop.
pub fn bare<S: ?Sized>() -> Pipeline<S> {
    Pipeline {
        transform: None,
        sink: None,
        stop: None,
    }
}
