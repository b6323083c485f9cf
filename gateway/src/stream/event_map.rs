//! A JSON watch body mapped event by event into another body (the same events in another
//! form), as its bytes arrive: memory bounded by one event.

use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use http_body::Frame;

use super::watch::{Event, WatchFramer};
use crate::error::BoxError;

/// The body `json` with each of its events replaced by `map`'s bytes for it. A malformed
/// event, or one `map` refuses, ends the body with that error.
pub fn map_events<S, F>(
    json: S,
    map: F,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    S: Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
    F: FnMut(Event) -> Result<Bytes, BoxError> + Send + 'static,
{
    let start = (Box::pin(json), WatchFramer::new(), map, false);
    stream::unfold(start, |(mut json, mut framer, mut map, done)| async move {
        if done {
            return None;
        }
        loop {
            match framer.next_frame() {
                Ok(Some(frame)) => {
                    let mapped = match Event::parse(&frame) {
                        Ok(event) => map(event).map(Frame::data),
                        Err(error) => Err(error.into()),
                    };
                    let done = mapped.is_err();
                    return Some((mapped, (json, framer, map, done)));
                }
                Ok(None) => {}
                Err(error) => return Some((Err(error.into()), (json, framer, map, true))),
            }
            match json.next().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        framer.push(&data);
                    }
                }
                Some(Err(error)) => return Some((Err(error), (json, framer, map, true))),
                None => return None,
            }
        }
    })
}
