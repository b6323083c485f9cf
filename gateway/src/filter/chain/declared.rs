//! Filters the cluster declares for this node (pulled by the node's fleet follower): handed
//! to the host, merged under the directory's filters of the same name, and what became of
//! each at the load they brought.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::reload::Filters;
use crate::filter::loading::dir::FilterFiles;
use crate::filter::runtime::code_store::sha256;

/// A filter the cluster declares: its component and its `NAME.toml` text.
#[derive(Clone, Debug)]
pub struct DeclaredFilter {
    /// The component's bytes.
    pub component: Vec<u8>,
    /// The `NAME.toml` it runs with.
    pub toml: String,
}

/// What became of a declared filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeclaredStatus {
    /// In the chain.
    Loaded,
    /// Present, and disabled by its settings or the gateway's.
    Disabled,
    /// In the chain, turned off by its `[disable-after]`.
    TurnedOff,
    /// Not loaded: the load failed (the previous generation serves).
    Failed,
    /// The node's filter directory holds a filter of that name, which runs instead.
    Overridden,
}

/// A declared filter's status, and why when it did not load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredState {
    /// The status.
    pub status: DeclaredStatus,
    /// The load error, when it failed.
    pub error: Option<String>,
    /// Whether the failure was this filter's own (not another's that failed the load).
    pub its_own: bool,
}

impl Filters {
    /// Makes `declared` the cluster's filters (replacing the last set), loads a generation
    /// if that changes the chain, and says what became of each.
    pub async fn set_declared(
        &self,
        declared: BTreeMap<String, DeclaredFilter>,
    ) -> BTreeMap<String, DeclaredState> {
        let files: BTreeMap<String, FilterFiles> = declared
            .into_iter()
            .map(|(name, filter)| {
                let files = FilterFiles {
                    hash: sha256(&filter.component),
                    wasm: Arc::new(filter.component),
                    toml: Some(filter.toml),
                };
                (name, files)
            })
            .collect();
        let handed: BTreeMap<String, (String, String)> = files
            .iter()
            .map(|(name, files)| {
                let toml = files.toml.clone().unwrap_or_default();
                (name.clone(), (files.hash.clone(), toml))
            })
            .collect();
        *self
            .shared
            .declared
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = files;
        self.reload_now().await;
        handed
            .into_iter()
            .map(|(name, (hash, toml))| {
                let state = self.declared_state(&name, &hash, &toml);
                (name, state)
            })
            .collect()
    }

    /// What became of the declared filter `name` with component hash `hash` and settings
    /// `toml`.
    fn declared_state(&self, name: &str, hash: &str, toml: &str) -> DeclaredState {
        let shared = &self.shared;
        let generation = shared.current.load_full();
        let state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let plain = |status| DeclaredState {
            status,
            error: None,
            its_own: false,
        };
        if state.in_directory.contains(name) {
            return plain(DeclaredStatus::Overridden);
        }
        let loaded = state.loaded_with(name, hash, toml);
        if let Some(filter) = generation
            .filters()
            .iter()
            .find(|f| loaded && &*f.name == name)
        {
            return plain(if filter.tripwire.tripped() {
                DeclaredStatus::TurnedOff
            } else {
                DeclaredStatus::Loaded
            });
        }
        if loaded && state.disabled.contains_key(name) {
            return plain(DeclaredStatus::Disabled);
        }
        let its_own = state
            .last_failure
            .as_ref()
            .is_some_and(|f| f.filter.as_deref() == Some(name));
        let error = match &state.last_failure {
            Some(failure) if its_own || failure.filter.is_none() => failure.message.clone(),
            Some(failure) => format!("the chain did not load: {}", failure.message),
            None => "not loaded".to_owned(),
        };
        DeclaredState {
            status: DeclaredStatus::Failed,
            error: Some(error),
            its_own,
        }
    }
}
