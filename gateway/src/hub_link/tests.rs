use edgegate_testkit::process::eventually;
use std::process::Command;

use super::address::{DEFAULT_IP, check};
use super::*;
use crate::cli::DEFAULT_HUB_INTERFACE as DEFAULT_NAME;

#[test]
fn yurthubs_rules_for_the_name_and_address() {
    assert!(check(DEFAULT_NAME, IpAddr::V4(DEFAULT_IP)).is_ok());
    assert!(check("hub0", "fd00::2:1".parse().unwrap()).is_ok());
    for (name, ip) in [
        ("a-name-of-16-byt", "169.254.2.1"),
        ("", "169.254.2.1"),
        ("a/b", "169.254.2.1"),
        (DEFAULT_NAME, "10.0.0.1"),
        (DEFAULT_NAME, "169.254.31.7"),
        (DEFAULT_NAME, "169.254.1.1"),
    ] {
        assert!(check(name, ip.parse().unwrap()).is_err(), "{name} {ip}");
    }
}

/// `ip` run in the calling thread's network namespace (a child takes its creator's), to see
/// the link as an operator would.
fn ip(args: &[&str]) -> (bool, String) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn has_address() -> bool {
    let (ok, out) = ip(&["-o", "addr", "show", "dev", DEFAULT_NAME]);
    ok && out.contains("inet 169.254.2.1/32")
}

fn is_up() -> bool {
    let (ok, out) = ip(&["-o", "link", "show", DEFAULT_NAME]);
    ok && out.contains("<") && out.split('>').next().is_some_and(|f| f.contains(",UP"))
}

/// Runs `test` on a thread of its own in a new network namespace (only this thread's
/// sockets and children are in it), with a runtime on that thread.
fn in_new_netns(test: impl AsyncFnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: unshare only moves the calling thread into a new network namespace; it
        // touches no memory of the process.
        #[allow(unsafe_code)]
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            unshared,
            0,
            "unshare(CLONE_NEWNET) needs root: {}",
            io::Error::last_os_error()
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(test());
    })
    .join()
    .unwrap();
}

#[test]
fn the_link_and_address_are_made_once_and_what_is_there_is_kept() {
    in_new_netns(async || {
        let hub = HubInterface::open(DEFAULT_NAME, IpAddr::V4(DEFAULT_IP)).unwrap();
        let first = hub.ensure().unwrap();
        assert_eq!(
            first,
            Ensured {
                link_created: true,
                address_added: true
            }
        );
        assert!(has_address() && is_up(), "{:?}", ip(&["addr"]));
        // A dummy, or where the kernel has none, a bridge.
        let has_dummies = ip(&["link", "add", "probe0", "type", "dummy"]).0;
        let (_, kind) = ip(&["-d", "-o", "link", "show", DEFAULT_NAME]);
        let expected = if has_dummies { "dummy" } else { "bridge" };
        assert!(kind.contains(expected), "{expected}: {kind}");
        let again = hub.ensure().unwrap();
        assert_eq!(
            again,
            Ensured {
                link_created: false,
                address_added: false
            }
        );
        // A link someone else made (down, no address) is taken and completed.
        assert!(ip(&["link", "add", "hub1", "type", "bridge"]).0);
        let other = HubInterface::open("hub1", "169.254.2.9".parse().unwrap()).unwrap();
        let taken = other.ensure().unwrap();
        assert!(!taken.link_created && taken.address_added);
        let (_, out) = ip(&["-o", "addr", "show", "dev", "hub1"]);
        assert!(out.contains("169.254.2.9/32"), "{out}");
    });
}

#[test]
fn a_deleted_link_or_address_or_a_link_set_down_is_made_again() {
    in_new_netns(async || {
        let hub = HubInterface::open(DEFAULT_NAME, IpAddr::V4(DEFAULT_IP)).unwrap();
        let mut registry = Registry::default();
        hub.register(&mut registry);
        let repairs = hub.link.metrics.repairs.clone();
        hub.ensure().unwrap();
        let keeper = tokio::spawn(hub.keep());

        // Deleting an unrelated link changes nothing.
        assert!(ip(&["link", "add", "other0", "type", "bridge"]).0);
        assert!(ip(&["link", "del", "other0"]).0);
        assert!(ip(&["link", "del", DEFAULT_NAME]).0);
        eventually("the link made again", || has_address() && is_up()).await;
        assert_eq!(repairs.get(), 1);

        assert!(ip(&["addr", "del", "169.254.2.1/32", "dev", DEFAULT_NAME]).0);
        eventually("the address added again", has_address).await;
        assert_eq!(repairs.get(), 2);

        assert!(ip(&["link", "set", DEFAULT_NAME, "down"]).0);
        eventually("the link set up again", is_up).await;

        // Stopping the keeper leaves the link.
        keeper.abort();
        let _ = keeper.await;
        assert!(has_address());
    });
}
