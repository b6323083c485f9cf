//! Stand-ins that trap, for the imports of a component the gateway does not provide: stdio,
//! the filesystem, sockets, polling, which a `wasm32-wasip2` build imports whether it calls
//! them or not.
//!
//! An interface counts as provided when the linker defines it at a semver-compatible version,
//! as wasmtime's linker itself matches imports: `wasi:cli/environment@0.2.6` (what Rust 1.95's
//! std imports) is served by the `@0.2.12` wasmtime-wasi defines, and
//! `edgegate:filter/host@0.2.0` by this gateway's `@0.2.1`. wasmtime's own
//! `Linker::define_unknown_imports_as_traps` looks names up exactly, so it defines a stand-in
//! under the import's own name, which then shadows the compatible definition: every call a
//! filter makes to the clocks, the environment, the random seed or the host would trap.

use std::collections::{BTreeMap, BTreeSet};

use wasmtime::component::types::{ComponentInstance, ComponentItem};
use wasmtime::component::{Component, Linker, LinkerInstance, ResourceType};
use wasmtime::{Engine, StoreContextMut};
use wasmtime_environ::component::alternate_lookup_key;

use super::host::HostState;

/// Defines a resource, under the name given, in a stood-in interface.
pub(crate) type DefineResource =
    fn(&mut LinkerInstance<'_, HostState>, &str) -> wasmtime::Result<()>;

/// The interfaces the gateway's linker defines, each by its semver track
/// (`wasi:cli/environment@0.2`), or by its whole name when its version has none; and the
/// resources of stood-in interfaces that provided ones hand out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Provided {
    tracks: BTreeSet<String>,
    resources: BTreeMap<(String, String), DefineResource>,
}

impl Provided {
    /// The interfaces named (with their versions) as provided.
    pub(crate) fn new<S: AsRef<str>>(interfaces: impl IntoIterator<Item = S>) -> Provided {
        let tracks = interfaces
            .into_iter()
            .map(|name| track(name.as_ref()).to_owned())
            .collect();
        Provided {
            tracks,
            resources: BTreeMap::new(),
        }
    }

    /// Has `define` define resource `name` of `interface` where that interface is stood in
    /// for: a provided interface that hands it out (`wasi:clocks/monotonic-clock` a
    /// `wasi:io/poll` pollable) links only with the resource type it was defined with.
    pub(crate) fn resource(
        mut self,
        interface: &str,
        name: &str,
        define: DefineResource,
    ) -> Provided {
        let key = (track(interface).to_owned(), name.to_owned());
        self.resources.insert(key, define);
        self
    }

    /// Whether an import named `name` finds a definition in the linker.
    pub(crate) fn provides(&self, name: &str) -> bool {
        self.tracks.contains(track(name))
    }

    /// What defines resource `name` of a stood-in `interface`, when not a stand-in type.
    fn resource_of(&self, interface: &str, name: &str) -> Option<DefineResource> {
        let key = (track(interface).to_owned(), name.to_owned());
        self.resources.get(&key).copied()
    }
}

/// The part of an interface name by which wasmtime's linker finds a compatible definition.
fn track(name: &str) -> &str {
    alternate_lookup_key(name).map_or(name, |(track, _)| track)
}

/// Defines a stand-in that traps for every import of `component` that `provided` lacks.
pub(crate) fn define(
    linker: &mut Linker<HostState>,
    component: &Component,
    provided: &Provided,
) -> wasmtime::Result<()> {
    let engine = linker.engine().clone();
    let ty = component.component_type();
    let stood_in: Vec<_> = ty
        .imports(&engine)
        .filter(|(name, _)| !provided.provides(name))
        .collect();
    // A resource is found by its type wherever it is named: `wasi:io/streams` names the
    // pollable of `wasi:io/poll` too.
    let mut handed_out = Vec::new();
    for (interface, item) in &stood_in {
        if let ComponentItem::ComponentInstance(instance) = &item.ty {
            for (name, item) in instance.exports(&engine) {
                if let (ComponentItem::Resource(ty), Some(define)) =
                    (item.ty, provided.resource_of(interface, name))
                {
                    handed_out.push((ty, define));
                }
            }
        }
    }
    let mut root = linker.root();
    for (name, item) in stood_in {
        let at = Import {
            engine: &engine,
            handed_out: &handed_out,
            path: name,
        };
        stand_in(&mut root, &at, name, item.ty)?;
    }
    Ok(())
}

/// Where a stand-in is defined.
struct Import<'a> {
    engine: &'a Engine,
    /// The resources defined as the type a provided interface hands out, by their type.
    handed_out: &'a [(ResourceType, DefineResource)],
    /// The item's whole name, for the trap's message.
    path: &'a str,
}

/// Defines `item`, imported at `at`, under `name` in `linker`, as a stand-in.
fn stand_in(
    linker: &mut LinkerInstance<'_, HostState>,
    at: &Import<'_>,
    name: &str,
    item: ComponentItem,
) -> wasmtime::Result<()> {
    match item {
        ComponentItem::ComponentFunc(_) => {
            let path = at.path.to_owned();
            linker.func_new(name, move |_: StoreContextMut<'_, HostState>, _, _, _| {
                wasmtime::bail!("`{path}` is not provided to filters")
            })
        }
        ComponentItem::ComponentInstance(instance) => {
            stand_in_instance(&mut linker.instance(name)?, at, &instance)
        }
        ComponentItem::Resource(ty) => match at.handed_out.iter().find(|(t, _)| *t == ty) {
            Some((_, define)) => define(linker, name),
            None => linker.resource(name, ResourceType::host::<()>(), |_, _| Ok(())),
        },
        // Types need no definition; core modules and components cannot be stood in for, and
        // linking names them.
        ComponentItem::Type(_)
        | ComponentItem::CoreFunc(_)
        | ComponentItem::Module(_)
        | ComponentItem::Component(_) => Ok(()),
    }
}

/// Defines every export of `instance`, imported at `at`, in `linker` as a stand-in.
fn stand_in_instance(
    linker: &mut LinkerInstance<'_, HostState>,
    at: &Import<'_>,
    instance: &ComponentInstance,
) -> wasmtime::Result<()> {
    for (name, item) in instance.exports(at.engine) {
        let path = format!("{}#{name}", at.path);
        let inner = Import { path: &path, ..*at };
        stand_in(linker, &inner, name, item.ty)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Provided;

    #[test]
    fn an_interface_is_provided_at_every_version_of_its_semver_track() {
        let provided = Provided::new([
            "wasi:cli/environment@0.2.12",
            "edgegate:filter/host@0.2.1",
            "example:x/stable@1.4.0",
            "example:x/unversioned",
        ]);
        for name in [
            "wasi:cli/environment@0.2.0",
            "wasi:cli/environment@0.2.6",
            "wasi:cli/environment@0.2.13",
            "edgegate:filter/host@0.2.0",
            "example:x/stable@1.0.0",
            "example:x/stable@1.9.3",
            "example:x/unversioned",
        ] {
            assert!(provided.provides(name), "{name}");
        }
        for name in [
            "wasi:cli/environment@0.3.0",
            "wasi:cli/environment@0.2.6-rc.1",
            "wasi:cli/stdout@0.2.6",
            "edgegate:filter/host@0.1.0",
            "example:x/stable@2.0.0",
            "example:x/unversioned@0.1.0",
        ] {
            assert!(!provided.provides(name), "{name}");
        }
    }
}
