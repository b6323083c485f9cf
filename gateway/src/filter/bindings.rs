//! The host side of the `edgegate:filter` world, generated from the one WIT file the SDK's
//! guest bindings come from too.

wasmtime::component::bindgen!({
    path: "../filters-sdk/wit",
    world: "filter",
    // Host imports may trap the guest: a selector that does not parse fails the call.
    imports: { default: trappable },
});

pub(crate) use self::edgegate::filter::host::Host as HostImports;
pub(crate) use self::edgegate::filter::types::{Host as TypesHost, Level, Verb};
pub(crate) use self::{Filter as FilterWorld, FilterPre as FilterWorldPre};
