//! The stand-in's JSON: a `discovery.k8s.io/v1beta1` EndpointSlice, list or watch event of
//! kube-apiserver 1.20 made the `v1` one a 1.21+ apiserver serves. kube-apiserver converts
//! v1beta1 → internal → v1 (`pkg/apis/discovery/v1beta1/conversion.go`); per endpoint:
//! - `topology` is copied into `deprecatedTopology`;
//! - `topology.kubernetes.io/zone` leaves it for `zone`;
//! - `kubernetes.io/hostname` leaves it for `nodeName` when the endpoint has none, and is
//!   dropped when it names the endpoint's `nodeName`;
//! - a `deprecatedTopology` left empty is left out.
//!
//! Every other byte stays as kube-apiserver wrote it: members keep their order, only the
//! endpoints' topology fields are written anew, in the order of the `v1` Go struct.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The group and version the stand-in reads from the real apiserver.
pub(crate) const V1BETA1: &str = "discovery.k8s.io/v1beta1";
/// The group and version it serves.
pub(crate) const V1: &str = "discovery.k8s.io/v1";

/// The well-known labels the conversion moves out of `topology` (`k8s.io/api/core/v1`).
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";
/// See [`HOSTNAME`].
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";

/// A JSON object's members in the order they were written, each value as its raw text.
pub(crate) struct Members<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Of<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Of<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Of(std::marker::PhantomData))
    }
}

impl<'a> Members<'a> {
    /// The members of the object `json`.
    pub(crate) fn of(json: &'a [u8]) -> Result<Members<'a>> {
        serde_json::from_slice(json).context("not a JSON object")
    }

    /// The raw value of member `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }

    /// Member `name` as a string, if it is one.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.get(name)?.get()).ok()
    }
}

/// Writes `{"k":v,…}` of members given as (name, raw JSON text).
pub(crate) fn write_object<'s>(
    out: &mut Vec<u8>,
    members: impl IntoIterator<Item = (&'s str, std::borrow::Cow<'s, str>)>,
) {
    out.push(b'{');
    for (i, (name, raw)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // A string always serializes.
        let _ = serde_json::to_writer(&mut *out, name);
        out.push(b':');
        out.extend_from_slice(raw.as_bytes());
    }
    out.push(b'}');
}

/// A JSON string's text.
pub(crate) fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The `v1` of an endpoint's v1beta1 `topology` and `nodeName`: (`deprecatedTopology`,
/// `nodeName`, `zone`), as kube-apiserver converts them.
pub(crate) fn topology_to_v1(
    topology: Option<BTreeMap<String, String>>,
    mut node_name: Option<String>,
) -> (
    Option<BTreeMap<String, String>>,
    Option<String>,
    Option<String>,
) {
    let Some(mut deprecated) = topology else {
        return (None, node_name, None);
    };
    let zone = deprecated.remove(ZONE);
    if let Some(host) = deprecated.get(HOSTNAME).cloned() {
        match &node_name {
            None => {
                node_name = Some(host);
                deprecated.remove(HOSTNAME);
            }
            Some(node) if *node == host => {
                deprecated.remove(HOSTNAME);
            }
            Some(_) => {}
        }
    }
    (
        (!deprecated.is_empty()).then_some(deprecated),
        node_name,
        zone,
    )
}

/// The `v1` of a v1beta1 object of the discovery group: an EndpointSlice or a list of
/// them; anything else (a `Status`, a `Table`) is returned as it is.
pub fn object_to_v1(json: &[u8]) -> Result<Vec<u8>> {
    let members = Members::of(json)?;
    if members.string("apiVersion").as_deref() != Some(V1BETA1) {
        return Ok(json.to_vec());
    }
    let mut out = match members.string("kind").as_deref() {
        Some("EndpointSlice") => slice(&members)?,
        Some("EndpointSliceList") => list(&members)?,
        _ => return Ok(json.to_vec()),
    };
    if json.last() == Some(&b'\n') {
        out.push(b'\n');
    }
    Ok(out)
}

/// The `v1` of one line of a JSON watch (`{"type":…,"object":…}`), its newline kept.
pub fn event_to_v1(line: &[u8]) -> Result<Vec<u8>> {
    let members = Members::of(line)?;
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "object" => String::from_utf8(object_to_v1(raw.get().as_bytes())?)?,
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::with_capacity(line.len());
    write_object(&mut out, converted);
    if line.last() == Some(&b'\n') {
        out.push(b'\n');
    }
    Ok(out)
}

fn list(members: &Members<'_>) -> Result<Vec<u8>> {
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "apiVersion" => quoted(V1),
            "items" => match serde_json::from_str::<Option<Vec<&RawValue>>>(raw.get())? {
                Some(items) => {
                    let items: Vec<String> = items
                        .iter()
                        .map(|item| slice(&Members::of(item.get().as_bytes())?))
                        .map(|slice| Ok(String::from_utf8(slice?)?))
                        .collect::<Result<_>>()?;
                    format!("[{}]", items.join(","))
                }
                None => "null".to_owned(),
            },
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(out)
}

fn slice(members: &Members<'_>) -> Result<Vec<u8>> {
    let mut converted = Vec::new();
    for (name, raw) in &members.0 {
        let text = match name.as_str() {
            "apiVersion" => quoted(V1),
            "endpoints" => match serde_json::from_str::<Option<Vec<&RawValue>>>(raw.get())? {
                Some(endpoints) => {
                    let endpoints: Vec<String> = endpoints
                        .iter()
                        .map(|e| endpoint(e))
                        .collect::<Result<_>>()?;
                    format!("[{}]", endpoints.join(","))
                }
                None => "null".to_owned(),
            },
            _ => raw.get().to_owned(),
        };
        converted.push((name.as_str(), text.into()));
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(out)
}

/// The members of `v1`'s `Endpoint` before the converted ones, in its Go struct's order.
const BEFORE: [&str; 4] = ["addresses", "conditions", "hostname", "targetRef"];

fn endpoint(raw: &RawValue) -> Result<String> {
    let members = Members::of(raw.get().as_bytes())?;
    let topology: Option<BTreeMap<String, String>> = match members.get("topology") {
        Some(raw) => serde_json::from_str(raw.get()).context("an endpoint's topology")?,
        None => None,
    };
    let node_name = match members.get("nodeName") {
        Some(raw) => serde_json::from_str(raw.get())?,
        None => None,
    };
    let (deprecated, node_name, zone) = topology_to_v1(topology, node_name);
    let mut converted: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
    for name in BEFORE {
        converted.extend(members.get(name).map(|raw| (name, raw.get().into())));
    }
    if let Some(deprecated) = deprecated {
        converted.push((
            "deprecatedTopology",
            serde_json::to_string(&deprecated)?.into(),
        ));
    }
    converted.extend(node_name.map(|n| ("nodeName", quoted(&n).into())));
    converted.extend(zone.map(|z| ("zone", quoted(&z).into())));
    let moved = ["topology", "nodeName"];
    for (name, raw) in &members.0 {
        if !BEFORE.contains(&name.as_str()) && !moved.contains(&name.as_str()) {
            converted.push((name.as_str(), raw.get().into()));
        }
    }
    let mut out = Vec::new();
    write_object(&mut out, converted);
    Ok(String::from_utf8(out)?)
}

/// A JSON watch made `v1` line by line as its bytes arrive.
#[derive(Default)]
pub struct WatchLines {
    pending: bytes::BytesMut,
}

impl WatchLines {
    /// Bytes of the watch as they arrived.
    pub fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// The next whole line, made `v1`, if one is pending.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(end) = self.pending.iter().position(|b| *b == b'\n') else {
            return Ok(None);
        };
        let line = self.pending.split_to(end + 1);
        event_to_v1(&line).map(Some)
    }

    /// The last event, if the watch ended without a newline after it.
    pub fn finish(&mut self) -> Result<Option<Vec<u8>>> {
        if self.pending.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let line = self.pending.split();
        event_to_v1(&line).map(Some)
    }
}

/// [`object_to_v1`] of a parsed object (its members then in serde_json's order): what a
/// v1beta1 EndpointSlice read through the v1 path holds.
pub fn value_to_v1(object: &serde_json::Value) -> Result<serde_json::Value> {
    Ok(serde_json::from_slice(&object_to_v1(
        &serde_json::to_vec(object)?,
    )?)?)
}
