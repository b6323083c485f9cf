//! Responses as streams of objects: the framing of list and watch bodies as bytes arrive, the
//! hook the filter chain implements, the watch visibility rule, and the tee to the cache.
//!
//! Nothing here holds a whole list: memory is bounded by the largest single object.
//!
//! # Layout
//! - `body`: the one driver of list and watch bodies over a `Framing` per kind, and
//!   [`until`], a body passed through until its watch must stop.
//! - `list_body`, `watch_body`: the two framings: batches of items, events and their errors.
//! - `object_body`: a single object, read whole (bounded), filtered and teed.
//! - `gunzip`: a gzip-encoded upstream body inflated as it streams, before any of the above.
//! - `protobuf`: a protobuf watch body (Services, EndpointSlices), or its refusal's
//!   `Status`, turned into JSON as it streams, before any of the above.
//! - `list`, `watch`, `nesting`, `scan`: the framers that find items and events in bytes.
//! - `object`: an object's metadata read without parsing it whole.
//! - `event_map`: a watch body mapped event by event (into protobuf, into metadata alone).
//! - [`partial_metadata`]: objects, lists and watches as `PartialObjectMetadata`.
//! - `transform`, `sink`, `stop`: what the filter chain, the tee and a watch's end implement.
//! - `visibility`: what a filtered watch's client is shown as objects enter and leave its view.
//! - `held`: one copy of identical bytes for all the streams (and the multiplexer) that hold them.
//! - `error`: malformed bodies and broken streams.

mod body;
mod error;
mod event_map;
mod gunzip;
mod held;
mod list;
mod list_body;
mod nesting;
mod object;
mod object_body;
pub mod partial_metadata;
mod protobuf;
mod scan;
mod sink;
mod stop;
#[cfg(test)]
pub(crate) mod test_bodies;
mod transform;
mod version;
mod visibility;
mod watch;
mod watch_body;

pub use body::{BATCH, Pipeline, until};
pub use error::{FrameError, MAX_OBJECT, StreamError};
pub use event_map::map_events;
pub use gunzip::{Gunzip, GzipError, is_gzip};
pub use held::held;
pub use list::{ListFrame, ListFramer, head_json};
pub use list_body::list;
pub use object::{Labels, Meta, compare_versions, labels};
pub use object_body::{ObjectError, object};
#[cfg(feature = "fuzzing")]
pub use protobuf::reference_objects;
pub use protobuf::{
    DESCRIBED_RELEASE, ListEncoder, ListMeta, PROTOBUF, PROTOBUF_WATCH, ProtobufBody,
    TranscodeError, describes, is_protobuf_object, is_protobuf_watch, json_object_protobuf,
    json_object_protobuf_as, protobuf_object_json, watch_accept, watch_frame,
};
pub use sink::{ListEnd, ListSink, ObjectSink, Sink, WatchSink};
pub use stop::{Stop, StopSignal};
pub use transform::{Transform, TransformError, Verdict};
pub use version::{hash_but_version, same_but_version, with_version};
pub use visibility::Visibility;
pub use watch::{Event, EventType, WatchFramer};
pub use watch_body::watch;
