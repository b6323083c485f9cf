//! A filter that keeps failing gets fresh instances, then is turned off as its
//! `[disable-after]` says, while its clients are answered as its `on-error` says.

use super::*;

/// What the filter is told: keep objects it fails on; trap on every 100th object an instance
/// is given; be turned off at the third failure within 10 minutes.
const TOML: &str =
    "on-error = \"keep\"\n[disable-after]\nfailures = 3\nwithin-s = 600\n[config]\nevery = 100\n";
/// ConfigMaps listed: each list gives an instance 250 objects.
const CONFIGMAPS: usize = 250;

/// trapper, trapping on every 100th object, before lists of 250 ConfigMaps by the component
/// it filters: every list is answered whole, as `on-error = "keep"` says, while it traps and
/// is given fresh instances; at its third trap it is turned off, so it is called no more, and
/// `/v1/filters` and `/metrics` say so. Not one request fails. Installed again, it runs again.
pub fn a_filter_failing_again_and_again_is_reloaded_then_turned_off(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("tripwire"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    let ns = namespace(&env.cluster, "tripwire")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(
        &client,
        &gateway.url(),
        &ns,
        "cm",
        CONFIGMAPS,
    ))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    activate(&gateway, &dir, "trapper", "trapper", TOML)?;

    let counter = |name: &str| {
        metric_sample(gateway.hub, &format!("{name}{{filter=\"trapper\"}}")).unwrap_or(-1.0)
    };
    let status = || -> String {
        chain(&gateway)
            .ok()
            .and_then(|chain| {
                chain["filters"]
                    .as_array()?
                    .iter()
                    .find(|f| f["name"] == "trapper")
                    .and_then(|f| f["status"].as_str().map(str::to_owned))
            })
            .unwrap_or_default()
    };
    let lists = std::cell::Cell::new(0);
    let failed = std::cell::RefCell::new(Vec::new());
    let list = || {
        lists.set(lists.get() + 1);
        let n = lists.get();
        match rt.block_on(list_as(&client, &url, TEST)) {
            Ok((_, items)) if items.len() == CONFIGMAPS => {}
            Ok((_, items)) => failed
                .borrow_mut()
                .push(format!("list {n}: {} items", items.len())),
            Err(error) => failed.borrow_mut().push(format!("list {n}: {error:#}")),
        }
    };
    // 3 traps take 300 objects: two lists, whatever the batching.
    for _ in 0..4 {
        list();
    }
    let traps = metric(gateway.hub, "edgegate_filter_failures_total")?;
    ensure!(
        status() == "turned-off",
        "trapper is {:?} after {} lists: {traps} failures, {} reloads",
        status(),
        lists.get(),
        counter("edgegate_filter_instance_reloads_total")
    );
    ensure!(
        counter("edgegate_filter_turned_off_total") == 1.0,
        "turned off once"
    );
    let reloads = counter("edgegate_filter_instance_reloads_total");
    ensure!(
        reloads >= 3.0,
        "an instance replaced at each trap: {reloads}"
    );

    // Off: its calls stop, and its clients are still answered.
    let calls = counter("edgegate_filter_calls_total");
    for _ in 0..3 {
        list();
    }
    ensure!(
        counter("edgegate_filter_calls_total") == calls,
        "a filter turned off is not called"
    );
    ensure!(
        failed.borrow().is_empty(),
        "failed requests: {:?}",
        failed.borrow()
    );

    // Its files written again: a new generation, in which it runs.
    let rewritten = format!("{TOML}# again\n");
    activate(&gateway, &dir, "trapper", "trapper", &rewritten)?;
    ensure!(status() == "active", "loaded again, it is {:?}", status());
    let calls = counter("edgegate_filter_calls_total");
    list();
    ensure!(
        counter("edgegate_filter_calls_total") > calls && failed.borrow().is_empty(),
        "loaded again, it is called: {:?}",
        failed.borrow()
    );
    println!(
        "trapper (a trap every 100 objects, disable-after 3 in 600 s): {traps} failures, {reloads} instance reloads, turned off within 4 lists of {CONFIGMAPS}; {} lists, 0 failed",
        lists.get()
    );
    Ok(())
}
