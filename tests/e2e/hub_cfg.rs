//! YurtHub's `kube-system/yurt-hub-cfg` ConfigMap, changed on a real kube-apiserver while the
//! gateway runs: its `cache_agents` changes what is cached and its per-filter keys which
//! components a filter applies to, with no restart.

use std::time::Duration;

use anyhow::{Result, ensure};
use edgegate_testkit::http;
use edgegate_testkit::process::wait_until;

use crate::support::{
    Env, apply, client, create_configmaps, get_accepting, namespace, runtime, unique,
};

const KUBELET: &str = "kubelet/v1.31.0 (linux/amd64) kubernetes/9bfc1c2";

/// The ConfigMap with `data` (a JSON object).
fn hub_cfg(data: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"yurt-hub-cfg","namespace":"kube-system"}},"data":{data}}}"#
    )
}

pub fn yurt_hub_cfg_is_followed_live(env: &Env) -> Result<()> {
    // A filter of a name no other test's gateway has, applying to no component of its own
    // but "test": the ConfigMap's key for it changes nothing elsewhere.
    let filter = unique("hubcfg-tagger");
    let agent = unique("hubcfg-agent");
    let dir = env.cluster.dir.join(&filter);
    let filters = dir.join("filters");
    std::fs::create_dir_all(&filters)?;
    let built = edgegate_testkit::filters::built(&["tagger"])?;
    std::fs::write(
        filters.join(format!("{filter}.toml")),
        "[config]\ntag = \"cfg\"\n",
    )?;
    std::fs::copy(
        built.join("tagger.wasm"),
        filters.join(format!("{filter}.wasm")),
    )?;
    let gateway = env.gateway(&[&format!("--filter-dir={}", filters.display())])?;
    let ns = namespace(&env.cluster, "hubcfg")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 2))?;
    let url = |name: &str| format!("{}/api/v1/namespaces/{ns}/configmaps/{name}", gateway.url());
    let get = |name: &str, agent: &str| -> Result<serde_json::Value> {
        let (status, body) = rt.block_on(get_accepting(
            &client,
            &url(name),
            agent,
            "application/json",
        ))?;
        ensure!(status == 200, "GET {name} as {agent}: {status}");
        Ok(serde_json::from_slice(&body)?)
    };
    let tagged = |object: &serde_json::Value| {
        object["metadata"]["annotations"]["edgegate.test/trail"] == "cfg"
    };
    let cached = |component: &str, name: &str| {
        let path = format!(
            "/v1/cache/object?component={component}&resource=configmaps.v1.core&name={ns}/{name}"
        );
        http::get(gateway.hub, &path).is_ok_and(|r| r.status == 200)
    };
    let component = agent.clone();
    let agent = format!("{agent}/1.0");

    // Before: neither cached nor filtered. The cache writes in order, so once kubelet's later
    // answer is in, the agent's would be too.
    ensure!(
        !tagged(&get("cm-0", &agent)?),
        "filtered before the ConfigMap"
    );
    get("cm-1", KUBELET)?;
    wait_until(Duration::from_secs(20), "kubelet's answer cached", || {
        cached("kubelet", "cm-1")
    })?;
    ensure!(!cached(&component, "cm-0"), "cached before the ConfigMap");

    let data = format!(r#"{{"cache_agents":"{component}","{filter}":"{component}"}}"#);
    apply(&env.cluster, &dir, "hub-cfg.json", &hub_cfg(&data))?;
    let result = (|| -> Result<()> {
        wait_until(
            Duration::from_secs(30),
            "the filter applied to the agent",
            || get("cm-0", &agent).is_ok_and(|o| tagged(&o)),
        )?;
        wait_until(
            Duration::from_secs(30),
            "the agent's answers cached",
            || get("cm-0", &agent).is_ok() && cached(&component, "cm-0"),
        )?;
        ensure!(
            !tagged(&get("cm-0", KUBELET)?),
            "the filter applies to kubelet"
        );

        // The keys gone: back to the defaults, live.
        apply(&env.cluster, &dir, "hub-cfg.json", &hub_cfg("{}"))?;
        wait_until(
            Duration::from_secs(30),
            "the filter off for the agent",
            || get("cm-0", &agent).is_ok_and(|o| !tagged(&o)),
        )?;
        get("cm-1", &agent)?;
        get("cm-0", KUBELET)?;
        wait_until(Duration::from_secs(20), "kubelet's answer cached", || {
            cached("kubelet", "cm-0")
        })?;
        ensure!(
            !cached(&component, "cm-1"),
            "still cached after the ConfigMap changed"
        );
        Ok(())
    })();
    let _ = env
        .cluster
        .kubectl(&["delete", "configmap", "yurt-hub-cfg", "-n", "kube-system"]);
    result
}
