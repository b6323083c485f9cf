//! The local layer's share of the store: the objects the node's own writes made that the
//! cloud has not replaced yet, shown in `/metrics` and bounded, so that a node cut off for
//! weeks cannot fill its disk with its own writes.

use std::collections::HashMap;

use thiserror::Error;

use super::metrics::CacheMetrics;
use super::store::{Store, StoreError, WriteOp};

/// Most bytes the node's own objects may hold in the store at once: many times what a
/// node's 110 pods, each in the copies of three components, and their endpoints take, and
/// still small beside the disk of the smallest edge device (measured: benches/HISTORY.md,
/// "Measurements behind choices in the code").
pub const LOCAL_LAYER_BYTES: u64 = 64 << 20;

/// What the node's own writes hold in the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalLayer {
    /// Objects (each component's copy counts).
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Why the store did not take a batch of the node's own writes.
#[derive(Debug, Error)]
pub enum LocalWriteError {
    /// The batch would take the local layer past its bound.
    #[error(
        "the node's own writes would hold {after} bytes in the local cache, past its bound of {limit}"
    )]
    Full {
        /// The layer's bytes with the batch.
        after: u64,
        /// The bound.
        limit: u64,
    },
    /// The store failed, or its writer is gone.
    #[error("{0}")]
    Store(String),
}

/// The local layer as `store` holds it, shown in `metrics`; with the length of each object.
pub(super) fn measure(
    store: &dyn Store,
    metrics: &CacheMetrics,
) -> Result<(LocalLayer, HashMap<String, u64>), StoreError> {
    let lengths: HashMap<String, u64> = store.local_layer()?.into_iter().collect();
    let layer = LocalLayer {
        objects: lengths.len() as u64,
        bytes: lengths.values().sum(),
    };
    show(metrics, layer);
    Ok((layer, lengths))
}

/// Admits `ops`, a batch of the node's own writes, if it keeps the layer within `limit` (a
/// batch that does not grow the layer always passes), and marks each object it stores as
/// the node's; the layer with the batch in it.
pub(super) fn admit(
    store: &dyn Store,
    metrics: &CacheMetrics,
    ops: &mut Vec<WriteOp>,
    limit: u64,
) -> Result<LocalLayer, LocalWriteError> {
    let (before, mut lengths) = measure(store, metrics)
        .map_err(|error| LocalWriteError::Store(crate::error::error_chain(&error)))?;
    let mut marks = Vec::new();
    for op in ops.iter() {
        if let WriteOp::Upsert { key, object, .. } = op {
            lengths.insert(key.clone(), object.len() as u64);
            marks.push(WriteOp::LocalMark { key: key.clone() });
        }
    }
    let after = LocalLayer {
        objects: lengths.len() as u64,
        bytes: lengths.values().sum(),
    };
    if after.bytes > limit && after.bytes > before.bytes {
        return Err(LocalWriteError::Full {
            after: after.bytes,
            limit,
        });
    }
    ops.extend(marks);
    Ok(after)
}

/// Shows `layer` in the cache's gauges.
pub(super) fn show(metrics: &CacheMetrics, layer: LocalLayer) {
    metrics
        .local_objects
        .set(i64::try_from(layer.objects).unwrap_or(i64::MAX));
    metrics
        .local_bytes
        .set(i64::try_from(layer.bytes).unwrap_or(i64::MAX));
}
