//! What one pass of the writer takes: the messages waiting, up to a batch's bounds, turned
//! into store writes and the answers owed once they are applied.

use std::sync::mpsc::Receiver;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use crate::cache::clock::now;
use crate::cache::key::SetKey;
use crate::cache::message::Message;
use crate::cache::metrics::CacheMetrics;
use crate::cache::store::{SetMeta, StoreError, WriteOp};
use crate::stream::{Event, EventType, Meta};

/// Writes applied in one transaction at most.
pub(super) const MAX_BATCH: usize = 1024;
/// Object bytes applied in one transaction at most: the store keeps a transaction's dirty
/// pages in memory until it commits, so this bounds what one batch adds to the gateway's.
pub(super) const MAX_BATCH_BYTES: usize = 256 << 10;

/// The messages one pass of the writer takes, turned into one batch of writes and the
/// answers owed once it is applied.
#[derive(Default)]
pub(super) struct Gathered {
    pub(super) batch: Vec<WriteOp>,
    /// Room stays taken until the writes are applied: the bound covers the whole way.
    pub(super) held: Vec<OwnedSemaphorePermit>,
    pub(super) flushes: Vec<std::sync::mpsc::Sender<()>>,
    pub(super) applied: Vec<tokio::sync::oneshot::Sender<()>>,
    pub(super) locals: Vec<tokio::sync::oneshot::Sender<Result<(), String>>>,
    pub(super) collects: Vec<(String, std::sync::mpsc::Sender<Result<u64, StoreError>>)>,
    pub(super) durable: bool,
    pub(super) taken: usize,
    pub(super) bytes: usize,
}

/// Takes `first` and whatever else waits, up to a batch's bounds (or a collection, which
/// goes after the batch it closes, in a transaction of its own).
pub(super) fn gather(
    first: Option<Message>,
    rx: &Receiver<Message>,
    metrics: &CacheMetrics,
) -> Gathered {
    let mut gathered = Gathered::default();
    let g = &mut gathered;
    let mut next = first;
    while let Some(message) = next {
        g.taken += 1;
        let rooms = g.held.len();
        match message {
            Message::Flush(reply) => {
                g.durable = true;
                g.flushes.push(reply);
            }
            Message::Applied(reply) => g.applied.push(reply),
            Message::Local { ops, done } => {
                g.batch.extend(ops);
                g.locals.push(done);
                g.durable = true;
            }
            Message::Collect { component, done } => g.collects.push((component, done)),
            message => g.durable |= write_ops(message, &mut g.batch, &mut g.held, metrics),
        }
        g.bytes += g.held[rooms..]
            .iter()
            .map(|room| room.num_permits())
            .sum::<usize>();
        if g.taken >= MAX_BATCH || g.bytes >= MAX_BATCH_BYTES || !g.collects.is_empty() {
            break;
        }
        next = rx.try_recv().ok();
    }
    gathered
}

/// Turns one message into store writes; returns whether they must be durable.
fn write_ops(
    message: Message,
    batch: &mut Vec<WriteOp>,
    held: &mut Vec<OwnedSemaphorePermit>,
    metrics: &CacheMetrics,
) -> bool {
    match message {
        Message::Item {
            list,
            resource,
            object,
            room,
        } => {
            held.push(room);
            if let Some(meta) = meta_of(&object, metrics) {
                let key = resource.object_key(&meta.namespace, &meta.name);
                batch.push(WriteOp::Stage { list, key, object });
            }
        }
        Message::Commit {
            list,
            set,
            end,
            items,
        } => {
            batch.push(WriteOp::Commit {
                list,
                set: (*set).clone(),
                meta: SetMeta {
                    resource_version: end.resource_version,
                    list_kind: end.kind,
                    api_version: end.api_version,
                    committed_at: now(),
                    items,
                    ..SetMeta::default()
                },
            });
            return true;
        }
        Message::Abort { list } => batch.push(WriteOp::Abort { list }),
        Message::Event { set, event, room } => {
            held.push(room);
            event_ops(&set, event, batch, metrics);
        }
        Message::Lost { set } => {
            batch.push(WriteOp::Lost {
                set: (*set).clone(),
            });
            // A restart must not find the set claiming to be synced past the hole.
            return true;
        }
        Message::Object {
            resource,
            object,
            room,
        } => {
            held.push(room);
            // Its metadata only: the store reads the whole object if it writes it.
            if let Some(meta) = meta_of(&object, metrics) {
                let key = resource.object_key(&meta.namespace, &meta.name);
                let resource_version = meta.resource_version.into_owned();
                batch.push(WriteOp::Fetched {
                    key,
                    object,
                    resource_version,
                });
            }
        }
        Message::Touch { component, at } => batch.push(WriteOp::Touch { component, at }),
        Message::Running(secs) => batch.push(WriteOp::Running { secs }),
        Message::Flush(_) => return true,
        // Answered by the loop once its batch is applied.
        Message::Applied(_) | Message::Local { .. } | Message::Collect { .. } => {}
    }
    false
}

/// The metadata of `object`, found by a scan that reads no further ([`Meta::parse_checked`]),
/// counting its bytes; `None` (counted) when it cannot be read.
fn meta_of<'a>(object: &'a Bytes, metrics: &CacheMetrics) -> Option<Meta<'a>> {
    let Ok(meta) = Meta::parse_checked(object) else {
        metrics.unreadable.inc();
        return None;
    };
    metrics.bytes.inc_by(object.len() as u64);
    Some(meta)
}

/// A watch event's writes: the object upserted or removed, and the set's synced version.
/// An event's object is checked JSON already (the framer parsed the event, and the filter
/// host checks every replacement), so only its metadata is read.
fn event_ops(set: &SetKey, event: Event, batch: &mut Vec<WriteOp>, metrics: &CacheMetrics) {
    let Ok(meta) = Meta::parse_checked(&event.object) else {
        metrics.unreadable.inc();
        return;
    };
    let key = set.resource.object_key(&meta.namespace, &meta.name);
    let resource_version = meta.resource_version.into_owned();
    match event.kind {
        EventType::Added | EventType::Modified => {
            metrics.bytes.inc_by(event.object.len() as u64);
            if event.kind == EventType::Added {
                batch.push(WriteOp::Entered {
                    set: set.clone(),
                    key: key.clone(),
                    resource_version: resource_version.clone(),
                });
            }
            batch.push(WriteOp::Upsert {
                key,
                object: event.object,
                resource_version: resource_version.clone(),
            });
        }
        EventType::Deleted => batch.push(WriteOp::Remove {
            set: set.clone(),
            key,
            object: event.object,
            resource_version: resource_version.clone(),
        }),
        EventType::Bookmark => {}
        EventType::Error => return,
    }
    if !resource_version.is_empty() {
        batch.push(WriteOp::Synced {
            set: set.clone(),
            resource_version,
        });
    }
}
