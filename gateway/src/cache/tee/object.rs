//! The tee of a single-object response (get, create, update, patch): hands the object to
//! the writer if there is room, and gives it up otherwise.

use std::sync::Arc;

use bytes::Bytes;

use super::link::TeeLink;
use crate::cache::key::ResourceKey;
use crate::cache::message::Message;
use crate::stream::{ObjectSink, Sink};

/// The tee of one single-object response.
pub struct ObjectTee {
    link: TeeLink,
    resource: Arc<ResourceKey>,
    /// Set once the response broke off: its object is not teed.
    done: bool,
}

impl ObjectTee {
    /// A tee for an object of `resource`.
    pub(crate) fn new(link: TeeLink, resource: ResourceKey) -> ObjectTee {
        ObjectTee {
            link,
            resource: Arc::new(resource),
            done: false,
        }
    }
}

impl Sink for ObjectTee {
    fn abort(&mut self, _reason: &str) {
        self.done = true;
    }
}

impl ObjectSink for ObjectTee {
    fn object(&mut self, object: &Bytes) {
        if self.done {
            return;
        }
        if let Some(room) = self.link.room(object.len()) {
            self.link.send(Message::Object {
                resource: self.resource.clone(),
                object: object.clone(),
                room,
            });
        }
    }
}
