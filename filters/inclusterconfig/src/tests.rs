//! YurtHub's inclusterconfig cases on the ConfigMap kubeadm 1.20 writes.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Harness;
use edgegate_filter_sdk::testing::Output;
use serde_json::{Value, json};

use super::*;

const KUBE_PROXY_CONFIGMAP: &str = include_str!("../fixtures/kube-proxy.configmap.json");

fn configmap() -> Value {
    serde_json::from_str(KUBE_PROXY_CONFIGMAP).unwrap()
}

fn decide(configmap: &Value) -> Output {
    let harness = Harness::<InClusterConfig>::configure(json!({})).unwrap();
    let ctx = Context::new("kubelet", Verb::Get, Resource::new("", "v1", "configmaps"))
        .namespace("kube-system");
    harness.filter(&ctx.node_name("edge-1"), configmap)
}

#[test]
fn the_kubeconfig_line_is_commented_out_and_nothing_else_changes() {
    let before = configmap();
    let mut after = decide(&before).json().unwrap();
    let config = before["data"][CONFIG_KEY].as_str().unwrap();
    let expected = config.replace(
        "\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n",
        "\n  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n",
    );
    assert_ne!(expected, config);
    assert_eq!(after["data"][CONFIG_KEY], expected);
    // The other key, the metadata (resourceVersion too): untouched.
    after["data"][CONFIG_KEY] = before["data"][CONFIG_KEY].clone();
    assert_eq!(after, before);
}

#[test]
fn a_config_without_an_active_kubeconfig_is_kept() {
    let mut configmap = configmap();
    let config = configmap["data"][CONFIG_KEY].as_str().unwrap().to_owned();
    for text in [
        config.replace("  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n", ""),
        config.replace("  kubeconfig:", "  #kubeconfig:"),
        config.replace("  kubeconfig:", "  kubeconfigPath:"),
        String::new(),
    ] {
        configmap["data"][CONFIG_KEY] = json!(text);
        assert_eq!(decide(&configmap), Output::Keep);
    }
    configmap["data"] = json!({"kubeconfig.conf": "kubeconfig: x\n"});
    assert_eq!(decide(&configmap), Output::Keep, "no config.conf");
    configmap.as_object_mut().unwrap().remove("data");
    assert_eq!(decide(&configmap), Output::Keep, "no data");
}

#[test]
fn only_config_conf_of_kube_system_kube_proxy_is_touched() {
    let mut configmap = configmap();
    configmap["data"]["extra.conf"] = json!("kubeconfig: /etc/extra\n");
    let after = decide(&configmap).json().unwrap();
    assert_eq!(after["data"]["extra.conf"], "kubeconfig: /etc/extra\n");
    for (namespace, name) in [
        ("default", "kube-proxy"),
        ("kube-system", "kube-proxy-windows"),
    ] {
        let mut other = configmap.clone();
        other["metadata"]["namespace"] = json!(namespace);
        other["metadata"]["name"] = json!(name);
        assert_eq!(decide(&other), Output::Keep, "{namespace}/{name}");
    }
}

#[test]
fn indentation_and_line_endings_are_kept_byte_for_byte() {
    let commented = |text: &str| comment_out_kubeconfig(text);
    assert_eq!(
        commented("kubeconfig: a").as_deref(),
        Some("#kubeconfig: a")
    );
    assert_eq!(
        commented("a: 1\r\n    kubeconfig: /k\r\nb: 2").as_deref(),
        Some("a: 1\r\n    #kubeconfig: /k\r\nb: 2")
    );
    assert_eq!(
        commented("kubeconfig:\n\n  kubeconfig: ''\n").as_deref(),
        Some("#kubeconfig:\n\n  #kubeconfig: ''\n")
    );
    assert_eq!(commented("x: kubeconfig: y\n"), None);
}

#[test]
fn the_manifest_asks_for_kubelets_configmaps() {
    let manifest = InClusterConfig::manifest();
    assert_eq!(manifest.components, ["kubelet"]);
    assert_eq!(manifest.matches[0].resources, ["configmaps"]);
    assert_eq!(
        manifest.matches[0].verbs,
        [Verb::Get, Verb::List, Verb::Watch]
    );
}
