//! Hostile filters never stop the service.

use super::*;

/// Hostile filters, each while other clients keep being served: a loop is stopped at its
/// deadline and its policy applied; a memory bomb hits the cap; a trap recycles the instance
/// and the next call succeeds; an oversized replace is refused; a config that breaks its
/// schema (checked in a child process) and a truncated `.wasm` are rejected, and the
/// previous generation keeps serving.
pub fn hostile_filters_never_stop_the_service(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("hostile"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    let ns = namespace(&env.cluster, "hostile")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 3))?;
    env.cluster.kubectl(&[
        "label",
        "configmap",
        "cm-1",
        "-n",
        &ns,
        "edgegate.test/trap=yes",
    ])?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    // The other clients: lists as a component no test filter touches, all the while.
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let background = {
        let (client, url, served, failed) =
            (client.clone(), url.clone(), served.clone(), failed.clone());
        rt.spawn(async move {
            loop {
                match list_as(&client, &url, OTHER).await {
                    Ok((_, items)) if items.len() == 3 => served.fetch_add(1, Ordering::SeqCst),
                    _ => failed.fetch_add(1, Ordering::SeqCst),
                };
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let list = |agent: &str| rt.block_on(list_as(&client, &url, agent));
    let failures = || metric(gateway.hub, "edgegate_filter_failures_total").unwrap_or(0.0);

    let loop_limits = "[limits]\ndeadline-ms = 20\n";
    for (policy, want) in [("keep", 3), ("drop", 0)] {
        activate(
            &gateway,
            &dir,
            "looper",
            "looper",
            &format!("on-error = \"{policy}\"\n{loop_limits}"),
        )?;
        let before = failures();
        let started = Instant::now();
        let (_, items) = list(TEST)?;
        println!(
            "looper on-error={policy}: {} items after {:?}",
            items.len(),
            started.elapsed()
        );
        ensure!(
            items.len() == want,
            "looper on-error={policy}: {} items",
            items.len()
        );
        ensure!(failures() > before, "the stopped calls are counted");
        deactivate(&gateway, &dir, "looper")?;
    }
    activate(
        &gateway,
        &dir,
        "looper",
        "looper",
        &format!("on-error = \"fail\"\n{loop_limits}"),
    )?;
    let (status, body) = rt.block_on(get_as(&client, &format!("{url}/cm-0"), TEST))?;
    let status_body: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(
        status == 500 && status_body["kind"] == "Status",
        "a fail-closed filter fails a get: {status} {status_body}"
    );
    ensure!(
        list(TEST).is_err(),
        "a fail-closed filter breaks the list off"
    );
    deactivate(&gateway, &dir, "looper")?;

    activate(
        &gateway,
        &dir,
        "membomb",
        "membomb",
        "[limits]\nmemory-mib = 16\n",
    )?;
    let before = failures();
    let (_, items) = list(TEST)?;
    ensure!(
        items.len() == 3 && failures() > before,
        "the memory bomb is capped and its objects kept"
    );
    deactivate(&gateway, &dir, "membomb")?;

    activate(
        &gateway,
        &dir,
        "trapper",
        "trapper",
        "on-error = \"drop\"\n",
    )?;
    let (_, items) = list(TEST)?;
    ensure!(
        names(&items) == ["cm-0", "cm-2"],
        "the trapped object is dropped, the next served: {:?}",
        names(&items)
    );
    let (_, again) = list(TEST)?;
    ensure!(
        names(&again) == ["cm-0", "cm-2"],
        "a fresh instance serves the next list"
    );
    deactivate(&gateway, &dir, "trapper")?;

    activate(
        &gateway,
        &dir,
        "bloater",
        "bloater",
        "[limits]\nmax-output-kib = 64\n",
    )?;
    let (_, items) = list(TEST)?;
    ensure!(
        items.len() == 3 && items.iter().all(|i| i["data"]["index"].is_string()),
        "the oversized replace is refused, the originals kept"
    );
    deactivate(&gateway, &dir, "bloater")?;

    activate(
        &gateway,
        &dir,
        "tagger",
        "tagger",
        "[config]\ntag = \"good\"\n",
    )?;
    let load_error = || {
        chain(&gateway).map(|c| {
            c["filters"]
                .as_array()
                .and_then(|f| f.iter().find(|f| f["name"] == "tagger"))
                .map_or(serde_json::Value::Null, |f| f["lastLoadError"].clone())
        })
    };
    dir.write("tagger.toml", b"[config]\ntag = 7\n")?;
    wait_until(
        Duration::from_secs(10),
        "the config that breaks the schema to be refused",
        || load_error().is_ok_and(|e| e.as_str().is_some_and(|e| e.contains("/tag"))),
    )?;
    dir.write("tagger.toml", b"[config]\ntag = \"good\"\n")?;
    wait_until(Duration::from_secs(10), "the good config back", || {
        load_error().is_ok_and(|e| e.is_null())
    })?;
    let (in_child, in_gateway) =
        crate::support::by_place(gateway.hub, "edgegate_filter_config_checks_total")?;
    ensure!(
        in_child >= 2.0 && in_gateway == 0.0,
        "configs are checked in a child process: {in_child} there, {in_gateway} in the gateway"
    );
    let before = generation(&gateway)?;
    let whole = std::fs::read(dir.built.join("tagger.wasm"))?;
    dir.write("tagger.wasm", &whole[..whole.len() / 2])?;
    wait_until(
        Duration::from_secs(10),
        "the truncated file to be rejected",
        || chain(&gateway).is_ok_and(|c| !c["lastLoadError"].is_null()),
    )?;
    ensure!(
        generation(&gateway)? == before,
        "a rejected file makes no generation"
    );
    let (_, items) = list(TEST)?;
    ensure!(
        items
            .iter()
            .all(|i| i["metadata"]["annotations"]["edgegate.test/trail"] == "good"),
        "the previous generation keeps serving"
    );

    background.abort();
    let (served, failed) = (served.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    println!("other clients meanwhile: {served} lists served, {failed} failed");
    ensure!(
        failed == 0 && served > 10,
        "other clients: {served} served, {failed} failed"
    );
    Ok(())
}
