//! What a harness killed outright left behind (SIGKILL, or Ctrl-C, which runs no `Drop`),
//! removed by the next harness that starts: its children died with it (pdeathsig), but not
//! the containers' shims, the mounts, the node's namespace, its pod logs, the kernel
//! settings kubelet changed, or the scratch directories.
//!
//! Everything the harness makes carries the pid of the process that made it (scratch
//! directories `edgegate-e2e-<pid>-…`, namespaces `edgegate-node-<N>-<pid>`); a sweep touches
//! only what belongs to a pid that no longer runs, so a harness running beside it is safe.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use crate::containerd::{clean_runtime, unmount_under};
use crate::node::{KERNEL_TUNABLES_FILE, remove_pod_logs, restore_kernel_tunables};

/// The prefix of the harness's scratch directories (in the temp dir and `/dev/shm`).
pub(crate) const SCRATCH_PREFIX: &str = "edgegate-e2e-";

/// The prefix of the nodes' network namespaces.
pub(crate) const NETNS_PREFIX: &str = "edgegate-node-";

/// Sweeps once per process, before the first cluster or node starts.
pub fn sweep_once() {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(sweep);
}

/// Removes what harnesses that no longer run left behind.
pub fn sweep() {
    for dir in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        for leftover in owned_by_the_dead(&dir, SCRATCH_PREFIX) {
            sweep_scratch(&leftover);
        }
    }
    for leftover in owned_by_the_dead(Path::new("/run/netns"), NETNS_PREFIX) {
        if let Some(name) = leftover.file_name().and_then(|n| n.to_str()) {
            // Deleting the namespace deletes the veth, both ends.
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// A scratch directory: the nodes in it first (their containers, mounts, pod logs and
/// kernel settings), then the directory.
fn sweep_scratch(dir: &Path) {
    for node in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let node = node.path();
        if node.join("containerd").is_dir() {
            clean_runtime(&node.join("containerd"));
            remove_pod_logs(&node.join("kubelet/pods"), &[]);
            if let Ok(saved) = std::fs::read_to_string(node.join(KERNEL_TUNABLES_FILE)) {
                restore_kernel_tunables(&saved);
            }
        }
    }
    unmount_under(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// The entries of `dir` named with `prefix` whose owner (see [`owner`]) no longer runs.
fn owned_by_the_dead(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let pid = owner(&name, prefix)?;
            (!Path::new(&format!("/proc/{pid}")).exists()).then(|| entry.path())
        })
        .collect()
}

/// The owner's pid in a name the harness made: `edgegate-e2e-<pid>-<kind>-<n>` or
/// `edgegate-node-<index>-<pid>`.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(prefix)?.split('-');
    if prefix == NETNS_PREFIX {
        parts
            .nth(1)?
            .parse()
            .ok()
            .filter(|_| parts.next().is_none())
    } else {
        parts.next()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owner_of_each_kind_of_name() {
        assert_eq!(
            owner("edgegate-e2e-1234-cluster-0", SCRATCH_PREFIX),
            Some(1234)
        );
        assert_eq!(owner("edgegate-node-3-987", NETNS_PREFIX), Some(987));
        // Names of older harnesses carry no owner: never swept.
        assert_eq!(owner("edgegate-node-3", NETNS_PREFIX), None);
        assert_eq!(owner("edgegate-e2e-x-etcd-0", SCRATCH_PREFIX), None);
        assert_eq!(owner("edgegate-compiled-12-3", SCRATCH_PREFIX), None);
    }

    #[test]
    fn sweeps_only_what_the_dead_own() {
        let root = std::env::temp_dir().join(format!("sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        // pid_max is at most 2^22: this pid cannot run.
        let dead = root.join(format!("{SCRATCH_PREFIX}{}-cluster-0", 1u32 << 23));
        let alive = root.join(format!("{SCRATCH_PREFIX}{}-cluster-0", std::process::id()));
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::create_dir_all(&alive).unwrap();
        let found = owned_by_the_dead(&root, SCRATCH_PREFIX);
        assert_eq!(found, vec![dead.clone()]);
        sweep_scratch(&dead);
        assert!(!dead.exists());
        assert!(alive.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
