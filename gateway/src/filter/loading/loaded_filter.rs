//! A loaded filter: its manifest, the settings it runs with, and its pool of configured
//! instances, reused across responses (a response checks one out for its whole life and
//! returns it at the end, unless the instance trapped).

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use edgegate_filter_sdk::{Manifest, Verb};

use super::options::RunSettings;
use super::tripwire::Tripwire;
use crate::filter::runtime::instance::{Failure, Instance, Instantiator};

/// Idle instances kept per filter: enough for the responses a 2–4 core edge node filters at
/// once; more are made on demand (microseconds with the pooling allocator) and dropped when
/// returned to a full pool.
const MAX_IDLE: usize = 8;

/// A filter of one generation, ready to serve.
pub(crate) struct LoadedFilter {
    /// The filter's name (its file stem).
    pub(crate) name: Arc<str>,
    /// What the filter says about itself.
    pub(crate) manifest: Manifest,
    /// SHA-256 of the `.wasm`, hex.
    pub(crate) hash: String,
    /// The settings it runs with.
    pub(crate) effective: RunSettings,
    /// Names the code, settings and config: equal identities filter alike.
    pub(crate) identity: u64,
    /// Its recent failures, which may turn it off.
    pub(crate) tripwire: Tripwire,
    config_text: String,
    instantiator: Instantiator,
    idle: Mutex<Vec<Instance>>,
}

impl LoadedFilter {
    /// A loaded filter whose pool starts with `first`, an instance already configured.
    pub(crate) fn new(
        manifest: Manifest,
        hash: String,
        effective: RunSettings,
        instantiator: Instantiator,
        first: Instance,
    ) -> LoadedFilter {
        let config_text = effective.config.to_string();
        let mut hasher = std::hash::DefaultHasher::new();
        (&*instantiator.name, &hash, &config_text).hash(&mut hasher);
        (
            effective.priority,
            &effective.components,
            effective.on_error,
        )
            .hash(&mut hasher);
        effective.limits.hash(&mut hasher);
        effective.disable_after.hash(&mut hasher);
        let disable_after = effective.disable_after;
        LoadedFilter {
            name: Arc::clone(&instantiator.name),
            manifest,
            hash,
            effective,
            identity: hasher.finish(),
            tripwire: Tripwire::new(disable_after),
            config_text,
            instantiator,
            idle: Mutex::new(vec![first]),
        }
    }

    /// The instantiator that makes and calls its instances.
    pub(crate) fn instantiator(&self) -> &Instantiator {
        &self.instantiator
    }

    /// Whether the filter handles `verb` on `group`/`resource` for `component`.
    pub(crate) fn applies(&self, group: &str, resource: &str, verb: Verb, component: &str) -> bool {
        self.effective.components.contains(component)
            && self.manifest.matches.iter().any(|m| {
                m.group == group
                    && m.verbs.contains(&verb)
                    && m.resources.iter().any(|r| r == resource)
            })
    }

    /// An idle instance, or a new configured one.
    pub(crate) fn checkout(&self) -> Result<Instance, Failure> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        match idle {
            Some(instance) => Ok(instance),
            None => self.instantiator.configured(&self.config_text),
        }
    }

    /// Returns a healthy instance to the pool.
    pub(crate) fn checkin(&self, instance: Instance) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(instance);
        }
    }
}
