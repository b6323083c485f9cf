//! What the operator says about filters: a filter's own `NAME.toml` beside its `.wasm`, and
//! the gateway-level filter config file (`--filter-config`, YurtHub's `yurt-hub-cfg`), merged
//! over the manifest's defaults into the settings a filter runs with.
//!
//! ```toml
//! # NAME.toml
//! priority = 10                      # overrides the manifest's
//! enabled = true
//! add-components = ["coredns"]
//! remove-components = ["kubectl"]
//! on-error = "keep"                  # or "drop", "fail"
//! [limits]
//! memory-mib = 64
//! deadline-ms = 100
//! max-output-kib = 3072
//! [disable-after]                    # turned off at the 10th failure within 60 s
//! failures = 10
//! within-s = 60
//! [config]                           # passed to `configure` as JSON
//! annotation = "example.com/node"
//! ```
//!
//! ```toml
//! # --filter-config FILE
//! disabled = ["nodestamp"]           # or ["*"] for all
//! [filters.servicetopology]
//! add-components = ["nginx-ingress-controller"]
//! remove-components = []
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::filter::runtime::engine::MAX_MEMORY_BYTES;
use crate::filter::settings::{DisableAfter, Limits, OnError};
use edgegate_filter_sdk::Manifest;

/// `[limits]` of a `NAME.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct LimitsFile {
    memory_mib: Option<u64>,
    deadline_ms: Option<u64>,
    max_output_kib: Option<u64>,
}

/// `[disable-after]` of a `NAME.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct DisableAfterFile {
    failures: u32,
    within_s: u64,
}

impl DisableAfterFile {
    /// The setting; an error if a value is out of range.
    fn settings(&self) -> Result<DisableAfter, String> {
        if !(1..=100_000).contains(&self.failures) {
            return Err("disable-after.failures must be 1..=100000".into());
        }
        if !(1..=86_400).contains(&self.within_s) {
            return Err("disable-after.within-s must be 1..=86400".into());
        }
        Ok(DisableAfter {
            failures: self.failures,
            window: Duration::from_secs(self.within_s),
        })
    }
}

/// A filter's `NAME.toml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct FilterFile {
    priority: Option<i32>,
    enabled: Option<bool>,
    #[serde(default)]
    add_components: Vec<String>,
    #[serde(default)]
    remove_components: Vec<String>,
    on_error: Option<OnError>,
    #[serde(default)]
    limits: LimitsFile,
    disable_after: Option<DisableAfterFile>,
    config: Option<toml::Table>,
}

/// One filter's entry in the gateway config file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct GatewayFilterEntry {
    #[serde(default)]
    add_components: Vec<String>,
    #[serde(default)]
    remove_components: Vec<String>,
}

/// The gateway-level filter config file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct GatewayFile {
    #[serde(default)]
    disabled: Vec<String>,
    #[serde(default)]
    filters: BTreeMap<String, GatewayFilterEntry>,
}

impl FilterFile {
    /// Parses a `NAME.toml`.
    pub(crate) fn parse(text: &str) -> Result<FilterFile, toml::de::Error> {
        toml::from_str(text)
    }

    /// Whether the file disables the filter.
    pub(crate) fn disabled(&self) -> bool {
        self.enabled == Some(false)
    }

    /// The `[config]` table as JSON (`{}` when absent).
    pub(crate) fn config_json(&self) -> serde_json::Value {
        match &self.config {
            // A TOML table is always representable as JSON.
            Some(table) => serde_json::to_value(table).unwrap_or_default(),
            None => serde_json::Value::Object(Default::default()),
        }
    }

    /// Limits over `defaults`; `None` if a value is out of range.
    pub(crate) fn limits(&self, defaults: Limits) -> Result<Limits, String> {
        let mut limits = defaults;
        if let Some(mib) = self.limits.memory_mib {
            let bytes = usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
            if mib == 0 || bytes > MAX_MEMORY_BYTES {
                return Err(format!(
                    "limits.memory-mib must be 1..={}",
                    MAX_MEMORY_BYTES >> 20
                ));
            }
            limits.memory = bytes;
        }
        if let Some(ms) = self.limits.deadline_ms {
            // A minute is far past any sane filter; it also keeps tick arithmetic small.
            if ms == 0 || ms > 60_000 {
                return Err("limits.deadline-ms must be 1..=60000".into());
            }
            limits.deadline = Duration::from_millis(ms);
        }
        if let Some(kib) = self.limits.max_output_kib {
            if kib == 0 || kib > (1 << 20) {
                return Err("limits.max-output-kib must be 1..=1048576".into());
            }
            limits.max_output = usize::try_from(kib << 10).unwrap_or(usize::MAX);
        }
        Ok(limits)
    }
}

impl GatewayFile {
    /// Parses the gateway config file.
    pub(crate) fn parse(text: &str) -> Result<GatewayFile, toml::de::Error> {
        toml::from_str(text)
    }

    /// Whether the file disables the filter `name` (by name or with `*`).
    pub(crate) fn disables(&self, name: &str) -> bool {
        self.disabled.iter().any(|d| d == "*" || d == name)
    }

    /// Has the filters in `components` (by their names in the directory, see
    /// [`components_of_present`]) apply to those components too.
    pub(crate) fn add_components(&mut self, components: &BTreeMap<String, Vec<String>>) {
        for (filter, added) in components {
            self.filters
                .entry(filter.clone())
                .or_default()
                .add_components
                .extend(added.iter().cloned());
        }
    }

    /// Also disables `names` (the command line's), matched with `-` and `_` ignored, as
    /// YurtHub names `discardcloudservice` what a file may call `discard-cloud-service`.
    pub(crate) fn disable_also(&mut self, names: &[String], present: &[&str]) {
        for name in names {
            if name == "*" {
                self.disabled.push(name.clone());
                continue;
            }
            let wanted = plain(name);
            self.disabled.extend(
                present
                    .iter()
                    .filter(|p| plain(p) == wanted)
                    .map(|p| (*p).to_owned()),
            );
        }
    }
}

/// The components `hub` (YurtHub's per-filter keys of `yurt-hub-cfg`) adds to the filters
/// `present`, by their names there; a key matches as [`GatewayFile::disable_also`] matches,
/// and keys naming no present filter are left out.
pub(crate) fn components_of_present(
    hub: &BTreeMap<String, Vec<String>>,
    present: &[&str],
) -> BTreeMap<String, Vec<String>> {
    let mut matched: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, added) in hub {
        let wanted = plain(name);
        for filter in present.iter().filter(|p| plain(p) == wanted) {
            matched
                .entry((*filter).to_owned())
                .or_default()
                .extend(added.iter().cloned());
        }
    }
    matched
}

/// A filter's name as YurtHub compares it: `-`, `_` and case ignored.
fn plain(name: &str) -> String {
    name.replace(['-', '_'], "").to_ascii_lowercase()
}

/// Everything a loaded filter runs with: the manifest's defaults under its `NAME.toml` and
/// the gateway filter config.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSettings {
    /// Order in the chain.
    pub priority: i32,
    /// Components it applies to.
    pub components: BTreeSet<String>,
    /// Failure policy.
    pub on_error: OnError,
    /// Per-call limits.
    pub limits: Limits,
    /// When it is turned off for failing again and again; never when `None`.
    pub disable_after: Option<DisableAfter>,
    /// The config passed to `configure`.
    pub config: serde_json::Value,
}

/// Merges the manifest's defaults, the filter's file and the gateway config.
pub(crate) fn effective(
    name: &str,
    manifest: &Manifest,
    file: &FilterFile,
    gateway: &GatewayFile,
    default_limits: Limits,
) -> Result<RunSettings, String> {
    let mut components: BTreeSet<String> = manifest.components.iter().cloned().collect();
    components.extend(file.add_components.iter().cloned());
    for removed in &file.remove_components {
        components.remove(removed);
    }
    if let Some(entry) = gateway.filters.get(name) {
        components.extend(entry.add_components.iter().cloned());
        for removed in &entry.remove_components {
            components.remove(removed);
        }
    }
    Ok(RunSettings {
        priority: file.priority.unwrap_or(manifest.priority),
        components,
        on_error: file.on_error.unwrap_or_default(),
        limits: file.limits(default_limits)?,
        disable_after: file
            .disable_after
            .as_ref()
            .map(DisableAfterFile::settings)
            .transpose()?,
        config: file.config_json(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yurt_hub_cfg_adds_components_to_the_filter_it_names() {
        let manifest = Manifest::new("discard-cloud-service", "1").components(&["kube-proxy"]);
        let file = FilterFile::default();
        let mut gateway = GatewayFile::parse(
            "[filters.discard-cloud-service]\nremove-components = [\"removed-by-file\"]",
        )
        .unwrap();
        let hub: BTreeMap<String, Vec<String>> = [
            (
                "discardcloudservice".to_owned(),
                vec!["nginx".to_owned(), "removed-by-file".to_owned()],
            ),
            ("servicetopology".to_owned(), vec!["traefik".to_owned()]),
        ]
        .into();
        let matched = components_of_present(&hub, &["discard-cloud-service", "tagger"]);
        assert_eq!(
            matched.keys().collect::<Vec<_>>(),
            ["discard-cloud-service"]
        );
        gateway.add_components(&matched);
        let e = effective(
            "discard-cloud-service",
            &manifest,
            &file,
            &gateway,
            Limits::default(),
        )
        .unwrap();
        // The gateway's own file has the last word: what it removes stays removed.
        assert_eq!(
            e.components.iter().collect::<Vec<_>>(),
            ["kube-proxy", "nginx"]
        );
        assert!(
            !gateway.filters.contains_key("servicetopology"),
            "no such filter"
        );
    }

    #[test]
    fn disable_after_is_read_and_checked() {
        let manifest = Manifest::new("f", "1");
        let settings = |text: &str| {
            let file = FilterFile::parse(text).map_err(|e| e.to_string())?;
            effective(
                "f",
                &manifest,
                &file,
                &GatewayFile::default(),
                Limits::default(),
            )
        };
        assert_eq!(settings("").unwrap().disable_after, None);
        let set = settings("[disable-after]\nfailures = 5\nwithin-s = 60").unwrap();
        assert_eq!(
            set.disable_after,
            Some(DisableAfter {
                failures: 5,
                window: Duration::from_secs(60)
            })
        );
        for bad in [
            "[disable-after]\nfailures = 0\nwithin-s = 60",
            "[disable-after]\nfailures = 5\nwithin-s = 0",
            "[disable-after]\nfailures = 5",
            "[disable-after]\nfailures = 5\nwithin-s = 60\nthen = \"x\"",
        ] {
            assert!(settings(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn file_and_gateway_override_the_manifest() {
        let manifest = Manifest::new("f", "1")
            .components(&["kubelet", "kubectl"])
            .priority(5);
        let file = FilterFile::parse(
            r#"
            priority = -3
            add-components = ["coredns"]
            remove-components = ["kubectl"]
            on-error = "fail"
            [limits]
            memory-mib = 16
            deadline-ms = 20
            max-output-kib = 4
            [config]
            key = "v"
            list = [1, 2]
            "#,
        )
        .unwrap();
        let gateway = GatewayFile::parse(
            r#"
            disabled = ["other"]
            [filters.f]
            add-components = ["kube-proxy"]
            remove-components = ["kubelet"]
            "#,
        )
        .unwrap();
        let e = effective("f", &manifest, &file, &gateway, Limits::default()).unwrap();
        assert_eq!(e.priority, -3);
        assert_eq!(
            e.components.iter().collect::<Vec<_>>(),
            ["coredns", "kube-proxy"]
        );
        assert_eq!(e.on_error, OnError::Fail);
        assert_eq!(e.limits.memory, 16 << 20);
        assert_eq!(e.limits.deadline, Duration::from_millis(20));
        assert_eq!(e.limits.max_output, 4096);
        assert_eq!(e.config, serde_json::json!({"key": "v", "list": [1, 2]}));
        assert!(gateway.disables("other") && !gateway.disables("f"));
        assert!(
            GatewayFile::parse("disabled = [\"*\"]")
                .unwrap()
                .disables("f")
        );
    }

    #[test]
    fn defaults_and_bad_values() {
        let manifest = Manifest::new("f", "1").priority(7);
        let e = effective(
            "f",
            &manifest,
            &FilterFile::default(),
            &GatewayFile::default(),
            Limits::default(),
        )
        .unwrap();
        assert_eq!((e.priority, e.on_error), (7, OnError::Keep));
        assert_eq!(e.config, serde_json::json!({}));
        let zero = FilterFile::parse("[limits]\ndeadline-ms = 0").unwrap();
        assert!(zero.limits(Limits::default()).is_err());
        assert!(FilterFile::parse("on-error = \"explode\"").is_err());
        assert!(FilterFile::parse("unknown = 1").is_err());
        assert!(FilterFile::parse("enabled = false").unwrap().disabled());
    }

    #[test]
    fn the_command_line_disables_filters_by_yurthubs_names() {
        let mut gateway = GatewayFile::default();
        let present = ["discard-cloud-service", "service_env_updater", "nodestamp"];
        gateway.disable_also(
            &["discardcloudservice".into(), "ServiceEnvUpdater".into()],
            &present,
        );
        assert!(gateway.disables("discard-cloud-service"));
        assert!(gateway.disables("service_env_updater"));
        assert!(!gateway.disables("nodestamp"));
        gateway.disable_also(&["*".into()], &present);
        assert!(gateway.disables("nodestamp"));
    }
}
