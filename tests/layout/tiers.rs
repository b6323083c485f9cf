//! The tiers of `gateway/src`: each module's place, no import upward, each tier the
//! measured floor its imports set, and the configuration made of plain values.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::graph::graph;
use super::{name, read_crate, workspace};

/// The tiers of `gateway/src` (STYLE.md's dependency direction): a module imports only
/// modules below its own, and sits one tier above the highest it imports (its measured
/// floor). `main.rs` is the binary's root, not part of the library.
pub(crate) const GATEWAY_TIERS: &[(&str, u8)] = &[
    // Entry points for the fuzz targets: they reach into any tier.
    ("fuzzing", 8),
    // Listeners, the app and its identity, per-request wiring, the route table.
    ("server", 7),
    // What the flags say, checked: plain data.
    ("config", 6),
    // Offline answers, the node-level services, the operator tools, the HTTPS settings.
    ("local", 5),
    ("node", 5),
    ("tools", 5),
    ("tls", 5),
    // The store (one writer, many readers), the apiservers, the Wasm host.
    ("cache", 4),
    ("upstream", 4),
    ("filter", 4),
    // Framing and tee traits; the one refusal → response mapping.
    ("stream", 3),
    ("refusal", 3),
    // Response bodies and `Status` bodies.
    ("reply", 2),
    // Filter images in OCI registries.
    ("registry", 2),
    // Leaves: the command line, what a request is, the hub interface, the certificate
    // manager, the registry, the error chain, JSON for reading.
    ("cli", 1),
    ("request", 1),
    ("hub_link", 1),
    ("certificate", 1),
    ("metrics", 1),
    ("error", 1),
    ("json", 1),
    ("whole_file", 1),
];

#[test]
fn no_gateway_module_imports_a_higher_tier() {
    let tiers: HashMap<&str, u8> = GATEWAY_TIERS.iter().copied().collect();
    let modules = read_crate(&workspace().join("gateway/src"));
    let tier = |module: &[String]| module.first().map(|top| tiers.get(top.as_str()).copied());
    let mut wrong = Vec::new();
    for (from, targets) in graph(&modules) {
        let Some(from_tier) = tier(&from) else {
            continue;
        };
        let from_tier = from_tier.unwrap_or_else(|| panic!("{} has no tier", name(&from)));
        for target in targets {
            let Some(Some(target_tier)) = tier(&target) else {
                continue;
            };
            if target_tier > from_tier {
                wrong.push(format!("{} imports {}", name(&from), name(&target)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "lower tiers importing higher ones:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_configuration_imports_only_the_command_line_and_plain_values() {
    // The files of plain values the configuration is made of (no I/O, no handle); each
    // imports nothing of the crate but the leaves, as the configuration itself.
    const VALUES: &[&str] = &[
        "certificate::settings",
        "upstream::lb_mode",
        "hub_link::address",
        "node::multiplexer::resource",
    ];
    let modules = read_crate(&workspace().join("gateway/src"));
    let edges = graph(&modules);
    let leaf = |module: &Vec<String>| {
        GATEWAY_TIERS
            .iter()
            .any(|(top, tier)| *tier == 1 && module.first().is_some_and(|first| first == top))
    };
    let mut wrong = Vec::new();
    for target in &edges[&vec!["config".to_owned()]] {
        if !leaf(target) && !VALUES.contains(&name(target).as_str()) {
            wrong.push(format!("config imports {}", name(target)));
        }
    }
    for value in VALUES {
        let module: Vec<String> = value.split("::").map(str::to_owned).collect();
        let targets = edges
            .get(&module)
            .unwrap_or_else(|| panic!("{value} is gone"));
        wrong.extend(
            targets
                .iter()
                .filter(|target| !leaf(target))
                .map(|target| format!("{value} imports {}", name(target))),
        );
    }
    assert!(
        wrong.is_empty(),
        "the configuration is made of the command line and plain values:\n{}",
        wrong.join("\n")
    );
}

/// Each top module's floor: one above the highest module it imports, 1 for a leaf.
fn floors() -> BTreeMap<String, u8> {
    let modules = read_crate(&workspace().join("gateway/src"));
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in graph(&modules) {
        let Some(top) = from.first() else { continue };
        let entry = imports.entry(top.clone()).or_default();
        entry.extend(
            targets
                .iter()
                .filter_map(|target| target.first())
                .filter(|target| *target != top)
                .cloned(),
        );
    }
    fn floor(
        module: &str,
        imports: &BTreeMap<String, BTreeSet<String>>,
        known: &mut BTreeMap<String, u8>,
    ) -> u8 {
        if let Some(known) = known.get(module) {
            return *known;
        }
        let below = imports
            .get(module)
            .into_iter()
            .flatten()
            .map(|target| floor(target, imports, known))
            .max()
            .unwrap_or(0);
        known.insert(module.to_owned(), below + 1);
        below + 1
    }
    let mut known = BTreeMap::new();
    for module in imports.keys() {
        floor(module, &imports, &mut known);
    }
    known
}

#[test]
fn each_tier_is_the_floor_its_imports_set() {
    // A module placed higher than it must be hides what it depends on; one placed lower is
    // caught by the import check above. The table is what the imports measure.
    let floors = floors();
    let wrong: Vec<String> = GATEWAY_TIERS
        .iter()
        .filter(|(module, tier)| floors.get(*module).is_some_and(|floor| floor != tier))
        .map(|(module, tier)| format!("{module}: tier {tier}, floor {}", floors[*module]))
        .collect();
    assert!(
        wrong.is_empty(),
        "tiers off their floors:\n{}",
        wrong.join("\n")
    );
}
