//! Compiling filters in a child process. Cranelift leaves several MB of heap behind per
//! compiled filter (the allocator keeps the freed pages), which a long-running gateway on an
//! edge node would carry for good. The gateway instead runs `edgegate filter compile -` on
//! each new `.wasm`; the child writes the code into the compiled-code cache and exits,
//! returning its memory, and the gateway loads the code from the cache. If the child cannot
//! do it (a replaced binary, a failure to start, a bad component), the gateway compiles
//! in its own process, which also produces the error a bad component deserves.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::FilterError;
use super::engine::Runtime;

/// Where a filter's code was compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompiledIn {
    /// By a child process, into the cache the gateway then read.
    Child,
    /// In the gateway's own process (no child configured, or the child failed).
    Gateway,
}

impl CompiledIn {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            CompiledIn::Child => "child",
            CompiledIn::Gateway => "gateway",
        }
    }
}

/// Runs `EXE filter compile -` with the component on stdin.
#[derive(Clone, Debug)]
pub(crate) struct ChildCompiler {
    exe: PathBuf,
    compiled_cache_dir: PathBuf,
}

impl ChildCompiler {
    /// A compiler running `exe`, filling the compiled-code cache `compiled_cache_dir`.
    pub(crate) fn new(exe: PathBuf, compiled_cache_dir: PathBuf) -> ChildCompiler {
        ChildCompiler {
            exe,
            compiled_cache_dir,
        }
    }

    /// Compiles `wasm` into the cache in a child process; the error says why it did not.
    pub(crate) fn compile(&self, wasm: &[u8]) -> Result<(), String> {
        let mut child = Command::new(&self.exe)
            .args([
                "--log-level",
                "error",
                "filter",
                "compile",
                "--compiled-cache-dir",
            ])
            .arg(&self.compiled_cache_dir)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        // The child reads all of stdin before it compiles, so this write cannot deadlock
        // against its stderr; a child that died early shows as a broken pipe here.
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(wasm))
            .transpose();
        let output = child
            .wait_with_output()
            .map_err(|e| format!("cannot wait for the compiler process: {e}"))?;
        if output.status.success() {
            return written
                .map(|_| ())
                .map_err(|e| format!("cannot hand the component over: {e}"));
        }
        Err(format!(
            "the compiler process ended with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// `edgegate filter compile`: compiles `wasm` into the compiled-code cache
/// `compiled_cache_dir`, where a gateway using that cache finds it.
pub fn compile_into_cache(
    name: &str,
    wasm: &[u8],
    compiled_cache_dir: &Path,
) -> Result<(), FilterError> {
    let runtime = Runtime::new(Some(compiled_cache_dir), None)?;
    runtime.compile(name, wasm).map(|_| ())
}
