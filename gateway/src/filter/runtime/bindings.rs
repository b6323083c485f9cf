//! The host side of the `edgegate:filter` world, generated from the one WIT file the SDK's
//! guest bindings come from too, and the conversions between the WIT world's verb and the
//! SDK's.

wasmtime::component::bindgen!({
    path: "../filters-sdk/wit",
    world: "filter",
    // Host imports may trap the guest: a selector that does not parse fails the call.
    imports: { default: trappable },
    // An instance remembers the context it was last given, to skip an unchanged `begin`.
    additional_derives: [PartialEq],
});

pub(crate) use self::edgegate::filter::host::Host as HostImports;
pub(crate) use self::edgegate::filter::types::{Host as TypesHost, Level, Verb};
pub(crate) use self::{Filter as FilterWorld, FilterPre as FilterWorldPre};

/// The version of the `edgegate:filter` world this gateway runs (the WIT package's).
pub(crate) const WORLD_VERSION: &str = "0.2.1";

/// Whether a component built against world version `built` runs on this gateway: the same
/// major version and, below 1.0, the same minor (semver's compatibility, by which wasmtime's
/// linker also matches the imports), and no later patch, which may import what this gateway
/// lacks.
pub(crate) fn runs(built: &str) -> bool {
    let ours = semver::Version::parse(WORLD_VERSION).expect("WORLD_VERSION is a version");
    let Ok(built) = semver::Version::parse(built) else {
        return false;
    };
    built.pre.is_empty()
        && built.major == ours.major
        && (ours.major > 0 || built.minor == ours.minor)
        && built <= ours
}

/// The `edgegate:filter` world version a component's imports name, if they name one.
pub(crate) fn imported_world_version(
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> Option<String> {
    component
        .component_type()
        .imports(engine)
        .find_map(|(name, _)| {
            let (_, version) = name.strip_prefix("edgegate:filter/")?.split_once('@')?;
            Some(version.to_owned())
        })
}

// The verb conversions between the WIT world's enum and the SDK's `Verb`, the one type the
// gateway's requests, the SDK and this binding share (written once, in the SDK).
edgegate_filter_sdk::__wit_verb_conversions!(Verb);

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn components_of_this_minor_version_up_to_this_patch_run() {
        assert!(runs("0.2.0") && runs("0.2.1"));
        for other in ["0.2.2", "0.1.0", "0.3.0", "1.2.1", "0.2.1-rc.1", "0.2", "x"] {
            assert!(!runs(other), "{other}");
        }
    }

    #[test]
    fn the_world_version_is_the_wit_package_version() {
        let wit = include_str!("../../../../filters-sdk/wit/filter.wit");
        let package = format!("package edgegate:filter@{};", super::WORLD_VERSION);
        assert!(wit.lines().any(|line| line == package), "{package}");
    }
}
