//! Responses as streams of objects: the hook the filter chain implements, the framing of
//! list and watch bodies as bytes arrive, and the tee to the client and the cache.

mod transform;

pub use transform::{Transform, TransformError, Verdict};
