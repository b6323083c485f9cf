//! Hot reload under load.

use super::*;

/// Hot reload under load: 100 swaps (add, change, remove) while 20 clients list and watch
/// through the gateway → no failed request, and each new generation goes live, its new
/// component compiled once in a child process (the compiler's memory leaves with it) and
/// mapped from the compiled-code store each time it is added again. The
/// rename → live latencies are printed; `benches/load/run` measures them against the 1 s goal.
pub fn hot_reload_under_load(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("reload"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    let ns = namespace(&env.cluster, "reload")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 5))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    let lists = Arc::new(AtomicUsize::new(0));
    let watches = Arc::new(AtomicUsize::new(0));
    let relists = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut clients = Vec::new();
    for _ in 0..10 {
        let (client, url, lists, failures) =
            (client.clone(), url.clone(), lists.clone(), failures.clone());
        clients.push(rt.spawn(async move {
            loop {
                // JSON only: with no filter in the chain the list passes through as it came.
                match list_json_as(&client, &url, TEST).await {
                    Ok((_, items)) if items.len() == 5 => {
                        lists.fetch_add(1, Ordering::SeqCst);
                    }
                    other => failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("list: {other:?}")),
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
    }
    for _ in 0..10 {
        let (client, url, watches, relists, failures) = (
            client.clone(),
            url.clone(),
            watches.clone(),
            relists.clone(),
            failures.clone(),
        );
        clients.push(rt.spawn(async move {
            loop {
                let mut watch = match Watch::open(&client, &format!("{url}?watch=true"), TEST).await
                {
                    Ok(watch) => watch,
                    Err(error) => {
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("watch open: {error:#}"));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                watches.fetch_add(1, Ordering::SeqCst);
                // Read until the gateway ends the watch because the chain changed: it says
                // so with a 410, which makes a real client re-list.
                loop {
                    match watch.next(Duration::from_secs(60)).await {
                        Ok(Some(event))
                            if event["type"] == "ERROR" && event["object"]["code"] == 410 =>
                        {
                            relists.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(error) => {
                            failures
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(format!("watch: {error:#}"));
                            break;
                        }
                    }
                }
            }
        }));
    }

    let mut latencies = Vec::new();
    let mut live = 0u64;
    for swap in 0..100 {
        let name = format!("t{}", swap / 3);
        let before = generation(&gateway)?;
        let at = match swap % 3 {
            0 => dir.install(&name, "tagger", &format!("[config]\ntag = \"{name}-a\"\n"))?,
            1 => dir.write(
                &format!("{name}.toml"),
                format!("[config]\ntag = \"{name}-b\"\n").as_bytes(),
            )?,
            _ => dir.remove(&name)?,
        };
        let (now, took) = next_generation(&gateway, before, at)?;
        live = now;
        latencies.push(took);
    }
    std::thread::sleep(Duration::from_secs(2));
    for client in clients {
        client.abort();
    }
    latencies.sort();
    let (lists, watches, relists) = (
        lists.load(Ordering::SeqCst),
        watches.load(Ordering::SeqCst),
        relists.load(Ordering::SeqCst),
    );
    let failures = failures.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (in_child, in_gateway) =
        crate::support::by_place(gateway.hub, "edgegate_filter_compiles_total")?;
    let stored = crate::support::metric(gateway.hub, "edgegate_filter_stored_loads_total")?;
    println!(
        "100 swaps up to generation {live}: rename → live p50 {:?}, p90 {:?}, max {:?}; {lists} lists, {watches} watch opens, {relists} told to re-list, {} failures; {in_child} compiles in a child process, {in_gateway} in the gateway's, {stored} loads from the store",
        latencies[50],
        latencies[90],
        latencies[99],
        failures.len()
    );
    ensure!(
        in_child == 1.0 && in_gateway == 0.0 && stored >= 33.0,
        "the tagger is compiled once, in a child process, and mapped from the store when added again: {in_child} compiles there, {in_gateway} in the gateway, {stored} loads from the store"
    );
    ensure!(
        failures.is_empty(),
        "failed requests: {:?}",
        &failures[..failures.len().min(5)]
    );
    ensure!(
        lists > 100 && watches > 10,
        "the clients were busy: {lists} lists, {watches} watches"
    );
    Ok(())
}
