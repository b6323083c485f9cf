//! Test filter `stdprobe`: reads the wall clock, the monotonic clock, the environment and a
//! `HashMap` hasher's random keys through Rust's std, which a wasm32-wasip2 build takes from
//! the host's WASI imports, and writes what it read into annotations of every ConfigMap.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};

/// Seconds since the Unix epoch by the wall clock.
pub const WALL_CLOCK: &str = "edgegate.test/wall-clock";
/// Nanoseconds the monotonic clock advanced across the filter's own reading of the others.
pub const MONOTONIC: &str = "edgegate.test/monotonic";
/// How many environment variables the filter sees.
pub const ENVIRONMENT: &str = "edgegate.test/environment";
/// The hash of a fixed string with a new `RandomState`: the same for every instance only
/// when the host's random seed is.
pub const HASH: &str = "edgegate.test/hash";

/// A label asking the filter to call what the host does not grant: `sleep`, `read-file` or
/// `print`; each call must trap.
pub const CALL: &str = "edgegate.test/call";

/// The filter.
#[derive(serde::Deserialize)]
pub struct StdProbe;

impl Filter for StdProbe {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("stdprobe", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        match object.label(CALL) {
            // A filter that sleeps is what the rule guards against; here the call must trap.
            #[allow(clippy::disallowed_methods)]
            Some("sleep") => std::thread::sleep(std::time::Duration::from_millis(1)),
            Some("read-file") => {
                let read = std::fs::read("/etc/hostname").map_or(0, |bytes| bytes.len());
                object.set_annotation(CALL, &read.to_string());
            }
            Some("print") => println!("stdprobe was here"),
            _ => {}
        }
        let started = Instant::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(-1, |since| i128::from(since.as_secs()));
        let environment = std::env::vars_os().count();
        let hash = RandomState::new().hash_one("edgegate");
        object.set_annotation(WALL_CLOCK, &wall.to_string());
        object.set_annotation(ENVIRONMENT, &environment.to_string());
        object.set_annotation(HASH, &format!("{hash:016x}"));
        object.set_annotation(MONOTONIC, &started.elapsed().as_nanos().to_string());
        Decision::Keep
    }
}

export_filter!(StdProbe);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Resource;
    use edgegate_filter_sdk::testing::Harness;
    use serde_json::json;

    use super::*;

    #[test]
    fn natively_it_reads_the_machines_clock() {
        let harness = Harness::<StdProbe>::configure(json!({})).unwrap();
        let ctx = Context::new("test", Verb::List, Resource::new("", "v1", "configmaps"));
        let out = harness
            .filter(&ctx, &json!({"metadata": {"name": "c"}}))
            .json()
            .unwrap();
        let wall: u64 = out["metadata"]["annotations"][WALL_CLOCK]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        // 2020-09-13: any machine running this test is later.
        assert!(wall > 1_600_000_000, "{wall}");
        assert_eq!(
            out["metadata"]["annotations"][HASH].as_str().unwrap().len(),
            16
        );
    }
}
