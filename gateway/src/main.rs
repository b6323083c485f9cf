//! The `edgegate` binary: parses the command line and runs the gateway (or a filter tool).

use std::process::ExitCode;

use clap::Parser;
use edgegate::cli::{Cli, Command, LogFormat};
use edgegate::config::Config;
use edgegate::{server, tools};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let returns_large_blocks = return_large_blocks_when_freed();
    let heaps_bounded = one_heap_per_core();
    let cli = Cli::parse();
    init_tracing(cli.run.log_filter(), cli.run.log_format);
    if !returns_large_blocks {
        tracing::warn!(
            "glibc refused a fixed mmap threshold; freed memory may stay with the process"
        );
    }
    if !heaps_bounded {
        tracing::warn!("glibc refused to bound its heaps; threads may each keep one");
    }
    match cli.command {
        Some(Command::Filter(command)) => return tools::filter(command, &cli.run),
        Some(Command::Cache(command)) => return tools::cache(command, &cli.run),
        None => {}
    }
    let certificate_warnings =
        (cli.run.yurthub.certificates).warnings(cli.run.kubeconfig.is_some());
    for warning in cli
        .run
        .yurthub
        .warnings()
        .into_iter()
        .chain(certificate_warnings)
    {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("edgegate: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let config = match Config::from_args(&cli.run) {
            Ok(config) => Config {
                filter_helper: std::env::current_exe().ok(),
                ..config
            },
            Err(error) => {
                eprintln!("edgegate: {}", edgegate::error::error_chain(&error));
                return ExitCode::from(2);
            }
        };
        let hooks = server::Hooks {
            return_freed_memory: Some(return_freed_memory),
            after_start: Some(page_out_start_up_code),
        };
        match server::run(config, hooks, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            // The identity the flags name is unusable: the operator's to fix, as a flag.
            Err(error @ server::ServerError::Identity(_)) => {
                eprintln!("edgegate: {}", edgegate::error::error_chain(&error));
                ExitCode::from(2)
            }
            Err(error) => {
                tracing::error!(error = %edgegate::error::error_chain(&error), "edgegate failed");
                ExitCode::FAILURE
            }
        }
    })
}

fn init_tracing(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours only for a person at a terminal, not in kubelet's or journald's logs.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Hands back to the system the whole free pages inside glibc's heaps. A filter load frees
/// most of what it allocates (wasmtime reading and describing each component), in the
/// middle of the loading thread's heap, where trimming the top does not reach, and large
/// lists and their commits leave more so (measured: benches/HISTORY.md, "Measurements
/// behind choices in the code").
/// Walks every heap once: well under a millisecond at the sizes a gateway's heaps have,
/// once per load and every few seconds.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only returns free pages of glibc's own heaps to the system,
        // under each heap's lock; it may be called at any time from any thread and touches
        // no memory in use.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// Gives back the pages of code only start-up ran, once it is over. The kernel maps the
/// 64 KiB around every page of a file a process touches, so reading the kubeconfig,
/// checking flags and configs and instantiating filters leave megabytes of the binary's code
/// resident that the gateway does not run again, a large share of an idle gateway's memory
/// (measured: benches/HISTORY.md, "Measurements behind choices in the code"). See
/// [`page_out_file_code`].
fn page_out_start_up_code() {
    match page_out_file_code() {
        0 => tracing::debug!("the kernel took no advice to page out start-up code"),
        advised => tracing::debug!(mib = advised >> 20, "code mapped at start-up advised out"),
    }
}

/// Advises every read-only mapping of a file (the binary, its libraries, the filters'
/// compiled code) `MADV_PAGEOUT`, and returns how many bytes it advised: the kernel reclaims
/// their clean pages that no other process maps, and reads back from the file what runs
/// again, on its first touch. Nothing is changed where the kernel refuses (before Linux 5.4,
/// or a file this process could not write).
fn page_out_file_code() -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return 0;
        };
        let mut advised = 0;
        for line in maps.lines() {
            // start-end perms offset device inode path
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [range, perms, _, _, _, path, ..] = fields[..] else {
                continue;
            };
            if perms.contains('w') || !path.starts_with('/') {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            // SAFETY: MADV_PAGEOUT only has the kernel reclaim pages of the range; their
            // contents stay those of the file and are read back on the next touch, so no
            // memory of this process changes. A range unmapped since `maps` was read makes
            // the call fail, which is ignored.
            #[allow(unsafe_code)]
            let done = unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    end.saturating_sub(start),
                    libc::MADV_PAGEOUT,
                )
            };
            if done == 0 {
                advised += end.saturating_sub(start);
            }
        }
        advised
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// Has glibc map every allocation of 1 MiB or more on its own, so that freeing it gives the
/// memory back, and trim each thread's heap once 128 KiB at its top are free; false if glibc
/// refused. Left to itself, glibc raises both bounds to the largest block freed so far
/// (compiling a filter in the gateway's own process frees blocks of megabytes), after which
/// what loads and lists free stays with the process, at idle and after large lists alike.
/// Below 1 MiB the list pipeline's buffers (one upstream read, a few hundred KiB) would be
/// mapped and unmapped for every list (measured: benches/HISTORY.md, "Measurements behind
/// choices in the code").
fn return_large_blocks_when_freed() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const MAPPED_FROM_BYTES: libc::c_int = 1 << 20;
        // SAFETY: mallopt only sets an allocator parameter, which glibc allows at any time
        // and from any thread; it touches no memory of ours.
        #[allow(unsafe_code)]
        let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_FROM_BYTES) };
        set == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    true
}

/// Has glibc keep at most one heap (arena) per core, not eight per core, unless the operator
/// chose (`MALLOC_ARENA_MAX`, `GLIBC_TUNABLES`); false if glibc refused. A thread that
/// allocates while the heaps are held by others gets a heap of its own, and each heap keeps
/// its own free space between live blocks: the runtime's workers, its blocking threads and
/// the cache's writer spread the gateway's objects over up to sixteen on two cores. In the
/// traffic bed, fewer heaps left a little less RSS, at the end of the warm-up and after the
/// churn (measured: benches/HISTORY.md, "Measurements behind choices in the code").
fn one_heap_per_core() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let chosen = |name| std::env::var_os(name).is_some();
        if chosen("MALLOC_ARENA_MAX") || chosen("GLIBC_TUNABLES") {
            return true;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let heaps = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: as in `return_large_blocks_when_freed`: an allocator parameter, set before
        // any other thread runs.
        #[allow(unsafe_code)]
        let set = unsafe { libc::mallopt(libc::M_ARENA_MAX, heaps) };
        set == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    true
}

#[cfg(test)]
mod tests {
    use super::{page_out_file_code, return_freed_memory};

    /// This process's resident pages of `kind` (`RssFile`, `RssAnon`), in KiB.
    fn resident_kib(kind: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(kind)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn resident_file_kib() -> u64 {
        resident_kib("RssFile:")
    }

    #[test]
    fn memory_freed_in_the_middle_of_a_heap_is_handed_back() {
        // 16 MiB in blocks small enough for the heap, all freed but the last, which keeps
        // the heap's top from being trimmed as blocks are freed.
        let blocks: Vec<Box<[u8]>> = (0..4096).map(|i| vec![i as u8; 4096].into()).collect();
        let mut blocks = blocks.into_iter();
        let last = blocks.next_back();
        drop(blocks);
        let before = resident_kib("RssAnon:");
        return_freed_memory();
        let after = resident_kib("RssAnon:");
        assert!(
            after + 8 * 1024 < before,
            "anonymous {before} -> {after} KiB"
        );
        drop(last);
    }

    #[test]
    fn code_mapped_from_files_is_given_back() {
        let before = resident_file_kib();
        let advised = page_out_file_code();
        let after = resident_file_kib();
        assert!(advised > 0, "nothing advised");
        assert!(
            after < before,
            "resident file pages {before} -> {after} KiB"
        );
    }
}
