//! Work the gateway hands to a child process of its own binary, so that the memory the work
//! leaves behind goes with the child: compiling new components (Cranelift leaves several MB
//! of heap per compiled filter, which the allocator keeps), and checking configs against
//! their JSON Schemas (the validator's meta-schemas, regex engines and code, a good share of
//! an idle gateway's RSS; measured: benches/HISTORY.md, "Measurements behind choices in the
//! code"). `edgegate filter compile -` and `edgegate filter check-config` are the
//! child's side. If the child cannot do the work (a replaced binary, a failure to start),
//! the gateway does it in its own process, which also produces the error bad input deserves.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Runs `EXE filter compile -` and `EXE filter check-config`, with their input on stdin.
#[derive(Clone, Debug)]
pub(crate) struct HelperProcess {
    exe: PathBuf,
    compiled_cache_dir: PathBuf,
}

impl HelperProcess {
    /// A child running `exe`, compiling into the compiled-code store in `compiled_cache_dir`.
    pub(crate) fn new(exe: PathBuf, compiled_cache_dir: PathBuf) -> HelperProcess {
        HelperProcess {
            exe,
            compiled_cache_dir,
        }
    }

    /// Compiles `wasm` into the store in a child process; the error says why it did not.
    pub(crate) fn compile(&self, wasm: &[u8]) -> Result<(), String> {
        let mut args = vec!["compile".into(), "--compiled-cache-dir".into()];
        args.push(self.compiled_cache_dir.clone().into_os_string());
        args.push("-".into());
        self.run(&args, wasm).map(|_| ())
    }

    /// The child's verdict on `config` against `schema` (`Err` inside: why it is refused);
    /// the outer error says why the child gave none.
    pub(crate) fn check_config(
        &self,
        schema: &str,
        config: &Value,
    ) -> Result<Result<(), String>, String> {
        let input = serde_json::to_vec(&ConfigCheck {
            schema: Cow::Borrowed(schema),
            config: Cow::Borrowed(config),
        })
        .map_err(|e| format!("cannot encode the check: {e}"))?;
        let output = self.run(&["check-config".into()], &input)?;
        let verdict: CheckedConfig = serde_json::from_slice(&output).map_err(|e| {
            format!(
                "the checker's answer is not a verdict ({e}): {}",
                String::from_utf8_lossy(&output).trim()
            )
        })?;
        Ok(verdict.refused.map_or(Ok(()), Err))
    }

    /// Runs `EXE filter ARGS…` with `input` on stdin; its stdout when it succeeds.
    fn run(&self, args: &[std::ffi::OsString], input: &[u8]) -> Result<Vec<u8>, String> {
        let mut child = Command::new(&self.exe)
            .args(["--log-level", "error", "filter"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        // Each child reads all of stdin before it writes anything, so this write cannot
        // deadlock against its output; a child that died early shows as a broken pipe here.
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(input))
            .transpose();
        let output = child
            .wait_with_output()
            .map_err(|e| format!("cannot wait for the child process: {e}"))?;
        if output.status.success() {
            return written
                .map(|_| output.stdout)
                .map_err(|e| format!("cannot hand the input over: {e}"));
        }
        Err(format!(
            "the child process ended with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// What `filter check-config` reads from stdin.
#[derive(Serialize, Deserialize)]
pub(crate) struct ConfigCheck<'a> {
    /// The manifest's schema, as the component gave it.
    pub(crate) schema: Cow<'a, str>,
    /// The effective config.
    pub(crate) config: Cow<'a, Value>,
}

/// What `filter check-config` prints: why the config is refused, or `null`.
#[derive(Serialize, Deserialize)]
pub(crate) struct CheckedConfig {
    /// Why the config is refused; `None` if it is not.
    pub(crate) refused: Option<String>,
}
