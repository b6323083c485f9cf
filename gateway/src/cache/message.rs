//! What the writer is sent: the one enum of its messages (what the tees saw, the uses and
//! the clock the facade records, the local layer's writes, garbage collection, flushes and
//! catch-ups), and the sending half every tee shares. The tees
//! and the writer both import this, and not each other.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use super::key::{ResourceKey, SetKey};
use super::store::{StoreError, WriteOp};
use crate::stream::{Event, ListEnd};

/// A message to the writer. Objects come with the room they took of the in-flight budget,
/// held until they are applied.
pub(crate) enum Message {
    /// A list item, to stage under list `list`.
    Item {
        list: u64,
        resource: Arc<ResourceKey>,
        object: Bytes,
        room: OwnedSemaphorePermit,
    },
    /// List `list` ended on its last page: commit it to `set`.
    Commit {
        list: u64,
        set: Arc<SetKey>,
        end: ListEnd,
        items: u64,
    },
    /// List `list` broke off.
    Abort { list: u64 },
    /// A watch event of `set`, as the client received it.
    Event {
        set: Arc<SetKey>,
        event: Event,
        room: OwnedSemaphorePermit,
    },
    /// A watch event of `set` had no room: the set is stale until a list of it commits.
    Lost { set: Arc<SetKey> },
    /// A single-object response.
    Object {
        resource: Arc<ResourceKey>,
        object: Bytes,
        room: OwnedSemaphorePermit,
    },
    /// A component was served.
    Touch { component: String, at: u64 },
    /// The gateway has run this many seconds over the store.
    Running(u64),
    /// Answer once everything sent before is durable.
    Flush(Sender<()>),
    /// Answer once everything sent before is applied: readable, not necessarily durable.
    Applied(tokio::sync::oneshot::Sender<()>),
    /// The node's own writes while the cloud is away (see `local`): applied and made
    /// durable in one transaction, answered with whether they were.
    Local {
        ops: Vec<WriteOp>,
        done: tokio::sync::oneshot::Sender<Result<(), String>>,
    },
    /// Garbage collection: remove everything cached for `component` in one transaction,
    /// after what was sent before; answered with how many objects went.
    Collect {
        component: String,
        done: Sender<Result<u64, StoreError>>,
    },
}

/// The way to the writer, shared by the facade and every tee: closed once, for all of them,
/// when the cache closes (so the writer's thread sees its last sender go).
#[derive(Clone, Default)]
pub(crate) struct Outbox {
    sender: Arc<Mutex<Option<Sender<Message>>>>,
}

impl Outbox {
    /// An outbox sending to `sender`.
    pub(crate) fn new(sender: Sender<Message>) -> Outbox {
        Outbox {
            sender: Arc::new(Mutex::new(Some(sender))),
        }
    }

    /// Sends `message` to the writer; false when the writer is gone.
    pub(crate) fn send(&self, message: Message) -> bool {
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        sender.as_ref().is_some_and(|tx| tx.send(message).is_ok())
    }

    /// Sends nothing more, from anyone.
    pub(crate) fn close(&self) {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
