//! Compiling in a child process, and falling back to this one.

use super::support::wasm;
use crate::filter::engine::Runtime;
use crate::filter::precompile::{ChildCompiler, CompiledIn};

#[test]
fn a_failing_compiler_process_falls_back_to_compiling_here() {
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let cache = scratch.path().join("compiled");
    for exe in ["/bin/false", "/nonexistent/edgegate"] {
        let child = ChildCompiler::new(exe.into(), cache.clone());
        let reason = child
            .compile(&wasm("tagger"))
            .expect_err("no compiler there");
        assert!(!reason.is_empty());
        let runtime = Runtime::new(Some(&cache), Some(child)).expect("the runtime builds");
        let (_, place) = runtime
            .compile("tagger", &wasm("tagger"))
            .expect("compiled");
        assert_eq!(place, CompiledIn::Gateway, "{exe}");
    }
}

#[test]
fn a_bad_component_is_refused_with_the_compilers_error() {
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let cache = scratch.path().join("compiled");
    let child = ChildCompiler::new("/bin/false".into(), cache.clone());
    let runtime = Runtime::new(Some(&cache), Some(child)).expect("the runtime builds");
    let truncated = &wasm("tagger")[..1000];
    let error = runtime
        .compile("tagger", truncated)
        .expect_err("a truncated component");
    assert!(error.to_string().contains("tagger"), "{error}");
}
