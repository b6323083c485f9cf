//! The declaration: ConfigMap `kube-system/edgegate-filters`, one key `NAME.toml` per
//! filter. Each holds the filter's `NAME.toml` as in the filter directory, plus where its
//! component comes from and which nodes run it:
//!
//! ```toml
//! image = "registry.example/filters/masterservice@sha256:…"   # pinned by digest
//! pools = ["hangzhou"]       # optional: only nodes of these pools, or
//! nodes = ["edge-7"]         # of these names, run it (neither: every node)
//! [[canary]]                 # optional: another image for some pools or nodes
//! pools = ["shanghai"]
//! image = "registry.example/filters/masterservice@sha256:…"
//! # …then priority, on-error, [limits], [disable-after], [config] as in NAME.toml
//! ```

use std::collections::BTreeMap;

use crate::registry::Reference;

/// The ConfigMap's name.
pub(crate) const NAME: &str = "edgegate-filters";

/// A filter this node is to run: its pinned image and its `NAME.toml` text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The image, pinned by digest.
    pub(crate) image: Reference,
    /// The `NAME.toml` it runs with (the declaration's other keys).
    pub(crate) toml: String,
}

/// Who runs an image: pools and node names (neither: everyone).
#[derive(Default)]
struct Selector {
    pools: Option<Vec<String>>,
    nodes: Option<Vec<String>>,
}

impl Selector {
    fn take(table: &mut toml::Table) -> Result<Selector, String> {
        Ok(Selector {
            pools: names(table.remove("pools"), "pools")?,
            nodes: names(table.remove("nodes"), "nodes")?,
        })
    }

    fn selects(&self, node: &str, pool: Option<&str>) -> bool {
        if self.pools.is_none() && self.nodes.is_none() {
            return true;
        }
        let listed = |list: &Option<Vec<String>>, name: Option<&str>| {
            list.as_ref()
                .zip(name)
                .is_some_and(|(list, name)| list.iter().any(|n| n == name))
        };
        listed(&self.pools, pool) || listed(&self.nodes, Some(node))
    }
}

/// A list of names, if the key is there.
fn names(value: Option<toml::Value>, key: &str) -> Result<Option<Vec<String>>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let list = value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| format!("{key} must be a list of names"))?;
    Ok(Some(list))
}

/// An `image` value, pinned.
fn image(value: Option<toml::Value>) -> Result<Reference, String> {
    let text = value
        .as_ref()
        .and_then(toml::Value::as_str)
        .ok_or("image must be a reference pinned by digest (HOST/REPOSITORY@sha256:HEX)")?;
    let image = Reference::parse(text).map_err(|e| e.to_string())?;
    image.pinned().map_err(|e| e.to_string())?;
    Ok(image)
}

/// The filters of ConfigMap `data` that node `node` of pool `pool` runs, by name, each what
/// it runs or why its key could not be read.
pub(crate) fn for_node(
    data: &BTreeMap<String, String>,
    node: &str,
    pool: Option<&str>,
) -> BTreeMap<String, Result<Wanted, String>> {
    let mut wanted = BTreeMap::new();
    for (key, text) in data {
        let Some(name) = key.strip_suffix(".toml") else {
            tracing::warn!(key, "{NAME}: a key that is not NAME.toml is ignored");
            continue;
        };
        if name.is_empty() || name.starts_with('.') {
            continue;
        }
        match entry(text, node, pool) {
            Ok(Some(entry)) => {
                wanted.insert(name.to_owned(), Ok(entry));
            }
            Ok(None) => {}
            Err(error) => {
                wanted.insert(name.to_owned(), Err(format!("{key}: {error}")));
            }
        }
    }
    wanted
}

/// One key's filter, if this node runs it.
fn entry(text: &str, node: &str, pool: Option<&str>) -> Result<Option<Wanted>, String> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let selector = Selector::take(&mut table)?;
    let default = image(table.remove("image"))?;
    let canaries = match table.remove("canary") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => return Err("canary must be a list of tables ([[canary]])".into()),
    };
    let mut chosen = None;
    for canary in canaries {
        let toml::Value::Table(mut canary) = canary else {
            return Err("canary must be a list of tables ([[canary]])".into());
        };
        let selector = Selector::take(&mut canary)?;
        let image = image(canary.remove("image"))?;
        if let Some(key) = canary.keys().next() {
            return Err(format!("canary: unknown key {key}"));
        }
        if selector.pools.is_none() && selector.nodes.is_none() {
            return Err("a canary names pools or nodes".into());
        }
        if chosen.is_none() && selector.selects(node, pool) {
            chosen = Some(image);
        }
    }
    if !selector.selects(node, pool) {
        return Ok(None);
    }
    let toml = toml::to_string(&table).map_err(|e| e.to_string())?;
    Ok(Some(Wanted {
        image: chosen.unwrap_or(default),
        toml,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn data(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_canary_pool_runs_its_image_and_the_others_the_default() {
        let text = format!(
            "image = \"r.example/f/ms@{}\"\npriority = 5\n[[canary]]\npools = [\"hangzhou\"]\nimage = \"r.example/f/ms@{}\"\n[config]\nx = 1\n",
            digest('a'),
            digest('b')
        );
        let data = data(&[("ms.toml", text)]);
        let at = |node, pool| for_node(&data, node, pool)["ms"].clone().unwrap();
        assert_eq!(
            at("edge-1", Some("hangzhou"))
                .image
                .pinned()
                .unwrap()
                .as_str(),
            digest('b')
        );
        assert_eq!(
            at("edge-2", Some("shanghai"))
                .image
                .pinned()
                .unwrap()
                .as_str(),
            digest('a')
        );
        assert_eq!(
            at("edge-3", None).image.pinned().unwrap().as_str(),
            digest('a')
        );
        let toml = at("edge-1", Some("hangzhou")).toml;
        assert!(
            toml.contains("priority = 5") && toml.contains("[config]"),
            "{toml}"
        );
        assert!(
            !toml.contains("image") && !toml.contains("canary"),
            "{toml}"
        );
    }

    #[test]
    fn a_filter_for_some_pools_or_nodes_runs_only_there() {
        let text = format!(
            "image = \"r.example/f/t@{}\"\npools = [\"hangzhou\"]\nnodes = [\"edge-9\"]\n",
            digest('c')
        );
        let data = data(&[("t.toml", text)]);
        assert!(for_node(&data, "edge-1", Some("hangzhou")).contains_key("t"));
        assert!(for_node(&data, "edge-9", Some("shanghai")).contains_key("t"));
        assert!(!for_node(&data, "edge-2", Some("shanghai")).contains_key("t"));
        assert!(!for_node(&data, "edge-2", None).contains_key("t"));
    }

    #[test]
    fn unpinned_or_malformed_entries_are_errors_of_their_own_filter() {
        let data = data(&[
            ("tag.toml", "image = \"r.example/f/t:v1\"\n".into()),
            ("broken.toml", "image = [".into()),
            ("noimage.toml", "priority = 1\n".into()),
            (
                "bare.toml",
                format!(
                    "image = \"r.example/f/t@{}\"\n[[canary]]\nimage = \"r.example/f/t@{}\"\n",
                    digest('a'),
                    digest('b')
                ),
            ),
            (
                "good.toml",
                format!("image = \"r.example/f/g@{}\"\n", digest('d')),
            ),
            ("README", "ignored".into()),
        ]);
        let wanted = for_node(&data, "edge-1", None);
        assert_eq!(wanted.len(), 5);
        for bad in ["tag", "broken", "noimage", "bare"] {
            let error = wanted[bad].clone().unwrap_err();
            assert!(error.starts_with(&format!("{bad}.toml: ")), "{error}");
        }
        assert!(wanted["good"].is_ok());
    }
}
