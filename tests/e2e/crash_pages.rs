//! Crash safety of paginated lists: kill -9 the gateway at random moments while a client
//! pages through a large list (`limit` and `continue`), whose set is committed only after
//! its last page.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::crash::{Bed, CACHER, OBJECTS, Verdicts, mutated, read_set};
use crate::support::Env;
use crate::support::{Plain, client, get_as, runtime, versions};

const ROUNDS: usize = 20;
const PAGE: usize = 1000;

/// kill -9 the gateway at random moments while a client pages through 5 000 ConfigMaps
/// 1 000 at a time, 20 times: afterwards the store opens and holds the complete old set or
/// the complete new one, never the pages read so far; the restart → first page served
/// times are printed.
pub fn kill_nine_while_paging_leaves_the_old_set_or_the_new(env: &Env) -> Result<()> {
    let rt = runtime();
    let client = client();
    let Bed {
        ns,
        admin,
        mut victim,
        direct,
        cached,
    } = Bed::seeded(env, &rt, &client, "crash", "e2e-cacher", OBJECTS)?;

    let started = Instant::now();
    let first = rt.block_on(page_through(&client, &cached))?;
    let paging_time = started.elapsed();
    ensure!(first.len() == OBJECTS, "{} of {OBJECTS} items", first.len());
    crate::support::wait_sets(victim.hub, "e2e-cacher", 1)?;
    victim.kill();
    let mut committed = read_set(&victim, &ns)?.context("the first paged list is committed")?;
    ensure!(committed == first, "the first paged list is cached whole");
    victim.restart()?;

    let window = paging_time.saturating_mul(2).max(Duration::from_millis(20));
    let mut verdicts = Verdicts::within(window);
    let mut serving = Vec::new();
    for round in 0..ROUNDS {
        let truth = rt.block_on(mutated(&client, &admin.url(), &ns, &direct, round))?;

        let delay = verdicts.next_delay();
        let paging = {
            let (client, cached) = (client.clone(), cached.clone());
            rt.spawn(async move { page_through(&client, &cached).await })
        };
        std::thread::sleep(delay);
        victim.kill();
        let _ = rt.block_on(paging);

        let after = read_set(&victim, &ns)?.unwrap_or_default();
        verdicts.judge(round, delay, &after, &committed, &truth)?;
        committed = after;
        let restarted = Instant::now();
        victim.restart()?;
        let first_page = format!("{cached}?limit={PAGE}");
        edgegate_testkit::process::wait_until(
            Duration::from_secs(30),
            "the restarted gateway to serve",
            || {
                rt.block_on(get_as(&client, &first_page, CACHER))
                    .is_ok_and(|(status, _)| status == 200)
            },
        )?;
        serving.push(restarted.elapsed());
    }
    serving.sort();
    println!(
        "{ROUNDS} kills within {window:?} of paging through {OBJECTS} objects {PAGE} at a time (one pass takes {paging_time:?}): {verdicts}, never a part; restart → first page served: median {:?}, max {:?}",
        serving[serving.len() / 2],
        serving[serving.len() - 1]
    );
    verdicts.both_seen()
}

/// Pages through `url` as the cacher; `name → resourceVersion` of every item.
async fn page_through(
    client: &Plain,
    url: &str,
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut token = String::new();
    let mut items = Vec::new();
    loop {
        let page_url = if token.is_empty() {
            format!("{url}?limit={PAGE}")
        } else {
            format!("{url}?limit={PAGE}&continue={token}")
        };
        let (status, body) = get_as(client, &page_url, CACHER).await?;
        ensure!(status == 200, "a page answered {status}");
        let page: serde_json::Value = serde_json::from_slice(&body)?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        token = page["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            return Ok(versions(&items));
        }
    }
}
