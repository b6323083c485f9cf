//! Crash safety: kill -9 the gateway at random moments while it caches a large list.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate::cache::{RedbStore, ResourceKey, Store};
use edgegate_testkit::Gateway;
use http_body_util::BodyExt;

use crate::support::{
    Env, Plain, client, create_configmaps, get, get_as, list_as, namespace, request, runtime,
    versions,
};

pub(crate) const OBJECTS: usize = 5000;
const ROUNDS: usize = 20;
pub(crate) const CACHER: &str = "e2e-cacher/v1";

/// What each kill -9 test starts from: a namespace of ConfigMaps in the cloud, a gateway
/// straight to it (`admin`), and the `victim`, which caches one agent's responses.
pub(crate) struct Bed {
    /// The namespace.
    pub ns: String,
    /// A gateway caching nothing the tests ask, to read and write the cloud's truth.
    pub admin: Gateway,
    /// The gateway that is killed.
    pub victim: Gateway,
    /// The namespace's ConfigMaps through `admin`.
    pub direct: String,
    /// The namespace's ConfigMaps through `victim`.
    pub cached: String,
}

impl Bed {
    /// A fresh namespace named after `tag` with `objects` ConfigMaps (`<tag>-<i>`), and a
    /// victim caching `agent`.
    pub fn seeded(
        env: &Env,
        rt: &tokio::runtime::Runtime,
        client: &Plain,
        tag: &str,
        agent: &str,
        objects: usize,
    ) -> Result<Bed> {
        let ns = namespace(&env.cluster, tag)?;
        let admin = env.gateway(&[])?;
        let victim = env.gateway(&[&format!("--cache-agents={agent}")])?;
        rt.block_on(create_configmaps(client, &admin.url(), &ns, tag, objects))?;
        let direct = format!("{}/api/v1/namespaces/{ns}/configmaps", admin.url());
        let cached = format!("{}/api/v1/namespaces/{ns}/configmaps", victim.url());
        Ok(Bed {
            ns,
            admin,
            victim,
            direct,
            cached,
        })
    }
}

/// kill -9 the gateway at random moments during a LIST of 5 000 ConfigMaps, 20 times:
/// afterwards the store opens and holds either the complete old set or the complete new
/// set, never a mix.
pub fn kill_nine_during_a_list_leaves_the_old_set_or_the_new(env: &Env) -> Result<()> {
    let rt = runtime();
    let client = client();
    let Bed {
        ns,
        admin,
        mut victim,
        direct,
        cached,
    } = Bed::seeded(env, &rt, &client, "crash", "e2e-cacher", OBJECTS)?;

    // A complete first list, to measure how long one takes and to have an "old" set.
    let started = Instant::now();
    let (_, first) = rt.block_on(list_as(&client, &cached, CACHER))?;
    let list_time = started.elapsed();
    crate::support::wait_sets(victim.hub, "e2e-cacher", 1)?;
    victim.kill();
    let mut committed = read_set(&victim, &ns)?.context("the first list is committed")?;
    ensure!(
        committed == versions(&first),
        "the first list is cached whole"
    );
    victim.restart()?;

    let window = list_time.saturating_mul(2).max(Duration::from_millis(20));
    let mut verdicts = Verdicts::within(window);
    for round in 0..ROUNDS {
        let truth = rt.block_on(mutated(&client, &admin.url(), &ns, &direct, round))?;
        ensure!(
            truth != committed,
            "round {round}: the mutation changed the set"
        );

        let delay = verdicts.next_delay();
        let listing = {
            let client = client.clone();
            let cached = cached.clone();
            rt.spawn(async move { get_as(&client, &cached, CACHER).await })
        };
        std::thread::sleep(delay);
        victim.kill();
        let _ = rt.block_on(listing);

        let after = read_set(&victim, &ns)?.unwrap_or_default();
        verdicts.judge(round, delay, &after, &committed, &truth)?;
        committed = after;
        victim.restart()?;
    }
    println!(
        "{ROUNDS} kills within {window:?} of a {OBJECTS}-object list (one list takes {list_time:?}): {verdicts}, never a mix"
    );
    verdicts.both_seen()
}

/// How many kills left the old set and how many the new one, and the window the next kill
/// is drawn from.
///
/// The window adapts to the machine: once a kill `d` into a round left the new set, later
/// kills are drawn below `d`, so they land before the commit however fast the lists have
/// become; while no kill has left the new set, each kill that kept the old one doubles it.
#[derive(Debug)]
pub(crate) struct Verdicts {
    kept_old: usize,
    took_new: usize,
    window: Duration,
}

impl Verdicts {
    /// Verdicts whose first kill is drawn below `window`.
    pub(crate) fn within(window: Duration) -> Self {
        Self {
            kept_old: 0,
            took_new: 0,
            window,
        }
    }

    /// A random delay for the next kill, below the current window.
    pub(crate) fn next_delay(&self) -> Duration {
        random_below(self.window)
    }

    /// Judges `after`, the set a kill `delay` into `round` left: the new set (`truth`) or the
    /// one `committed` before it, and nothing else.
    pub(crate) fn judge(
        &mut self,
        round: usize,
        delay: Duration,
        after: &BTreeMap<String, String>,
        committed: &BTreeMap<String, String>,
        truth: &BTreeMap<String, String>,
    ) -> Result<()> {
        if after == truth {
            self.took_new += 1;
            self.window = self.window.min(delay);
            return Ok(());
        }
        ensure!(
            after == committed,
            "round {round} (killed after {delay:?}): the cache holds {} objects that are neither the old set ({}) nor the new ({})",
            after.len(),
            committed.len(),
            truth.len()
        );
        self.kept_old += 1;
        if self.took_new == 0 {
            self.window = self.window.saturating_mul(2);
        }
        Ok(())
    }

    /// Fails unless kills landed both before and after commits: else the rounds showed nothing.
    pub(crate) fn both_seen(&self) -> Result<()> {
        ensure!(
            self.kept_old > 0 && self.took_new > 0,
            "the kills must land both before and after commits to show anything: {self}"
        );
        Ok(())
    }
}

impl std::fmt::Display for Verdicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "old set kept {} times, new set committed {} times (last window {:?})",
            self.kept_old, self.took_new, self.window
        )
    }
}

/// Mutates the set of round `round` (see [`mutate`]) and returns the cloud's new set, read
/// through `direct`.
pub(crate) async fn mutated(
    client: &Plain,
    admin: &str,
    ns: &str,
    direct: &str,
    round: usize,
) -> Result<BTreeMap<String, String>> {
    mutate(client, admin, ns, round).await?;
    let (status, truth) = get(client, direct).await?;
    ensure!(status == 200, "the direct list answered {status}");
    let truth: serde_json::Value = serde_json::from_slice(&truth)?;
    Ok(versions(truth["items"].as_array().context("a list")?))
}

/// `name → resourceVersion` of the cacher's configmaps in `ns`, read from the store of the
/// (dead) gateway; `None` when no set was ever committed.
pub(crate) fn read_set(
    gateway: &edgegate_testkit::Gateway,
    ns: &str,
) -> Result<Option<BTreeMap<String, String>>> {
    let store = RedbStore::open(&gateway.dir.join("cache"))?;
    if store.sets("")?.is_empty() {
        return Ok(None);
    }
    let resource = ResourceKey {
        component: "e2e-cacher".into(),
        resource: "configmaps".into(),
        version: "v1".into(),
        group: String::new(),
    };
    let mut set = BTreeMap::new();
    for entry in store.scan(&resource.namespace_prefix(ns))? {
        let (_, object) = entry?;
        let object: serde_json::Value = serde_json::from_slice(&object)?;
        set.insert(
            object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    Ok(Some(set))
}

/// Changes the set a little: ten objects updated, one deleted, one created.
async fn mutate(
    client: &crate::support::Plain,
    gateway: &str,
    ns: &str,
    round: usize,
) -> Result<()> {
    let url = format!("{gateway}/api/v1/namespaces/{ns}/configmaps");
    for i in 0..10 {
        let name = format!("crash-{}", (round * 97 + i * 13) % OBJECTS);
        let patch = format!(r#"{{"data":{{"round":"{round}"}}}}"#);
        let mut req = request(
            ::http::Method::PATCH,
            &format!("{url}/{name}"),
            Some(edgegate_testkit::ADMIN_TOKEN),
            "e2e/v1",
            Some(&patch),
        )?;
        req.headers_mut().insert(
            "content-type",
            ::http::HeaderValue::from_static("application/merge-patch+json"),
        );
        let response = client.request(req).await?;
        ensure!(
            response.status() == 200,
            "patch {name}: {}",
            response.status()
        );
        let _: Bytes = response.into_body().collect().await?.to_bytes();
    }
    let doomed = format!("{url}/crash-{}", round * 7 + 1);
    let response = client
        .request(request(
            ::http::Method::DELETE,
            &doomed,
            Some(edgegate_testkit::ADMIN_TOKEN),
            "e2e/v1",
            None,
        )?)
        .await?;
    ensure!(response.status() == 200, "delete: {}", response.status());
    create_configmaps(client, gateway, ns, &format!("round{round}"), 1).await
}

pub(crate) fn random_below(window: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(random % nanos)
}
