//! The host interface under the names of the world's earlier patch versions
//! (`edgegate:filter/host@0.2.0` while the gateway runs 0.2.1), so that a component built
//! with an earlier SDK of the same minor version calls the host's own functions.
//!
//! wasmtime's linker would find `host@0.2.1` for a `host@0.2.0` import by itself, by semver,
//! but the stand-ins for unknown imports ([`super::engine::Runtime::prepare`]) match names
//! exactly: without these definitions every host function of an earlier component would be
//! a stand-in that traps. Each name gets every function of the current interface; a
//! component of an earlier version imports only those its version had.

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::bindings::{HostImports, Level, WORLD_VERSION};
use super::host::HostState;

/// Defines the host interface under each earlier patch version of the world's.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let ours = semver::Version::parse(WORLD_VERSION)?;
    for patch in 0..ours.patch {
        let name = format!("edgegate:filter/host@{}.{}.{patch}", ours.major, ours.minor);
        add_host(linker, &name)?;
    }
    Ok(())
}

type Store<'a> = StoreContextMut<'a, HostState>;

/// The parameters of `get` and `list`: group, version, resource, namespace, and the name or
/// the label selector.
type Lookup = (String, String, String, Option<String>, String);

/// The host interface under `name`.
fn add_host(linker: &mut Linker<HostState>, name: &str) -> wasmtime::Result<()> {
    let mut host = linker.instance(name)?;
    host.func_wrap(
        "get",
        |mut store: Store<'_>, (group, version, resource, namespace, name): Lookup| {
            HostImports::get(store.data_mut(), group, version, resource, namespace, name)
                .map(|found| (found,))
        },
    )?;
    host.func_wrap(
        "list",
        |mut store: Store<'_>, (group, version, resource, namespace, selector): Lookup| {
            HostImports::list(
                store.data_mut(),
                group,
                version,
                resource,
                namespace,
                selector,
            )
            .map(|found| (found,))
        },
    )?;
    host.func_wrap(
        "log",
        |mut store: Store<'_>, (level, message): (Level, String)| {
            HostImports::log(store.data_mut(), level, message)
        },
    )?;
    host.func_wrap("log-enabled", |mut store: Store<'_>, (level,): (Level,)| {
        HostImports::log_enabled(store.data_mut(), level).map(|enabled| (enabled,))
    })?;
    host.func_wrap(
        "count",
        |mut store: Store<'_>, (name, delta): (String, u64)| {
            HostImports::count(store.data_mut(), name, delta)
        },
    )?;
    Ok(())
}
