//! `inclusterconfig`: comments out the `kubeconfig:` line of kube-proxy's config (key
//! `config.conf` of the ConfigMap `kube-system/kube-proxy`) as kubelet fetches it for the
//! kube-proxy pod. Without a kubeconfig kube-proxy uses its in-cluster config, that is the
//! `default/kubernetes` Service, which `masterservice` points at the gateway: so kube-proxy
//! on an edge node goes through the gateway too. Every other byte is left as it was.
//!
//! It takes no config.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde::Deserialize;
use serde_json::Value;

/// The ConfigMap kubeadm writes kube-proxy's config to.
const KUBE_PROXY: (&str, &str) = ("kube-system", "kube-proxy");

/// Its key that holds the KubeProxyConfiguration (YAML).
const CONFIG_KEY: &str = "config.conf";

/// The YAML key that gives kube-proxy a kubeconfig file.
const KUBECONFIG_KEY: &str = "kubeconfig:";

/// Rewrites run after the filters that drop or prune, on what is left.
const PRIORITY: i32 = 50;

/// The filter; it takes no config.
#[derive(Deserialize)]
pub struct InClusterConfig;

impl Filter for InClusterConfig {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("inclusterconfig", env!("CARGO_PKG_VERSION"))
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["kubelet"])
            .priority(PRIORITY)
            .no_config()
    }

    fn filter(&self, _ctx: &Context, configmap: &mut Object) -> Decision {
        if !configmap.is_named(KUBE_PROXY.0, KUBE_PROXY.1) {
            return Decision::Keep;
        }
        // The key holds a dot, so it is reached from `data`, not by path.
        let Some(Value::String(config)) = configmap
            .get_mut("data")
            .and_then(|data| data.get_mut(CONFIG_KEY))
        else {
            return Decision::Keep;
        };
        let Some(commented) = comment_out_kubeconfig(config) else {
            return Decision::Keep;
        };
        *config = commented;
        host::count("commented", 1);
        Decision::Keep
    }
}

/// `text` with a `#` before every `kubeconfig:` key, or `None` if it has none (or only
/// commented ones). Indentation and line endings stay byte for byte.
fn comment_out_kubeconfig(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 1);
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let key = line.trim_start_matches(' ');
        if key.starts_with(KUBECONFIG_KEY) {
            out.push_str(&line[..line.len() - key.len()]);
            out.push('#');
            out.push_str(key);
            changed = true;
        } else {
            out.push_str(line);
        }
    }
    changed.then_some(out)
}

export_filter!(InClusterConfig);
