//! The sandbox filters run in: one wasmtime engine, the host side of the `edgegate:filter`
//! world, instances called under per-call limits, and the store of compiled code.
//!
//! # Layout
//! - `bindings`: the host bindings of the WIT world (generated) and the verb conversions.
//! - `engine`: the one wasmtime engine and its linker; compiling and linking a component.
//! - `epoch`: the epoch ticker that bounds how long a call may run.
//! - `host`: a store's state; the host imports (lookups, log, count) and the WASI subset.
//! - `trapping_imports`: functions that trap, linked for the imports the linker lacks.
//! - `instance`: one instance and calls into it under its limits; why a call failed.
//! - `code_store`: the compiled-code store, files of machine code the gateway maps.
//! - `function_cache`: the functions compiled for it, which a new component's compile takes.
//! - `seal`: the key and HMAC seals that let the gateway trust the code it maps.
//! - `helper_process`: compiling and config checks handed to a child process.
//! - `lookup_use`: what each call's lookups read, per object, so that a lookup change
//!   re-filters only the objects that read it.
//! - `replacement`: what a filter's replacement must be before it is sent on.

pub(super) mod bindings;
pub(super) mod code_store;
pub(super) mod engine;
pub(super) mod epoch;
pub(super) mod function_cache;
pub(super) mod helper_process;
pub(super) mod host;
pub(super) mod instance;
pub(super) mod lookup_use;
pub(super) mod replacement;
pub(super) mod seal;
pub(super) mod trapping_imports;
