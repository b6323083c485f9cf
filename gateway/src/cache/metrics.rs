//! The cache's metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Counters of the cache, cheap to clone (they share their values).
#[derive(Clone, Debug, Default)]
pub struct CacheMetrics {
    /// Lists committed.
    pub commits: Counter,
    /// Lists not committed because they broke off or the writer was behind.
    pub aborted: Counter,
    /// Object bytes written.
    pub bytes: Counter,
    /// Objects the tee could not hand to the writer for lack of room.
    pub refused: Counter,
    /// Times a set's first list waited for the writer to make room.
    pub list_waits: Counter,
    /// Failed store transactions.
    pub write_errors: Counter,
    /// Objects whose metadata could not be read, so they could not be keyed.
    pub unreadable: Counter,
    /// Requests answered from the cache.
    pub hits: Counter,
    /// Requests the cache could not answer.
    pub misses: Counter,
    /// Components removed by garbage collection.
    pub collected: Counter,
    /// Damaged stores moved aside and started anew.
    pub store_resets: Counter,
    /// The node's own writes taken by the local layer while the cloud was away.
    pub local_writes: Counter,
    /// Watches answered `410 Expired` after a cut because the node's own writes changed
    /// their set: the writer lists the cloud's objects again.
    pub own_write_relists: Counter,
    /// Objects the node's own writes made that the store holds and the cloud has not
    /// replaced (each component's copy counts).
    pub local_objects: Gauge,
    /// Their bytes (bounded by [`LOCAL_LAYER_BYTES`](super::LOCAL_LAYER_BYTES)).
    pub local_bytes: Gauge,
    /// Disk faults (episodes, not failed writes), by kind.
    pub disk_faults: Family<FaultLabels, Counter>,
}

/// The label of a disk fault: `full`, `read_only` or `io`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    /// The kind.
    pub kind: &'static str,
}

impl CacheMetrics {
    /// Registers the counters under `edgegate_cache_*`.
    pub fn register(&self, registry: &mut Registry) {
        let cache = registry.sub_registry_with_prefix("cache");
        cache.register(
            "local_writes",
            "The node's own writes taken by the local layer while the cloud was away",
            self.local_writes.clone(),
        );
        cache.register(
            "local_objects",
            "Objects the node's own writes made that the cache holds and the cloud has not replaced",
            self.local_objects.clone(),
        );
        cache.register(
            "local_bytes",
            "Bytes of the objects the node's own writes made that the cache holds and the cloud has not replaced",
            self.local_bytes.clone(),
        );
        cache.register(
            "own_write_relists",
            "Watches answered 410 Expired after a cut because the node's own writes changed their set",
            self.own_write_relists.clone(),
        );
        cache.register(
            "commits",
            "Lists committed to the cache",
            self.commits.clone(),
        );
        cache.register(
            "aborted_lists",
            "Lists not committed: broke off, or the writer was behind",
            self.aborted.clone(),
        );
        cache.register(
            "written_bytes",
            "Object bytes written to the cache",
            self.bytes.clone(),
        );
        cache.register(
            "refused_objects",
            "Objects not cached because the writer was behind",
            self.refused.clone(),
        );
        cache.register(
            "list_waits",
            "Times a set's first list waited for the cache writer to make room",
            self.list_waits.clone(),
        );
        cache.register(
            "write_errors",
            "Failed cache transactions",
            self.write_errors.clone(),
        );
        cache.register(
            "unreadable_objects",
            "Objects without readable metadata",
            self.unreadable.clone(),
        );
        cache.register(
            "hits",
            "Requests answered from the cache",
            self.hits.clone(),
        );
        cache.register(
            "misses",
            "Requests the cache could not answer",
            self.misses.clone(),
        );
        cache.register(
            "collected_components",
            "Components removed by garbage collection",
            self.collected.clone(),
        );
        cache.register(
            "store_resets",
            "Damaged cache stores moved aside and started anew",
            self.store_resets.clone(),
        );
        cache.register(
            "disk_faults",
            "Times the cache's disk failed (full, read-only, I/O errors), each until it worked again",
            self.disk_faults.clone(),
        );
    }
}
