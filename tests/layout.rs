//! The source layout, checked: no import circle between the files of `gateway/src` or
//! `filters-sdk/src`, none between their folders taken whole (a folder with its files), no
//! module of `gateway/src` importing one of a higher tier, no file much over 500 lines (a
//! product file 450, its inline tests aside; a function 120: `layout/sizes.rs`), one door
//! and one plan per request, and the fuzz targets' modules built only with the `fuzzing`
//! feature.
//!
//! A file imports another when it names an item by a path (`use`, or a path in code or a
//! type) that resolves into that file: `crate::…`, `super::…`, `self::…`, a child module's
//! name, or a name a `use` brought in; a `#[macro_export]` macro, which the language places
//! at the crate root, is named where its file defines it. Test code (`tests.rs`, `tests/`, `#[cfg(test)]` items)
//! is left out: tests may reach anywhere. A parent that re-exports its children and a child
//! that imports through the parent make a circle; children import each other directly.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

#[path = "layout/graph.rs"]
mod graph;
#[path = "layout/sizes.rs"]
mod sizes;
#[path = "layout/tiers.rs"]
mod tiers;

use graph::{circles, graph};

/// "About 500 lines": a file a little over is one concern that has grown a few tests.
const LINE_LIMIT: usize = 520;

/// One module file: the module paths it names.
struct Module {
    imports: BTreeSet<Vec<String>>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every non-test module file under `src`, by module path.
fn module_files(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("read a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "tests") {
                    pending.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let mut segments: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            match segments.last().map(String::as_str) {
                Some("lib") if segments.len() == 1 => segments.clear(),
                Some("main") if segments.len() == 1 => continue,
                Some("tests") => continue,
                Some("mod") => {
                    segments.pop();
                }
                _ => {}
            }
            files.insert(segments, path);
        }
    }
    files
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && {
            let tokens = attr.meta.require_list().map(|list| list.tokens.to_string());
            tokens.is_ok_and(|text| {
                text.split(|c: char| !c.is_alphanumeric())
                    .any(|w| w == "test")
            })
        }
    })
}

/// The paths one file names, relative to its module, with `use` aliases expanded.
struct Paths {
    module: Vec<String>,
    children: BTreeSet<String>,
    aliases: HashMap<String, Vec<String>>,
    found: BTreeSet<Vec<String>>,
}

impl Paths {
    /// A path's segments made absolute (from the crate root), or `None` for a path into
    /// another crate or a local name.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => {
                let mut base = self.module.clone();
                base.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if self.children.contains(name) => {
                let mut base = self.module.clone();
                base.push(name.to_string());
                base
            }
            name => self.aliases.get(name)?.clone(),
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.used(prefix, &name.ident.to_string(), None),
            syn::UseTree::Rename(rename) => self.used(
                prefix,
                &rename.ident.to_string(),
                Some(rename.rename.to_string()),
            ),
            syn::UseTree::Glob(_) => {
                if let Some(path) = self.absolute(prefix) {
                    self.found.insert(path);
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn used(&mut self, prefix: &[String], name: &str, alias: Option<String>) {
        let mut segments = prefix.to_vec();
        if name != "self" {
            segments.push(name.to_string());
        }
        if let Some(path) = self.absolute(&segments) {
            let local = alias.unwrap_or_else(|| segments.last().cloned().unwrap_or_default());
            self.aliases.insert(local, path.clone());
            self.found.insert(path);
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            syn::Item::Struct(item) => &item.attrs,
            syn::Item::Const(item) => &item.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            if let Some(absolute) = self.absolute(&segments) {
                self.found.insert(absolute);
            }
        }
        syn::visit::visit_path(self, path);
    }
}

/// The `#[macro_export]` macros defined at the top of a file, by name.
fn exported_macros(syntax: &syn::File) -> impl Iterator<Item = String> + '_ {
    syntax.items.iter().filter_map(|item| match item {
        syn::Item::Macro(item) if item.attrs.iter().any(|a| a.path().is_ident("macro_export")) => {
            item.ident.as_ref().map(|ident| ident.to_string())
        }
        _ => None,
    })
}

/// Every module of the crate under `src` with the module paths it names.
fn read_crate(src: &Path) -> BTreeMap<Vec<String>, Module> {
    let files = module_files(src);
    let parsed: Vec<(&Vec<String>, syn::File)> = files
        .iter()
        .map(|(module, file)| {
            let text = fs::read_to_string(file).expect("read a source file");
            let syntax =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            (module, syntax)
        })
        .collect();
    // `crate::name!` of an exported macro names the module whose file defines it.
    let macro_homes: HashMap<Vec<String>, Vec<String>> = parsed
        .iter()
        .flat_map(|(module, syntax)| {
            exported_macros(syntax).map(|name| (vec![name], (*module).clone()))
        })
        .collect();
    let mut modules = BTreeMap::new();
    for (module, syntax) in &parsed {
        let children = syntax
            .items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Mod(item) if !is_cfg_test(&item.attrs) => Some(item.ident.to_string()),
                _ => None,
            })
            .collect();
        let mut paths = Paths {
            module: (*module).clone(),
            children,
            aliases: HashMap::new(),
            found: BTreeSet::new(),
        };
        // Aliases first, so a path in code before its `use` still resolves.
        for item in &syntax.items {
            if let syn::Item::Use(item) = item {
                paths.visit_item_use(item);
            }
        }
        paths.visit_file(syntax);
        let imports = paths
            .found
            .into_iter()
            .map(|path| macro_homes.get(&path).cloned().unwrap_or(path))
            .collect();
        modules.insert((*module).clone(), Module { imports });
    }
    modules
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

fn assert_no_circles(crate_src: &str) {
    let modules = read_crate(&workspace().join(crate_src));
    let edges = graph(&modules);
    // Each circle with the imports that close it, so the failure says what to cut.
    let text: Vec<String> = circles(&edges)
        .iter()
        .map(|component| {
            let members: BTreeSet<&Vec<String>> = component.iter().collect();
            let imports: Vec<String> = component
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|to| members.contains(to))
                        .map(move |to| format!("  {} → {}", name(from), name(to)))
                })
                .collect();
            let names: Vec<String> = component.iter().map(|m| name(m)).collect();
            format!("{}\n{}", names.join(" ⇄ "), imports.join("\n"))
        })
        .collect();
    assert!(
        text.is_empty(),
        "import circles in {crate_src}:\n{}",
        text.join("\n")
    );
}

#[test]
fn no_import_circle_in_the_gateway() {
    assert_no_circles("gateway/src");
}

#[test]
fn no_import_circle_in_the_sdk() {
    assert_no_circles("filters-sdk/src");
}

/// The circles between sibling modules of `crate_src` taken whole (a folder with its files):
/// per parent, each edge of the file graph that crosses from one child's subtree to
/// another's becomes an edge between those children.
fn folder_circles(crate_src: &str) -> Vec<String> {
    let modules = read_crate(&workspace().join(crate_src));
    let edges = graph(&modules);
    let parents: BTreeSet<&[String]> = modules
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| &m[..m.len() - 1])
        .collect();
    let mut found = Vec::new();
    for parent in parents {
        let depth = parent.len() + 1;
        let child = |m: &Vec<String>| -> Option<Vec<String>> {
            (m.len() >= depth && m.starts_with(parent)).then(|| m[..depth].to_vec())
        };
        let mut folded: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (from, targets) in &edges {
            let Some(from) = child(from) else { continue };
            let entry = folded.entry(from.clone()).or_default();
            entry.extend(targets.iter().filter_map(child).filter(|to| *to != from));
        }
        let targets: BTreeSet<Vec<String>> = folded.values().flatten().cloned().collect();
        for target in targets {
            folded.entry(target).or_default();
        }
        for circle in circles(&folded) {
            let names: Vec<String> = circle.iter().map(|m| name(m)).collect();
            found.push(names.join(" ⇄ "));
        }
    }
    found
}

fn assert_no_folder_circles(crate_src: &str) {
    let found = folder_circles(crate_src);
    assert!(
        found.is_empty(),
        "sibling modules of {crate_src} importing each other (folders taken whole):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_import_circle_between_folders_of_the_gateway() {
    assert_no_folder_circles("gateway/src");
}

#[test]
fn no_import_circle_between_folders_of_the_sdk() {
    assert_no_folder_circles("filters-sdk/src");
}

#[test]
fn no_file_is_much_over_500_lines() {
    let mut long = Vec::new();
    let mut pending: Vec<PathBuf> = [
        "gateway/src",
        "filters-sdk/src",
        "json-scan/src",
        "filters",
        "tests",
    ]
    .iter()
    .map(|dir| workspace().join(dir))
    .collect();
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("read a folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let lines = fs::read_to_string(&path).expect("read").lines().count();
                if lines > LINE_LIMIT {
                    long.push(format!("{}: {lines}", path.display()));
                }
            }
        }
    }
    long.sort();
    assert!(
        long.is_empty(),
        "files over {LINE_LIMIT} lines:\n{}",
        long.join("\n")
    );
}

/// The modules that exist only for the fuzz targets (`fuzz/`).
const FUZZ_ONLY: &[&str] = &["fuzzing", "fuzz_hub"];

/// Every name in a `use` tree.
fn use_names(tree: &syn::UseTree) -> Vec<String> {
    match tree {
        syn::UseTree::Path(p) => [vec![p.ident.to_string()], use_names(&p.tree)].concat(),
        syn::UseTree::Name(n) => vec![n.ident.to_string()],
        syn::UseTree::Rename(r) => vec![r.ident.to_string(), r.rename.to_string()],
        syn::UseTree::Glob(_) => Vec::new(),
        syn::UseTree::Group(g) => g.items.iter().flat_map(use_names).collect(),
    }
}

/// Whether `attrs` hold `#[cfg(feature = "fuzzing")]`.
fn is_cfg_fuzzing(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .meta
                .require_list()
                .is_ok_and(|list| list.tokens.to_string() == r#"feature = "fuzzing""#)
    })
}

#[test]
fn the_fuzz_entry_points_are_built_only_with_the_fuzzing_feature() {
    let mut declared = 0;
    let mut ungated = Vec::new();
    for (module, path) in module_files(&workspace().join("gateway/src")) {
        let text = fs::read_to_string(&path).expect("read a source file");
        let file = syn::parse_file(&text).expect("parse a source file");
        for item in &file.items {
            let (attrs, names) = match item {
                syn::Item::Mod(m) => (&m.attrs, m.ident.to_string()),
                syn::Item::Use(u) => (&u.attrs, use_names(&u.tree).join(" ")),
                _ => continue,
            };
            let named = names
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| FUZZ_ONLY.contains(&word));
            if !named {
                continue;
            }
            declared += 1;
            if !is_cfg_fuzzing(attrs) {
                ungated.push(format!("{}: {names}", name(&module)));
            }
        }
    }
    assert!(declared >= 2, "the fuzz modules were not found");
    assert!(
        ungated.is_empty(),
        "built without the `fuzzing` feature, into the product:\n{}",
        ungated.join("\n")
    );
}
