//! Splitting a watch body into its events as bytes arrive, and reading and writing one event
//! without touching the object's bytes.
//!
//! kube-apiserver writes a watch as JSON objects one after another (each followed by a
//! newline): `{"type":"ADDED","object":{…}}`. Framing goes by JSON structure, not by lines,
//! so any whitespace between events is accepted.

use bytes::{Bytes, BytesMut};
use serde::Deserialize;

use super::error::{FrameError, MAX_OBJECT};
use super::nesting::Nesting;

/// Splits a watch body into event frames.
#[derive(Debug, Default)]
pub struct WatchFramer {
    buf: BytesMut,
    pos: usize,
    /// The scan of the event being read.
    event: Nesting,
}

impl WatchFramer {
    /// A framer at the start of a body.
    pub fn new() -> WatchFramer {
        WatchFramer::default()
    }

    /// Appends bytes that arrived.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event's bytes, or `None` until more arrive; [`FrameError::TooLarge`]
    /// once the event being read holds more than [`MAX_OBJECT`].
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let mut i = self.pos;
        while i < self.buf.len() {
            if self.event.within() {
                let Some(close) = self.event.close(&self.buf, i) else {
                    i = self.buf.len();
                    break;
                };
                let event = self.event.cut(&mut self.buf, close)?;
                self.pos = 0;
                return Ok(Some(event));
            }
            match self.buf[i] {
                b'{' => self.event.enter(i),
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => return Err(FrameError::Malformed),
            }
            i += 1;
        }
        self.pos = i;
        // No event ended in the buffer: a hostile upstream must not make the gateway hold
        // one without bound.
        if self.buf.len() > MAX_OBJECT {
            return Err(FrameError::TooLarge);
        }
        Ok(None)
    }

    /// Ends the body: an error if it stopped inside an event.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.event.within() {
            return Err(FrameError::Truncated);
        }
        Ok(())
    }
}

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// An object appeared.
    Added,
    /// An object changed.
    Modified,
    /// An object went away.
    Deleted,
    /// A progress marker carrying only a resourceVersion.
    Bookmark,
    /// The watch failed; the object is a Status.
    Error,
}

impl EventType {
    /// The type as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }

    fn parse(text: &str) -> Option<EventType> {
        Some(match text {
            "ADDED" => EventType::Added,
            "MODIFIED" => EventType::Modified,
            "DELETED" => EventType::Deleted,
            "BOOKMARK" => EventType::Bookmark,
            "ERROR" => EventType::Error,
            _ => return None,
        })
    }
}

/// One watch event: its type and its object's bytes, sliced from the event without a copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The event type.
    pub kind: EventType,
    /// The object, exactly as it was on the wire.
    pub object: Bytes,
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

impl Event {
    /// Reads an event frame.
    pub fn parse(frame: &Bytes) -> Result<Event, FrameError> {
        let wire: WireEvent<'_> =
            serde_json::from_slice(frame).map_err(|_| FrameError::BadEvent)?;
        let kind = EventType::parse(wire.kind).ok_or(FrameError::BadEvent)?;
        let raw = wire.object.get().as_bytes();
        // The raw value borrows from `frame`, so its offset locates it there.
        let offset = raw.as_ptr() as usize - frame.as_ptr() as usize;
        Ok(Event {
            kind,
            object: frame.slice(offset..offset + raw.len()),
        })
    }

    /// Writes the event as kube-apiserver does: one JSON object and a newline.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(self.object.len() + 32);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(self.kind.as_str().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&self.object);
        out.extend_from_slice(b"}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a}\\\"{\"}}}\n\
                        {\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n  \
                        {\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\"},\"x\":[{}]}}\n";

    #[test]
    fn splits_events_at_every_chunk_size() {
        for chunk in 1..=BODY.len() {
            let mut framer = WatchFramer::new();
            let mut kinds = Vec::new();
            for piece in BODY.as_bytes().chunks(chunk) {
                framer.push(piece);
                while let Some(frame) = framer.next_frame().unwrap() {
                    kinds.push(Event::parse(&frame).unwrap().kind);
                }
            }
            framer.finish().unwrap();
            assert_eq!(
                kinds,
                [EventType::Added, EventType::Bookmark, EventType::Deleted],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_event_round_trips_with_its_object_untouched() {
        let frame =
            Bytes::from_static(br#"{"type":"MODIFIED","object":{"a": [1, 2], "b":"\u00e9"}}"#);
        let event = Event::parse(&frame).unwrap();
        assert_eq!(event.kind, EventType::Modified);
        assert_eq!(&event.object[..], br#"{"a": [1, 2], "b":"\u00e9"}"#);
        let mut out = BytesMut::new();
        event.encode(&mut out);
        assert_eq!(
            &out[..],
            b"{\"type\":\"MODIFIED\",\"object\":{\"a\": [1, 2], \"b\":\"\\u00e9\"}}\n"
        );
    }

    #[test]
    fn an_event_beyond_the_bound_is_refused_not_held() {
        let chunk = vec![b'x'; 64 << 10];
        let mut framer = WatchFramer::new();
        framer.push(br#"{"type":"ADDED","object":{"metadata":{"name":"big"},"data":{"v":""#);
        let mut refused = None;
        for _ in 0..=(MAX_OBJECT / chunk.len() + 1) {
            framer.push(&chunk);
            match framer.next_frame() {
                Ok(None) => assert!(framer.buf.len() <= MAX_OBJECT + 2 * chunk.len()),
                other => {
                    refused = Some(other);
                    break;
                }
            }
        }
        assert_eq!(refused, Some(Err(FrameError::TooLarge)));
    }

    #[test]
    fn bad_events_are_errors() {
        for bad in [
            &br#"{"type":"NOPE","object":{}}"#[..],
            br#"{"object":{}}"#,
            br#"{"type":"ADDED"}"#,
        ] {
            assert_eq!(
                Event::parse(&Bytes::copy_from_slice(bad)),
                Err(FrameError::BadEvent)
            );
        }
        let mut framer = WatchFramer::new();
        framer.push(b"garbage");
        assert_eq!(framer.next_frame(), Err(FrameError::Malformed));
        let mut framer = WatchFramer::new();
        framer.push(br#"{"type":"ADDED","object":{"#);
        assert_eq!(framer.next_frame(), Ok(None));
        assert_eq!(framer.finish(), Err(FrameError::Truncated));
    }
}
