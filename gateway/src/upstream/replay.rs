//! A request that can be sent again, to another server, as long as none of its body has left:
//! a connect that failed sent nothing, so even a write may go to the next server.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use http::request::Parts;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty};

use super::transport::{BoxError, RequestBody};

/// The body, until the first try begins to send it.
type Slot = Arc<Mutex<Option<RequestBody>>>;

/// A request kept so that it can be tried again: its head, and its body until a try takes it.
pub struct Replayable {
    head: Parts,
    slot: Slot,
    /// The body was empty: any number of tries can send it.
    empty: bool,
}

impl Replayable {
    /// Keeps `request` for one or more tries.
    pub fn new(request: Request<RequestBody>) -> Replayable {
        let (head, body) = request.into_parts();
        let empty = body.is_end_stream();
        Replayable {
            head,
            slot: Arc::new(Mutex::new((!empty).then_some(body))),
            empty,
        }
    }

    /// The request's head, as every try sends it.
    pub fn head(&self) -> &Parts {
        &self.head
    }

    /// The request for one more try; `None` once an earlier try began to send a body that
    /// was not empty.
    pub fn request(&self) -> Option<Request<RequestBody>> {
        let body = if self.empty {
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync()
        } else {
            if lock(&self.slot).is_none() {
                return None;
            }
            Deferred {
                slot: self.slot.clone(),
                taken: None,
            }
            .boxed_unsync()
        };
        Some(Request::from_parts(self.head.clone(), body))
    }
}

fn lock(slot: &Slot) -> MutexGuard<'_, Option<RequestBody>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A try's body: the kept body, taken from the slot when the connection first asks for it.
struct Deferred {
    slot: Slot,
    taken: Option<RequestBody>,
}

impl Body for Deferred {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.taken.is_none() {
            let Some(body) = lock(&self.slot).take() else {
                return Poll::Ready(Some(
                    Err("the request body went with an earlier try".into()),
                ));
            };
            self.taken = Some(body);
        }
        match self.taken.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.taken {
            Some(body) => body.is_end_stream(),
            None => lock(&self.slot).as_ref().is_none_or(Body::is_end_stream),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.taken {
            Some(body) => body.size_hint(),
            None => lock(&self.slot)
                .as_ref()
                .map_or_else(|| SizeHint::with_exact(0), Body::size_hint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    fn with_body(text: &'static str) -> Replayable {
        let body = Full::new(Bytes::from_static(text.as_bytes()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = Request::post("/api/v1/namespaces/a/configmaps")
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        Replayable::new(request)
    }

    async fn text(request: Request<RequestBody>) -> String {
        let bytes = request.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_try_that_never_read_the_body_leaves_it_for_the_next() {
        let kept = with_body("{\"a\":1}");
        let first = kept.request().unwrap();
        assert_eq!(
            first.body().size_hint().exact(),
            Some(7),
            "the length is known"
        );
        assert!(!first.body().is_end_stream());
        drop(first);
        let second = kept.request().unwrap();
        assert_eq!(second.headers()["content-type"], "application/json");
        assert_eq!(second.uri().path(), "/api/v1/namespaces/a/configmaps");
        assert_eq!(text(second).await, "{\"a\":1}");
    }

    #[tokio::test]
    async fn a_body_begun_is_not_sent_again() {
        let kept = with_body("{\"a\":1}");
        let mut first = kept.request().unwrap();
        let frame = first.body_mut().frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "{\"a\":1}");
        assert!(kept.request().is_none(), "the body has left");
    }

    #[tokio::test]
    async fn an_empty_body_is_sent_by_every_try() {
        let body = Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let kept = Replayable::new(Request::get("/api").body(body).unwrap());
        for _ in 0..3 {
            let request = kept.request().unwrap();
            assert!(request.body().is_end_stream(), "no chunked body on a GET");
            assert_eq!(text(request).await, "");
        }
    }
}
