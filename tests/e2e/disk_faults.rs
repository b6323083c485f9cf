//! A failing cache disk never stops the gateway forwarding, and the cache comes back with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::http;
use edgegate_testkit::process::wait_until;

use crate::support::{
    Env, Plain, client, create_configmaps, list_as, metric_sample, namespace, runtime, wait_sets,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";
const FAULT_LOG: &str = "the cache disk fails";
const RECOVERY_LOG: &str = "the cache disk works again";

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Tmpfs> {
        std::fs::create_dir_all(at)?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()?;
        ensure!(
            status.success(),
            "mount tmpfs at {}: {status}",
            at.display()
        );
        Ok(Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeroes to `file` until the disk has no room left.
fn fill(file: &Path) -> Result<()> {
    let mut out = std::fs::File::create(file)?;
    let block = vec![0u8; 64 << 10];
    loop {
        match out.write_all(&block).and_then(|()| out.sync_data()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => return Ok(()),
            Err(e) => return Err(e).context("filling the disk"),
        }
    }
}

/// The lines of the gateway's log that contain `what`.
pub(crate) fn log_lines(gateway: &edgegate_testkit::Gateway, what: &str) -> usize {
    std::fs::read_to_string(gateway.dir.join("edgegate.log"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(what))
        .count()
}

/// The cache directory on a 16 MiB tmpfs, filled while the gateway runs: lists keep being
/// forwarded and answered whole, the fault is logged once, counted and shown by a `200`
/// `/v1/readyz`; once the filler is removed the cache opens again (noticed through
/// `/v1/readyz`) and a new list is cached.
pub fn a_full_cache_disk_keeps_forwarding_and_the_cache_recovers(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    gateway.stop(Duration::from_secs(5));
    let cache = gateway.dir.join("cache");
    std::fs::remove_dir_all(&cache).ok();
    let _tmpfs = Tmpfs::mount(&cache, "16m")?;
    gateway.restart()?;

    let rt = runtime();
    let client = client();
    let ns = namespace(&env.cluster, "disk-full")?;
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 1000))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, listed) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(listed.len() == 1000, "listed {}", listed.len());
    wait_sets(gateway.hub, "kubelet", 1)?;

    fill(&cache.join("filler"))?;
    let series = r#"edgegate_cache_disk_faults_total{kind="full"}"#;
    // Each re-list stages its items again: the disk's failure shows at a flush.
    let mut lists = 0;
    wait_until(Duration::from_secs(120), "the full disk counted", || {
        lists += 1;
        let listed = rt.block_on(list_as(&client, &url, KUBELET));
        assert!(
            listed.as_ref().is_ok_and(|(_, items)| items.len() == 1000),
            "a list through the gateway while the disk is full: {:?}",
            listed.as_ref().map(|(_, items)| items.len())
        );
        metric_sample(gateway.hub, series).is_ok_and(|v| v >= 1.0)
    })?;
    for _ in 0..10 {
        let (_, again) = rt.block_on(list_as(&client, &url, KUBELET))?;
        ensure!(again.len() == 1000, "listed {} on a full disk", again.len());
    }
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(
        readyz.status == 200 && readyz.body.contains("cache disk failing (full)"),
        "readyz: {readyz:?}"
    );
    ensure!(metric_sample(gateway.hub, series)? == 1.0, "one episode");
    ensure!(
        log_lines(&gateway, FAULT_LOG) == 1,
        "the fault is logged once:\n{}",
        gateway.log_tail(40)
    );

    std::fs::remove_file(cache.join("filler"))?;
    let freed = std::time::Instant::now();
    let recovered = caches_again(env, &rt, &client, &gateway, &url, "disk-back")? - freed;
    eprintln!(
        "disk full: {lists} list(s) until the fault was counted; recovery shown {:.1} s after space was freed",
        recovered.as_secs_f64()
    );
    Ok(())
}

/// After a disk fault's cause is gone: waits until `/v1/readyz` no longer tells it (the
/// fault ends once durable writes, each list of `url`'s commit, worked for a few seconds),
/// then checks the recovery was logged once, the fault once in all, and that a new set, of
/// a namespace named after `tag`, is cached again. Returns when readyz stopped telling it.
fn caches_again(
    env: &Env,
    rt: &tokio::runtime::Runtime,
    client: &Plain,
    gateway: &edgegate_testkit::Gateway,
    url: &str,
    tag: &str,
) -> Result<std::time::Instant> {
    wait_until(Duration::from_secs(60), "the cache open again", || {
        let _ = rt.block_on(list_as(client, url, KUBELET));
        http::get(gateway.hub, "/v1/readyz")
            .is_ok_and(|r| r.status == 200 && !r.body.contains("cache disk failing"))
    })?;
    let shown = std::time::Instant::now();
    ensure!(
        log_lines(gateway, RECOVERY_LOG) == 1,
        "the recovery is logged once"
    );
    let other = namespace(&env.cluster, tag)?;
    rt.block_on(create_configmaps(client, &gateway.url(), &other, "cm", 10))?;
    let url = format!("{}/api/v1/namespaces/{other}/configmaps", gateway.url());
    rt.block_on(list_as(client, &url, KUBELET))?;
    wait_sets(gateway.hub, "kubelet", 2)?;
    ensure!(log_lines(gateway, FAULT_LOG) == 1, "logged once in all");
    Ok(shown)
}

/// An ext4 image on a loop device, mounted for the test (with `errors=remount-ro`, so a
/// file system error turns it read-only under the running gateway, as a failing card does);
/// unmounted (lazily: the gateway may still hold a file) and its image removed when dropped.
struct Ext4 {
    image: PathBuf,
    at: PathBuf,
    mounts: usize,
}

impl Ext4 {
    fn mount(image: &Path, at: &Path) -> Result<Ext4> {
        let run = |cmd: &mut Command| -> Result<()> {
            let status = cmd.status()?;
            ensure!(status.success(), "{cmd:?}: {status}");
            Ok(())
        };
        run(Command::new("truncate").args(["-s", "64M"]).arg(image))?;
        run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(image))?;
        std::fs::create_dir_all(at)?;
        let mut ext4 = Ext4 {
            image: image.to_owned(),
            at: at.to_owned(),
            mounts: 0,
        };
        ext4.mount_image(image)?;
        Ok(ext4)
    }

    /// Mounts `image` at the mount point, over what is mounted there.
    fn mount_image(&mut self, image: &Path) -> Result<()> {
        let status = Command::new("mount")
            .args(["-o", "loop,errors=remount-ro"])
            .arg(image)
            .arg(&self.at)
            .status()?;
        ensure!(status.success(), "mount {}: {status}", image.display());
        self.mounts += 1;
        Ok(())
    }

    /// Makes the kernel find an error in the file system: it remounts it read-only.
    fn fail(&self) -> Result<()> {
        let source = Command::new("findmnt")
            .args(["-n", "-o", "SOURCE"])
            .arg(&self.at)
            .output()?;
        let source = String::from_utf8(source.stdout)?;
        let device = Path::new(source.trim())
            .file_name()
            .context("the loop device")?
            .to_string_lossy()
            .into_owned();
        std::fs::write(format!("/sys/fs/ext4/{device}/trigger_fs_error"), "1")
            .context("triggering an ext4 error")
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        for _ in 0..self.mounts {
            let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_file(self.image.with_extension("copy"));
    }
}

/// The cache directory on ext4, turned read-only by a file system error while the gateway
/// runs: lists keep being forwarded whole, the fault is logged once, counted and told by a
/// `200` `/v1/readyz`; a copy of the disk mounted in its place (an operator's repair) is
/// opened again, serves the set cached before the fault, and caches again.
pub fn a_read_only_cache_disk_keeps_forwarding_and_the_cache_recovers(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    gateway.stop(Duration::from_secs(5));
    let cache = gateway.dir.join("cache");
    std::fs::remove_dir_all(&cache).ok();
    let image = gateway.dir.join("cache.ext4");
    let mut disk = Ext4::mount(&image, &cache)?;
    gateway.restart()?;

    let rt = runtime();
    let client = client();
    let ns = namespace(&env.cluster, "disk-ro")?;
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 100))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, listed) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(listed.len() == 100, "listed {}", listed.len());
    wait_sets(gateway.hub, "kubelet", 1)?;

    disk.fail()?;
    let series = r#"edgegate_cache_disk_faults_total{kind="read_only"}"#;
    wait_until(
        Duration::from_secs(60),
        "the read-only disk counted",
        || {
            let listed = rt.block_on(list_as(&client, &url, KUBELET));
            assert!(
                listed.as_ref().is_ok_and(|(_, items)| items.len() == 100),
                "a list through the gateway while the disk is read-only: {:?}",
                listed.as_ref().map(|(_, items)| items.len())
            );
            metric_sample(gateway.hub, series).is_ok_and(|v| v >= 1.0)
        },
    )?;
    for _ in 0..10 {
        let (_, again) = rt.block_on(list_as(&client, &url, KUBELET))?;
        ensure!(
            again.len() == 100,
            "listed {} on a read-only disk",
            again.len()
        );
    }
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(
        readyz.status == 200 && readyz.body.contains("cache disk failing (read_only)"),
        "readyz: {readyz:?}"
    );
    ensure!(metric_sample(gateway.hub, series)? == 1.0, "one episode");
    ensure!(
        log_lines(&gateway, FAULT_LOG) == 1,
        "the fault is logged once:\n{}",
        gateway.log_tail(40)
    );

    // The repair: the disk's content on a working file system, mounted in its place.
    let copy = image.with_extension("copy");
    std::fs::copy(&image, &copy)?;
    disk.mount_image(&copy)?;
    caches_again(env, &rt, &client, &gateway, &url, "disk-ro-back")?;
    Ok(())
}
