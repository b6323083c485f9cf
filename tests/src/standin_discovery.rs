//! The stand-in's discovery: kube-apiserver 1.20's own documents with `discovery.k8s.io/v1`
//! added as a 1.21 apiserver advertises it, the preferred version of its group, serving the
//! same resources as `v1beta1`.

use anyhow::{Result, bail};
use serde_json::value::RawValue;

use crate::standin_json::{Members, V1, V1BETA1, quoted, write_object};

/// The group whose `v1` the stand-in serves.
pub(crate) const GROUP: &str = "discovery.k8s.io";

/// Which discovery document a path asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Document {
    /// `/apis`: every group (an `APIGroupList`).
    Groups,
    /// `/apis/discovery.k8s.io`: the group (an `APIGroup`).
    Group,
    /// `/apis/discovery.k8s.io/v1`: its resources (an `APIResourceList`).
    Resources,
}

impl Document {
    /// The document `path` asks for, if it is one the stand-in rewrites.
    pub(crate) fn of(path: &str) -> Option<Document> {
        match path.trim_end_matches('/') {
            "/apis" => Some(Document::Groups),
            "/apis/discovery.k8s.io" => Some(Document::Group),
            "/apis/discovery.k8s.io/v1" => Some(Document::Resources),
            _ => None,
        }
    }

    /// The real apiserver's path the document is made from.
    pub(crate) fn source(self) -> &'static str {
        match self {
            Document::Groups => "/apis",
            Document::Group => "/apis/discovery.k8s.io",
            Document::Resources => "/apis/discovery.k8s.io/v1beta1",
        }
    }

    /// The document made from the real apiserver's `json`.
    pub(crate) fn rewrite(self, json: &[u8]) -> Result<Vec<u8>> {
        let mut out = match self {
            Document::Groups => groups(json)?,
            Document::Group => group(json)?,
            Document::Resources => resources(json)?,
        };
        out.push(b'\n');
        Ok(out)
    }
}

/// `{"groupVersion":"discovery.k8s.io/v1","version":"v1"}`.
fn v1_version() -> String {
    format!(r#"{{"groupVersion":{},"version":"v1"}}"#, quoted(V1))
}

fn groups(json: &[u8]) -> Result<Vec<u8>> {
    let members = Members::of(json)?;
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "groups" => {
                let groups: Vec<&RawValue> = serde_json::from_str(raw.get())?;
                let groups: Vec<String> = groups
                    .iter()
                    .map(|g| {
                        let members = Members::of(g.get().as_bytes())?;
                        Ok(match members.string("name").as_deref() {
                            Some(GROUP) => String::from_utf8(group(g.get().as_bytes())?)?,
                            _ => g.get().to_owned(),
                        })
                    })
                    .collect::<Result<_>>()?;
                format!("[{}]", groups.join(","))
            }
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(out)
}

fn group(json: &[u8]) -> Result<Vec<u8>> {
    let members = Members::of(json)?;
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "versions" => {
                let versions: Vec<&RawValue> = serde_json::from_str(raw.get())?;
                let mut texts = vec![v1_version()];
                for version in versions {
                    let members = Members::of(version.get().as_bytes())?;
                    if members.string("groupVersion").as_deref() != Some(V1) {
                        texts.push(version.get().to_owned());
                    }
                }
                format!("[{}]", texts.join(","))
            }
            "preferredVersion" => v1_version(),
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(out)
}

fn resources(json: &[u8]) -> Result<Vec<u8>> {
    let members = Members::of(json)?;
    if members.string("groupVersion").as_deref() != Some(V1BETA1) {
        bail!("not the resources of {V1BETA1}");
    }
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "groupVersion" => quoted(V1),
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(out)
}
