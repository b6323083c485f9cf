//! YurtHub's `kube-system/yurt-hub-cfg` ConfigMap, followed live as YurtHub v1.7 follows it
//! (`pkg/yurthub/configuration`): `cache_agents` (comma-separated) adds components to those
//! cached (the defaults and `--cache-agents`), and a key naming a filter (`servicetopology`,
//! or `filter_servicetopology` as earlier YurtHubs wrote it) adds components that filter
//! applies to. Both are additive and replaced as a whole at each change; a deleted ConfigMap
//! leaves the defaults. There is no key to disable a filter (YurtHub has none either): that
//! is `--disabled-resource-filters` or `--filter-config`.
//!
//! It is watched through the gateway's own proxy as component `edgegate`, like the
//! informers, so it is cached, and after an offline restart read from the cache.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::cache::Cache;
use crate::filter::{Filters, HubComponents};
use crate::node::informer::{CONFIG_MAP_NAMESPACE as NAMESPACE, follow_config_map};

/// The ConfigMap's name.
pub const NAME: &str = "yurt-hub-cfg";

/// The key of the components cached besides the defaults.
const CACHE_AGENTS: &str = "cache_agents";

/// What the ConfigMap says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubConfig {
    /// Components cached besides the defaults and `--cache-agents`.
    pub cache_agents: Vec<String>,
    /// Components each filter applies to besides its own, by filter name.
    pub filter_components: HubComponents,
}

impl HubConfig {
    /// What the ConfigMap's `data` says (`None`: no ConfigMap).
    pub fn from_data(data: Option<&BTreeMap<String, String>>) -> HubConfig {
        let mut config = HubConfig::default();
        for (key, value) in data.into_iter().flatten() {
            if key == CACHE_AGENTS {
                config.cache_agents = list(value);
            } else {
                let filter = key.strip_prefix("filter_").unwrap_or(key);
                let components = list(value);
                if !components.is_empty() {
                    config
                        .filter_components
                        .entry(filter.to_owned())
                        .or_default()
                        .extend(components);
                }
            }
        }
        config
    }
}

/// The non-empty items of a comma-separated list, trimmed.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Follows the ConfigMap through the gateway's proxy at `proxy`: its `cache_agents` are
/// given to `cache` (when given: a cloud-mode gateway caches nothing) and its filter keys
/// to `filters`, at start and at every change, for as long as the future runs.
pub fn follow(
    proxy: SocketAddr,
    cache: Option<Arc<Cache>>,
    filters: Arc<Filters>,
) -> Result<impl Future<Output = ()> + Send + 'static, kube::Error> {
    let (mut seen, watching) = follow_config_map(proxy, "yurt-hub-cfg", NAME)?;
    let applying = async move {
        let mut applied: Option<HubConfig> = None;
        while seen.changed().await.is_ok() {
            let data = seen.borrow_and_update().clone();
            let config = HubConfig::from_data(data.as_ref());
            if applied.as_ref() == Some(&config) {
                continue;
            }
            tracing::info!(cache_agents = ?config.cache_agents, filters = ?config.filter_components, "{NAMESPACE}/{NAME} applied");
            if let Some(cache) = &cache {
                cache.set_extra_agents(&config.cache_agents);
            }
            filters
                .set_hub_components(config.filter_components.clone())
                .await;
            applied = Some(config);
        }
    };
    Ok(async move {
        tokio::join!(watching, applying);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn cache_agents_and_filter_keys_are_read_as_yurthub_reads_them() {
        let data = data(&[
            ("cache_agents", " nginx-ingress , ,my-agent"),
            ("servicetopology", "nginx-ingress,traefik"),
            ("filter_masterservice", "my-agent"),
            ("discardcloudservice", " "),
        ]);
        let config = HubConfig::from_data(Some(&data));
        assert_eq!(config.cache_agents, ["nginx-ingress", "my-agent"]);
        let expected: HubComponents = [
            ("masterservice", vec!["my-agent"]),
            ("servicetopology", vec!["nginx-ingress", "traefik"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
        .collect();
        assert_eq!(config.filter_components, expected);
    }

    #[test]
    fn cache_agents_add_to_what_the_cache_started_with_and_are_replaced_whole() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let store = Arc::new(crate::cache::RedbStore::open(dir.path()).expect("a store"));
        let cache = Cache::start(
            store,
            crate::cache::CachePolicy::new(&["kubelet", "my-flag-agent"]),
            crate::cache::CacheMetrics::default(),
        );
        let caches = |component: &str| cache.policy().caches_component(component);
        assert!(!caches("nginx-ingress"));
        cache.set_extra_agents(&["nginx-ingress".to_owned()]);
        assert!(caches("nginx-ingress") && caches("kubelet") && caches("my-flag-agent"));
        cache.set_extra_agents(&["traefik".to_owned()]);
        assert!(!caches("nginx-ingress") && caches("traefik") && caches("my-flag-agent"));
        cache.set_extra_agents(&["*".to_owned()]);
        assert!(caches("anything"));
        cache.set_extra_agents(&[]);
        assert!(!caches("anything") && !caches("traefik") && caches("kubelet"));
        cache.close();
    }

    #[test]
    fn no_configmap_is_the_defaults() {
        assert_eq!(HubConfig::from_data(None), HubConfig::default());
        assert_eq!(
            HubConfig::from_data(Some(&BTreeMap::new())),
            HubConfig::default()
        );
    }
}
