//! The watch visibility rule: per watch stream, what the client has been shown of each
//! object, so that filter verdicts turn into the right event types.
//!
//! | shown before | verdict now | the client gets |
//! |---|---|---|
//! | visible | visible | MODIFIED with the new object |
//! | hidden | visible | ADDED |
//! | visible | dropped | DELETED with the last visible object |
//! | hidden | dropped | nothing |
//! | never seen in this stream | visible | the upstream type |
//! | never seen, upstream ADDED | dropped | nothing |
//! | never seen, upstream MODIFIED | dropped | DELETED with the upstream object, once |
//!
//! A watch usually resumes a list the client made earlier, so an object first met in a
//! MODIFIED event may well be in the client's store: it is told once that it is gone.
//! A synthesized DELETED carries the event's resourceVersion, as kube-apiserver's watch cache
//! does, so a client resuming from it does not go back in time.
//! An object sent again to be filtered anew after a lookup change is held back when the
//! client holds what the filters make of it now: as it was shown it (but for its
//! resourceVersion, which a re-send carries anew) or, not shown it in this stream, as its
//! filters tell (they made the same of it before the change).
//! Memory: one entry per object that changed while the stream was open, holding a copy of
//! what the client was shown. The object of an event is a slice of the buffer the stream
//! was read into; held for as long as the object does not change again, it would keep that
//! whole buffer, and every other event read into it, as long: in the traffic bed, many
//! times what the copies take (measured: benches/HISTORY.md, "Measurements behind choices
//! in the code"). The copy is [`held`]: the streams showing the same bytes share one.

use std::collections::HashMap;

use bytes::Bytes;

use super::held::held;
use super::object::Meta;
use super::transform::Verdict;
use super::version::{same_but_version, with_version};
use super::watch::{Event, EventType};

/// What the client was last shown of an object.
#[derive(Debug)]
enum Shown {
    /// It has the object, as these bytes.
    Visible(Bytes),
    /// It does not have it.
    Hidden,
}

/// The visibility state of one watch stream.
#[derive(Debug, Default)]
pub struct Visibility {
    shown: HashMap<String, Shown>,
}

impl Visibility {
    /// Turns an upstream ADDED, MODIFIED or DELETED event and the chain's verdict on its
    /// object into the event the client gets, if any. `key` is the object's `namespace/name`.
    pub fn apply(&mut self, key: String, upstream: &Event, verdict: Verdict) -> Option<Event> {
        // What the client is shown, and what the stream holds of it: a held copy of that, the
        // upstream object or the replacement (see the module's memory note).
        let visible = match verdict {
            Verdict::Keep => Some((upstream.object.clone(), held(&upstream.object))),
            Verdict::Replace(bytes) => {
                let copy = held(&bytes);
                Some((bytes, copy))
            }
            Verdict::Drop => None,
        };
        let before = self.shown.remove(&key);
        if upstream.kind == EventType::Deleted {
            return match (before, visible) {
                (Some(Shown::Hidden), _) => None,
                (_, Some((object, _))) => Some(deleted(object)),
                (Some(Shown::Visible(last)), None) => {
                    Some(deleted(with_version_of(&last, &upstream.object)))
                }
                (None, None) => Some(deleted(upstream.object.clone())),
            };
        }
        match visible {
            Some((object, held)) => {
                let kind = match before {
                    Some(Shown::Visible(_)) => EventType::Modified,
                    Some(Shown::Hidden) => EventType::Added,
                    None => upstream.kind,
                };
                self.shown.insert(key, Shown::Visible(held));
                Some(Event { kind, object })
            }
            None => {
                self.shown.insert(key, Shown::Hidden);
                match before {
                    Some(Shown::Visible(last)) => {
                        Some(deleted(with_version_of(&last, &upstream.object)))
                    }
                    Some(Shown::Hidden) => None,
                    None if upstream.kind == EventType::Modified => {
                        Some(deleted(upstream.object.clone()))
                    }
                    None => None,
                }
            }
        }
    }

    /// [`Visibility::apply`] for an object sent again to be filtered anew: nothing when the
    /// client holds what the filters make of it now, as it was last shown it in this stream
    /// but for its resourceVersion or, when it was not, as `unchanged` says.
    pub fn apply_resent(
        &mut self,
        key: String,
        upstream: &Event,
        verdict: Verdict,
        unchanged: bool,
    ) -> Option<Event> {
        let holds = match (self.shown.get(&key), &verdict) {
            (None, _) => unchanged,
            (Some(Shown::Visible(last)), Verdict::Keep) => same_but_version(last, &upstream.object),
            (Some(Shown::Visible(last)), Verdict::Replace(bytes)) => same_but_version(last, bytes),
            (Some(Shown::Hidden), Verdict::Drop) => true,
            (Some(_), _) => false,
        };
        if holds {
            return None;
        }
        self.apply(key, upstream, verdict)
    }

    /// How many objects the stream remembers.
    pub fn len(&self) -> usize {
        self.shown.len()
    }

    /// Whether the stream remembers nothing yet.
    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }
}

fn deleted(object: Bytes) -> Event {
    Event {
        kind: EventType::Deleted,
        object,
    }
}

/// `last` with the resourceVersion of `current`; `last` unchanged if either cannot be read.
fn with_version_of(last: &Bytes, current: &Bytes) -> Bytes {
    let Ok(meta) = Meta::parse_checked(current) else {
        return last.clone();
    };
    with_version(last, &meta.resource_version).unwrap_or_else(|| last.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(rv: u32, flag: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"s","namespace":"n","resourceVersion":"{rv}"}},"flag":"{flag}"}}"#
        ))
    }

    fn event(kind: EventType, rv: u32, flag: &str) -> Event {
        Event {
            kind,
            object: object(rv, flag),
        }
    }

    fn run(
        v: &mut Visibility,
        kind: EventType,
        rv: u32,
        flag: &str,
        verdict: Verdict,
    ) -> Option<(EventType, String)> {
        v.apply("n/s".into(), &event(kind, rv, flag), verdict)
            .map(|e| {
                let value: serde_json::Value = serde_json::from_slice(&e.object).unwrap();
                (
                    e.kind,
                    format!(
                        "{}@{}",
                        value["flag"].as_str().unwrap(),
                        value["metadata"]["resourceVersion"].as_str().unwrap()
                    ),
                )
            })
    }

    use EventType::*;
    use Verdict::{Drop, Keep};

    #[test]
    fn streams_shown_the_same_bytes_hold_one_copy_of_them_and_not_their_buffers() {
        let held = |v: &Visibility| match v.shown.get("n/s") {
            Some(Shown::Visible(bytes)) => bytes.clone(),
            other => panic!("{other:?}"),
        };
        let (mut one, mut other) = (Visibility::default(), Visibility::default());
        let (first, second) = (event(Added, 1, "same"), event(Added, 1, "same"));
        assert_ne!(first.object.as_ptr(), second.object.as_ptr());
        one.apply("n/s".into(), &first, Keep);
        other.apply("n/s".into(), &second, Keep);
        assert_eq!(held(&one).as_ptr(), held(&other).as_ptr());
        assert_ne!(held(&one).as_ptr(), first.object.as_ptr());
    }

    #[test]
    fn an_object_that_stops_passing_is_deleted_exactly_once_then_added_back() {
        let mut v = Visibility::default();
        assert_eq!(
            run(&mut v, Added, 1, "ok", Keep),
            Some((Added, "ok@1".into()))
        );
        assert_eq!(
            run(&mut v, Modified, 2, "ok", Keep),
            Some((Modified, "ok@2".into()))
        );
        // Stops passing: DELETED with the last visible object at the event's version.
        assert_eq!(
            run(&mut v, Modified, 3, "bad", Drop),
            Some((Deleted, "ok@3".into()))
        );
        assert_eq!(run(&mut v, Modified, 4, "bad", Drop), None);
        assert_eq!(
            run(&mut v, Modified, 5, "ok", Keep),
            Some((Added, "ok@5".into()))
        );
        assert_eq!(
            run(&mut v, Deleted, 6, "ok", Keep),
            Some((Deleted, "ok@6".into()))
        );
        assert!(v.is_empty());
    }

    #[test]
    fn never_visible_objects_produce_nothing() {
        let mut v = Visibility::default();
        assert_eq!(run(&mut v, Added, 1, "bad", Drop), None);
        assert_eq!(run(&mut v, Modified, 2, "bad", Drop), None);
        assert_eq!(run(&mut v, Deleted, 3, "bad", Drop), None);
    }

    #[test]
    fn an_object_first_met_failing_in_a_modified_event_is_deleted_once() {
        let mut v = Visibility::default();
        assert_eq!(
            run(&mut v, Modified, 7, "bad", Drop),
            Some((Deleted, "bad@7".into()))
        );
        assert_eq!(run(&mut v, Modified, 8, "bad", Drop), None);
    }

    #[test]
    fn a_replaced_object_is_what_the_client_sees_and_remembers() {
        let mut v = Visibility::default();
        let replaced = object(1, "rewritten");
        let got = v.apply(
            "n/s".into(),
            &event(Added, 1, "orig"),
            Verdict::Replace(replaced.clone()),
        );
        assert_eq!(got.map(|e| e.object), Some(replaced));
        assert_eq!(
            run(&mut v, Modified, 2, "bad", Drop),
            Some((Deleted, "rewritten@2".into()))
        );
    }

    #[test]
    fn a_resend_the_client_holds_is_held_back() {
        let mut v = Visibility::default();
        let resent = |v: &mut Visibility, rv: u32, verdict: Verdict, unchanged: bool| {
            v.apply_resent("n/s".into(), &event(Modified, rv, "ok"), verdict, unchanged)
                .map(|e| e.kind)
        };
        assert_eq!(resent(&mut v, 4, Keep, true), None, "held from the list");
        assert_eq!(resent(&mut v, 4, Keep, false), Some(Modified));
        assert_eq!(
            resent(&mut v, 6, Keep, false),
            None,
            "as shown, but for the version"
        );
        let rewritten = Verdict::Replace(object(6, "rewritten"));
        assert_eq!(resent(&mut v, 6, rewritten.clone(), true), Some(Modified));
        assert_eq!(resent(&mut v, 7, rewritten, false), None);
        assert_eq!(
            resent(&mut v, 8, Drop, true),
            Some(Deleted),
            "shown: it decides"
        );
        assert_eq!(resent(&mut v, 9, Drop, false), None);
        assert_eq!(
            run(&mut v, Modified, 10, "ok", Keep),
            Some((Added, "ok@10".into()))
        );
    }

    #[test]
    fn what_a_stream_holds_keeps_no_buffer_it_was_read_into() {
        let buffer = Bytes::from(
            [
                &b"{\"type\":\"ADDED\",\"object\":"[..],
                &object(1, "ok"),
                b"}",
            ]
            .concat(),
        );
        let inside = |bytes: &Bytes| buffer.as_ptr_range().contains(&bytes.as_ptr());
        let upstream = Event {
            kind: Added,
            object: buffer.slice(25..buffer.len() - 1),
        };
        assert_eq!(upstream.object, object(1, "ok"));
        let mut v = Visibility::default();
        let sent = v.apply("n/s".into(), &upstream, Keep).unwrap();
        assert!(
            inside(&sent.object),
            "the event itself is sent without a copy"
        );
        match v.shown.get("n/s") {
            Some(Shown::Visible(held)) => {
                assert_eq!(held, &upstream.object);
                assert!(!inside(held));
            }
            other => panic!("{other:?}"),
        }
    }
}
