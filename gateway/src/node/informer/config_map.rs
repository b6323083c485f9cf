//! One ConfigMap of kube-system followed by name through the gateway's proxy (cached, and
//! after an offline restart read from the cache): its `data` at start and at every change.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::client::client_through;

/// A ConfigMap's `data`; `None` while there is no such ConfigMap.
pub type Data = Option<BTreeMap<String, String>>;

/// The namespace of the ConfigMaps the gateway follows.
pub const NAMESPACE: &str = "kube-system";

/// Follows ConfigMap `name` through the proxy at `proxy` (`edgegate/VERSION PURPOSE`) for
/// as long as the returned future is polled: the receiver changes once the ConfigMap is
/// first listed (or found absent) and at every change.
pub fn follow_config_map(
    proxy: SocketAddr,
    purpose: &str,
    name: &str,
) -> Result<
    (
        watch::Receiver<Data>,
        impl Future<Output = ()> + Send + 'static,
    ),
    kube::Error,
> {
    let client = client_through(proxy, purpose)?;
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (seen_tx, seen) = watch::channel(None);
    let name = name.to_owned();
    let watching = async move {
        let mut listed: Option<ConfigMap> = None;
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let seen = match event {
                Ok(watcher::Event::Init) => {
                    listed = None;
                    continue;
                }
                Ok(watcher::Event::InitApply(map)) => {
                    listed = Some(map);
                    continue;
                }
                Ok(watcher::Event::InitDone) => listed.take(),
                Ok(watcher::Event::Apply(map)) => Some(map),
                Ok(watcher::Event::Delete(_)) => None,
                Err(error) => {
                    tracing::debug!(%error, "watching {NAMESPACE}/{name}");
                    continue;
                }
            };
            let data = seen.map(|map| map.data.unwrap_or_default());
            if seen_tx.send(data).is_err() {
                return;
            }
        }
    };
    Ok((seen, watching))
}
