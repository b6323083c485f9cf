//! kill -9 while filters compile and the chain reloads.

use super::*;
use crate::crash::random_below;

const ROUNDS: usize = 20;
const TRAIL: &str = "edgegate.test/trail";

/// kill -9 the gateway at random moments after a new component lands in the filter
/// directory (while it is compiled into the code store in a child process, sealed, renamed
/// into place and made the live chain), 20 times: afterwards no file of code in the store is
/// refused (no half-written file is ever named), the restarted gateway serves a list, and
/// every filter installed so far loads and runs. The restart → first list times are printed.
pub fn kill_nine_while_filters_compile_leaves_the_code_store_whole(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("crash-code"));
    let dir = FilterDir::new(&scratch)?;
    let mut gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    let ns = namespace(&env.cluster, "crash-code")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 3))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let tagger = std::fs::read(dir.built.join("tagger.wasm"))?;

    // One whole install, timed: the window the kills fall in.
    let before = generation(&gateway)?;
    let at = dir.install_bytes("tag0", &distinct(&tagger, 0), &toml(0))?;
    next_generation(&gateway, before, at)?;
    wait_until(Duration::from_secs(30), "tag0 to load", || {
        loaded(&gateway, "tag0").unwrap_or(false)
    })?;
    let window = at
        .elapsed()
        .saturating_mul(2)
        .max(Duration::from_millis(50));

    let mut installed = vec![0];
    let mut serving = Vec::new();
    for round in 1..=ROUNDS {
        let name = format!("tag{round}");
        dir.install_bytes(&name, &distinct(&tagger, round), &toml(round))?;
        installed.push(round);
        let delay = random_below(window);
        std::thread::sleep(delay);
        gateway.kill();

        let started = Instant::now();
        gateway.restart()?;
        wait_until(
            Duration::from_secs(30),
            "the restarted gateway to serve",
            || {
                rt.block_on(get_as(&client, &url, OTHER))
                    .is_ok_and(|(status, _)| status == 200)
            },
        )?;
        serving.push(started.elapsed());
        wait_until(
            Duration::from_secs(60),
            "every installed filter to load",
            || {
                installed
                    .iter()
                    .all(|i| loaded(&gateway, &format!("tag{i}")).unwrap_or(false))
            },
        )?;
        let rejects = metric(gateway.hub, "edgegate_filter_stored_rejects_total")?;
        ensure!(
            rejects == 0.0,
            "round {round} (killed {delay:?} after the install): {rejects} file(s) of code refused"
        );
        let (_, items) = rt.block_on(list_as(&client, &url, TEST))?;
        let trail = items
            .first()
            .and_then(|item| item["metadata"]["annotations"][TRAIL].as_str())
            .unwrap_or_default()
            .to_owned();
        for i in &installed {
            ensure!(
                trail.split(',').any(|tag| tag == format!("t{i}")),
                "round {round}: tag{i} loaded but its mark is not in the trail {trail:?}"
            );
        }
    }
    serving.sort();
    println!(
        "{ROUNDS} kills within {window:?} of a new component landing: no code refused, every filter loaded; restart → first list served: median {:?}, max {:?}",
        serving[serving.len() / 2],
        serving[serving.len() - 1]
    );
    Ok(())
}

fn toml(round: usize) -> String {
    format!("[config]\ntag = \"t{round}\"\n")
}

/// `wasm` made a component of its own: a custom section naming `round` appended (valid
/// anywhere in a component and ignored when it runs), so its content hash, and so its
/// compiled code, is new.
fn distinct(wasm: &[u8], round: usize) -> Vec<u8> {
    let name = b"edgegate-test-round";
    let mut section = leb128(name.len());
    section.extend_from_slice(name);
    section.extend_from_slice(&(round as u64).to_le_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    out.extend(leb128(section.len()));
    out.extend(section);
    out
}

fn leb128(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
