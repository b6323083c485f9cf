//! The node's report of its declared filters, for the operator to read from the cloud:
//! annotation `edgegate.io/filters` of its own Node, written with the gateway's identity
//! (NodeRestriction lets a node annotate itself), as JSON by filter name.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;

/// The annotation's key.
pub(crate) const ANNOTATION: &str = "edgegate.io/filters";

/// Longest reason kept (a Node's annotations share 256 KiB).
const MAX_REASON_CHARS: usize = 400;

/// One declared filter on this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct FilterReport {
    /// The image declared for this node (none where its key could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) image: Option<String>,
    /// `loaded`, `disabled`, `turned-off`, `overridden` (the node's filter directory has
    /// one of that name), `pulling` (not yet pulled), or `failed`.
    pub(crate) status: String,
    /// Why, when it is not loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The image running instead, when the declared one is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) running: Option<String>,
}

impl FilterReport {
    /// A report with `reason` shortened to fit.
    pub(crate) fn new(
        image: Option<String>,
        status: &str,
        reason: Option<String>,
        running: Option<String>,
    ) -> FilterReport {
        let reason = reason.map(|r| {
            if r.chars().count() > MAX_REASON_CHARS {
                let mut short: String = r.chars().take(MAX_REASON_CHARS).collect();
                short.push('…');
                short
            } else {
                r
            }
        });
        FilterReport {
            image,
            status: status.to_owned(),
            reason,
            running,
        }
    }
}

/// The whole report, by filter name.
pub(crate) type Report = BTreeMap<String, FilterReport>;

/// Writes `report` on Node `node` through `client`.
pub(crate) async fn publish(
    client: &kube::Client,
    node: &str,
    report: &Report,
) -> Result<(), kube::Error> {
    let text = serde_json::to_string(report).unwrap_or_default();
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: text}}});
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_as_json_by_filter_and_long_reasons_are_cut() {
        let mut report = Report::new();
        report.insert(
            "ms".into(),
            FilterReport::new(Some("r/ms@sha256:a".into()), "loaded", None, None),
        );
        let long = "x".repeat(1000);
        report.insert(
            "st".into(),
            FilterReport::new(
                Some("r/st@sha256:b".into()),
                "failed",
                Some(long),
                Some("r/st@sha256:c".into()),
            ),
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["ms"],
            serde_json::json!({"image": "r/ms@sha256:a", "status": "loaded"})
        );
        assert_eq!(json["st"]["running"], "r/st@sha256:c");
        assert_eq!(
            json["st"]["reason"].as_str().unwrap().chars().count(),
            MAX_REASON_CHARS + 1
        );
    }
}
