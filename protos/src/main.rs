//! Compiles the Kubernetes `generated.proto` files the gateway reads protobuf bodies of into
//! one descriptor set (`gateway/src/stream/protobuf/kubernetes.binpb`), without source info.
//!
//! `cargo run --manifest-path protos/Cargo.toml -- API APIMACHINERY OUT`, where API and
//! APIMACHINERY are checkouts of `k8s.io/api` and `k8s.io/apimachinery` at one release's
//! tag (the gateway's `stream::protobuf::descriptors` names the one it was made from).

use std::path::PathBuf;
use std::process::ExitCode;

use prost::Message as _;

/// The files compiled, under `k8s.io/`: their imports come along.
const FILES: &[&str] = &[
    "k8s.io/api/core/v1/generated.proto",
    "k8s.io/api/discovery/v1/generated.proto",
    "k8s.io/api/discovery/v1beta1/generated.proto",
];

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [api, apimachinery, out] = args.as_slice() else {
        eprintln!("usage: edgegate-protos API APIMACHINERY OUT");
        return ExitCode::from(2);
    };
    match compile(api, apimachinery, out) {
        Ok(size) => {
            println!("{} ({size} bytes)", out.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("edgegate-protos: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Lays the two checkouts out as their import paths expect, compiles [`FILES`] and writes
/// the set to `out`; returns its size.
fn compile(
    api: &PathBuf,
    apimachinery: &PathBuf,
    out: &PathBuf,
) -> Result<usize, Box<dyn std::error::Error>> {
    let root = std::env::temp_dir().join(format!("edgegate-protos-{}", std::process::id()));
    let k8s = root.join("k8s.io");
    std::fs::create_dir_all(&k8s)?;
    std::os::unix::fs::symlink(std::path::absolute(api)?, k8s.join("api"))?;
    std::os::unix::fs::symlink(std::path::absolute(apimachinery)?, k8s.join("apimachinery"))?;
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(FILES)?;
    let bytes = compiler.file_descriptor_set().encode_to_vec();
    std::fs::remove_dir_all(&root)?;
    std::fs::write(out, &bytes)?;
    Ok(bytes.len())
}
