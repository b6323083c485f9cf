//! The images this node has: the store, pulls of what it lacks with a back-off per image
//! that failed, and the reason each missing image is still missing.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::registry::{Digest, ImageStore, Reference, Registries};

/// The first wait after a failed pull; each further failure doubles it.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between pulls of one image.
const LONGEST_RETRY: Duration = Duration::from_secs(300);

/// An image whose last pull failed.
struct Failure {
    attempts: u32,
    next: Instant,
    error: String,
}

/// The store and the pulls into it.
pub(crate) struct Images {
    store: ImageStore,
    /// The client, or why the registry settings could not be used.
    registries: Result<Registries, String>,
    failures: HashMap<Digest, Failure>,
}

impl Images {
    /// Images kept in `store`, pulled with `registries`.
    pub(crate) fn new(store: ImageStore, registries: Result<Registries, String>) -> Images {
        Images {
            store,
            registries,
            failures: HashMap::new(),
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &ImageStore {
        &self.store
    }

    /// The component of `image` from the store (checked), without pulling.
    pub(crate) async fn stored(&self, image: &Reference) -> Option<Bytes> {
        let digest = image.digest.clone()?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.component(&digest))
            .await
            .ok()
            .flatten()
    }

    /// The component of `image`: from the store, else pulled now if its back-off allows.
    /// The error says why it is not there yet.
    pub(crate) async fn component(&mut self, image: &Reference) -> Result<Bytes, String> {
        if let Some(component) = self.stored(image).await {
            self.failures
                .remove(image.digest.as_ref().ok_or("not pinned")?);
            return Ok(component);
        }
        let digest = image.pinned().map_err(|e| e.to_string())?.clone();
        if let Some(failure) = self.failures.get(&digest)
            && failure.next > Instant::now()
        {
            return Err(failure.error.clone());
        }
        let registries = self.registries.as_ref().map_err(Clone::clone)?;
        let pulled = registries.pull(image).await;
        let stored = match pulled {
            Ok(pulled) => {
                let store = self.store.clone();
                let (at, component) = (digest.clone(), pulled.component.clone());
                tokio::task::spawn_blocking(move || store.put(&at, &pulled))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|put| put.map_err(|e| crate::error::error_chain(&e)))
                    .map(|()| component)
            }
            Err(error) => Err(crate::error::error_chain(&error)),
        };
        match stored {
            Ok(component) => {
                tracing::info!(%image, "filter image pulled");
                self.failures.remove(&digest);
                Ok(component)
            }
            Err(error) => {
                let attempts = self.failures.get(&digest).map_or(0, |f| f.attempts) + 1;
                let wait = backoff(attempts);
                tracing::warn!(%image, %error, retry_in_s = wait.as_secs_f32(), "filter image pull failed; the filter it was for keeps its running version");
                let error = format!("pull failed (attempt {attempts}): {error}");
                let failure = Failure {
                    attempts,
                    next: Instant::now() + wait,
                    error: error.clone(),
                };
                self.failures.insert(digest, failure);
                Err(error)
            }
        }
    }

    /// When the next pull that failed may be tried again.
    pub(crate) fn next_retry(&self) -> Option<Instant> {
        self.failures.values().map(|f| f.next).min()
    }

    /// Forgets failures and stored images of all but `images`.
    pub(crate) async fn keep_only(&mut self, images: BTreeSet<Digest>) {
        self.failures.retain(|digest, _| images.contains(digest));
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.keep_only(&images)).await;
    }
}

/// The wait after `attempts` failures: doubling from [`FIRST_RETRY`] to [`LONGEST_RETRY`],
/// spread by up to a fifth so that a fleet's nodes do not retry as one.
fn backoff(attempts: u32) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    let wait = doubled.min(LONGEST_RETRY);
    wait + wait.mul_f64(fastrand::f64() / 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_doubles_to_five_minutes() {
        let bounds = |attempts| {
            let wait = backoff(attempts);
            (wait.as_secs_f64(), attempts)
        };
        for (attempts, least) in [
            (1, 1.0),
            (2, 2.0),
            (3, 4.0),
            (9, 256.0),
            (10, 300.0),
            (40, 300.0),
        ] {
            let (wait, _) = bounds(attempts);
            assert!(wait >= least && wait <= least * 1.2, "{attempts}: {wait}");
        }
    }

    #[tokio::test]
    async fn a_pull_that_cannot_start_is_an_error_with_its_reason_and_is_retried_later() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path()).unwrap();
        let mut images = Images::new(store, Err("registry CA /x: not found".into()));
        let image = Reference::parse(&format!("r.example/f@sha256:{}", "a".repeat(64))).unwrap();
        let error = images.component(&image).await.unwrap_err();
        assert!(error.contains("registry CA /x"), "{error}");
    }
}
