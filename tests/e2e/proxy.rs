//! The gateway as a pass-through proxy in front of a real kube-apiserver.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{ADMIN_TOKEN, NOBODY_TOKEN, http};

use crate::support::{Env, Watch, client, get, namespace, request, runtime, unique};

/// kubectl get, create, apply, delete and get -w give the same results through the gateway
/// as directly; `/version` says v1.20.2, the harness's Kubernetes.
pub fn kubectl_through_the_gateway_matches_direct(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "kubectl")?;
    let via = |args: &[&str]| gateway.kubectl(args);
    let direct = |args: &[&str]| env.cluster.kubectl(args);

    via(&[
        "create",
        "configmap",
        "made-via",
        "-n",
        &ns,
        "--from-literal=k=v",
    ])?;
    direct(&[
        "create",
        "configmap",
        "made-direct",
        "-n",
        &ns,
        "--from-literal=k=v",
    ])?;
    let manifest = gateway.dir.join("applied.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {ns}\ndata:\n  k: v1\n"
        ),
    )?;
    let apply = format!("{}", manifest.display());
    via(&["apply", "-f", &apply])?;
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {ns}\ndata:\n  k: v2\n"
        ),
    )?;
    via(&["apply", "-f", &apply])?;

    for args in [
        &["get", "configmaps", "-n", &ns, "-o", "name"][..],
        &[
            "get",
            "configmap",
            "applied",
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.k}",
        ],
        &["get", "configmap", "made-via", "-n", &ns, "-o", "json"],
        &["get", "namespaces", &ns, "-o", "json"],
        &[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{ns}/configmaps/made-direct"),
        ],
        &["api-resources", "--verbs=list", "-o", "name"],
        &["get", "--raw", "/version"],
    ] {
        assert_eq!(via(args)?, direct(args)?, "kubectl {}", args.join(" "));
    }
    // The harness's kube-apiserver says which Kubernetes it is.
    let version: serde_json::Value = serde_json::from_str(&via(&["get", "--raw", "/version"])?)?;
    ensure!(
        version["gitVersion"] == "v1.20.2" && version["minor"] == "20",
        "/version: {version}"
    );
    assert_eq!(
        via(&[
            "get",
            "configmap",
            "applied",
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.k}"
        ])?,
        "v2"
    );

    // get -w through the gateway sees a change made directly.
    let mut watcher = Command::new(&env.tools.kubectl)
        .arg("--kubeconfig")
        .arg(&gateway.admin_kubeconfig)
        .args(["get", "configmaps", "-n", &ns, "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = watcher.stdout.take().context("kubectl stdout")?;
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // The initial listing comes first; then the new object.
    let wait_line = |want: &str| -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines_rx
                .recv_timeout(left)
                .with_context(|| format!("kubectl get -w never printed {want}"))?;
            if line.trim() == want {
                return Ok(());
            }
        }
    };
    wait_line("configmap/applied")?;
    direct(&["create", "configmap", "watched", "-n", &ns])?;
    wait_line("configmap/watched")?;
    let _ = watcher.kill();
    let _ = watcher.wait();

    via(&["delete", "configmap", "made-via", "-n", &ns])?;
    let gone = direct(&["get", "configmap", "made-via", "-n", &ns]);
    ensure!(
        gone.as_ref()
            .is_err_and(|e| e.to_string().contains("NotFound")),
        "deleted through the gateway, but direct get says {gone:?}"
    );
    let missing_via = via(&["get", "configmap", "made-via", "-n", &ns])
        .expect_err("the deleted object is gone through the gateway")
        .to_string();
    let missing_direct = direct(&["get", "configmap", "made-via", "-n", &ns])
        .expect_err("the deleted object is gone directly")
        .to_string();
    assert_eq!(
        missing_via.rsplit_once("failed: ").map(|p| p.1),
        missing_direct.rsplit_once("failed: ").map(|p| p.1),
        "the NotFound error reads the same"
    );
    Ok(())
}

/// A watch opened through the gateway receives an object created afterwards while the watch
/// is still open: the event is streamed as it happens, not held until the response ends.
/// kube-apiserver keeps the watch open for `timeoutSeconds` (five minutes); the guard waits a
/// tenth of that, so only a gateway that holds events back misses it. How soon events arrive
/// is the load harness's to measure (watch added p99), not this test's.
pub fn watch_event_arrives_while_the_watch_is_open(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "watch")?;
    runtime().block_on(async {
        let client = client();
        let list_url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
        let (status, body) = get(&client, &list_url).await?;
        ensure!(status == 200, "list answered {status}");
        let list: serde_json::Value = serde_json::from_slice(&body)?;
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .context("list has an RV")?
            .to_owned();
        let mut watch = Watch::open(
            &client,
            &format!("{list_url}?watch=true&resourceVersion={rv}&timeoutSeconds=300"),
            "e2e/v1",
        )
        .await?;

        let name = unique("fresh");
        let since = Instant::now();
        let created = tokio::task::spawn_blocking({
            let kubeconfig = env.cluster.admin_kubeconfig.clone();
            let tools = env.tools.clone();
            let ns = ns.clone();
            let name = name.clone();
            move || {
                edgegate_testkit::cluster::kubectl(
                    &tools,
                    &kubeconfig,
                    &["create", "configmap", &name, "-n", &ns],
                )
            }
        })
        .await??;
        ensure!(created.contains(&name), "kubectl create said {created}");
        let event = watch
            .wait_for("ADDED", &name, Duration::from_secs(30))
            .await?;
        println!(
            "ADDED {name} reached the watch {:?} after kubectl create started",
            since.elapsed()
        );
        ensure!(event["object"]["metadata"]["namespace"] == ns.as_str());
        Ok(())
    })
}

/// 50 concurrent watches and 500 GETs through the gateway all succeed, and every watch is live.
pub fn fifty_watches_and_five_hundred_gets(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "load")?;
    env.cluster.kubectl(&[
        "create",
        "configmap",
        "target",
        "-n",
        &ns,
        "--from-literal=k=v",
    ])?;
    runtime().block_on(async {
        let client = client();
        let base = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
        let mut watches = Vec::new();
        for i in 0..50 {
            let agent = format!("watcher-{i}/v1");
            watches.push(Watch::open(&client, &format!("{base}?watch=true"), &agent).await?);
        }
        let gets = (0..500).map(|_| {
            let client = client.clone();
            let url = format!("{base}/target");
            async move { get(&client, &url).await }
        });
        let mut failures = 0;
        let mut stream = futures_util::stream::iter(gets).buffer_unordered(50);
        use futures_util::StreamExt;
        while let Some(result) = stream.next().await {
            match result {
                Ok((status, _)) if status == 200 => {}
                other => {
                    failures += 1;
                    eprintln!("GET failed: {other:?}");
                }
            }
        }
        ensure!(failures == 0, "{failures} of 500 GETs failed");

        let name = unique("broadcast");
        env.cluster
            .kubectl(&["create", "configmap", &name, "-n", &ns])?;
        for (i, watch) in watches.iter_mut().enumerate() {
            watch
                .wait_for("ADDED", &name, Duration::from_secs(10))
                .await
                .with_context(|| format!("watch {i}"))?;
        }
        Ok(())
    })
}

/// A request with its own Authorization keeps that identity; one without gets the gateway's.
pub fn identities_are_kept_apart(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    runtime().block_on(async {
        let client = client();
        let url = format!("{}/api/v1/namespaces/default/configmaps", gateway.url());
        let as_nobody = client
            .request(request(::http::Method::GET, &url, Some(NOBODY_TOKEN), "e2e/v1", None)?)
            .await?;
        ensure!(
            as_nobody.status() == 403,
            "a token with no grants must be refused, not upgraded to the gateway's certificate; got {}",
            as_nobody.status()
        );
        let anonymous = client
            .request(request(::http::Method::GET, &url, None, "kubelet/v1.20.2", None)?)
            .await?;
        ensure!(
            anonymous.status() == 200,
            "a request without credentials borrows the gateway's identity; got {}",
            anonymous.status()
        );
        // Impersonation headers are dropped from requests on the borrowed identity: were
        // they kept, the apiserver would act as "nobody" and refuse.
        let mut impersonating = request(::http::Method::GET, &url, None, "kubelet/v1.20.2", None)?;
        impersonating.headers_mut().insert("impersonate-user", "nobody".parse()?);
        let impersonated = client.request(impersonating).await?;
        ensure!(
            impersonated.status() == 200,
            "impersonation on the gateway's identity must be stripped; got {}",
            impersonated.status()
        );
        Ok(())
    })
}

/// `kubectl` through the gateway without a token: the gateway's client certificate is used.
pub fn anonymous_kubectl_uses_the_gateway_identity(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let out = edgegate_testkit::cluster::kubectl(
        &env.tools,
        &gateway.anonymous_kubeconfig,
        &["get", "namespace", "default", "-o", "name"],
    )?;
    ensure!(out.trim() == "namespace/default", "{out}");
    Ok(())
}

/// HTTP/1.1 Upgrade is tunneled: through the apiserver's node proxy (the path exec and
/// port-forward take to a kubelet) to a backend that switches protocols and echoes bytes.
pub fn upgrade_is_tunneled(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let transcript = crate::upgrade_echo::tunnel(env, &gateway, &["ping\n", "pong\n"])?;
    ensure!(transcript == "ping\npong\n", "echoed {transcript:?}");
    Ok(())
}

/// The hub server answers healthz, readyz and metrics, and the metrics count requests by
/// component.
pub fn hub_server_reports_health_and_metrics(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let healthz = http::get(gateway.hub, "/v1/healthz")?;
    ensure!(
        healthz.status == 200 && healthz.body.contains("OK"),
        "{healthz:?}"
    );
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(readyz.status == 200, "{readyz:?}");
    gateway.kubectl(&["get", "namespaces"])?;
    let metrics = http::get(gateway.hub, "/metrics")?;
    ensure!(metrics.status == 200);
    for needle in [
        r#"edgegate_requests_total{component="kubectl",verb="list",resource="namespaces",code="200"}"#,
        "edgegate_in_flight_requests",
        "edgegate_response_bytes_total",
        &format!(
            r#"edgegate_upstream_healthy{{server="{}"}} 1"#,
            env.cluster.url()
        ),
    ] {
        ensure!(
            metrics.body.contains(needle),
            "metrics lack {needle}:\n{}",
            metrics.body
        );
    }
    Ok(())
}

/// The HTTPS proxy (YurtHub's secure port), where masterservice sends in-cluster pods:
/// served with a certificate of the cluster's CA, it takes a client's own token like the
/// plain proxy does.
pub fn https_proxy_serves_like_the_apiserver(env: &Env) -> Result<()> {
    let (gateway, port) = env.https_gateway()?;
    let kubeconfig = gateway.dir.join("https.kubeconfig");
    env.cluster.kubeconfig_for(
        &kubeconfig,
        &format!("https://127.0.0.1:{port}"),
        &edgegate_testkit::User::Token(ADMIN_TOKEN),
    )?;
    let via = edgegate_testkit::cluster::kubectl(
        &env.tools,
        &kubeconfig,
        &["get", "namespace", "default", "-o", "name"],
    )?;
    ensure!(via.trim() == "namespace/default", "{via}");
    let nobody = gateway.dir.join("nobody.kubeconfig");
    env.cluster.kubeconfig_for(
        &nobody,
        &format!("https://127.0.0.1:{port}"),
        &edgegate_testkit::User::Token(NOBODY_TOKEN),
    )?;
    let refused = edgegate_testkit::cluster::kubectl(&env.tools, &nobody, &["get", "secrets"]);
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("Forbidden")),
        "a pod's own token is kept over TLS: {refused:?}"
    );
    Ok(())
}
