//! The hand-kept tables checked against Kubernetes' own definitions (the descriptor set of
//! [`super::super::described`]): every field's number, name, repetition and kind as the
//! `.proto` files give them, and every field those files hold known to the table. A new
//! release's field then fails here when the descriptors are compiled again (`protos/`),
//! not in a watch that falls back to JSON.

use prost_reflect::{Kind as Proto, MessageDescriptor};

use super::*;
use crate::stream::protobuf::described::{POOL, message_of};

/// Fields of older releases that Kubernetes 1.36 no longer has: (message, number).
const OLDER: &[(&str, u32)] = &[
    ("ObjectMeta", 15),  // clusterName, until 1.24
    ("ServiceSpec", 15), // ipFamily, 1.19's dual stack
    ("ServiceSpec", 16), // topologyKeys, until 1.21
];

/// Fields Kubernetes has that no transcoded object holds: (message, number).
const NEVER_WATCHED: &[(&str, u32)] = &[
    ("ListMeta", 5), // shardInfo: a sharded list's, never a watch's error
];

/// Every mismatch between `table` and `descriptor`, and below them, as lines.
fn mismatches(table: &Message, descriptor: &MessageDescriptor, out: &mut Vec<String>) {
    let name = descriptor.full_name();
    for field in table.fields {
        let Some(proto) = descriptor.get_field(field.tag) else {
            if !OLDER.contains(&(table.name, field.tag)) {
                out.push(format!("{name}: no field {} ({})", field.tag, field.name));
            }
            continue;
        };
        if proto.name() != field.name {
            out.push(format!(
                "{name}.{}: named {:?} in the table",
                proto.name(),
                field.name
            ));
        }
        let map = matches!(field.kind, Kind::Map);
        if proto.is_map() != map || (!map && proto.is_list() != field.repeated) {
            out.push(format!(
                "{name}.{}: repeated or a map, or not",
                proto.name()
            ));
        }
        let message = match proto.kind() {
            Proto::Message(message) => Some(message),
            _ => None,
        };
        let kind_fits = match (
            &field.kind,
            proto.kind(),
            message.as_ref().map(|m| m.name()),
        ) {
            (Kind::String, Proto::String, _) => true,
            (Kind::Int, Proto::Int32 | Proto::Int64, _) => true,
            (Kind::Bool, Proto::Bool, _) => true,
            (Kind::Map, Proto::Message(_), _) => true,
            (Kind::Time, _, Some("Time")) => true,
            (Kind::IntOrString, _, Some("IntOrString")) => true,
            (Kind::RawJson, _, Some("FieldsV1")) => true,
            (Kind::Message(inner), Proto::Message(message), Some(m)) if inner.name == m => {
                mismatches(inner, &message, out);
                true
            }
            _ => false,
        };
        if !kind_fits {
            out.push(format!(
                "{name}.{}: {:?} in the table, {:?} in Kubernetes",
                proto.name(),
                field.kind,
                proto.kind()
            ));
        }
    }
    for proto in descriptor.fields() {
        if !table.fields.iter().any(|f| f.tag == proto.number())
            && !NEVER_WATCHED.contains(&(table.name, proto.number()))
        {
            out.push(format!(
                "{name}: field {} ({}) is not in the table",
                proto.number(),
                proto.name()
            ));
        }
    }
}

#[test]
fn the_tables_are_kubernetes_own() {
    let pool = POOL.as_ref().expect("the descriptor set decodes");
    let mut out = Vec::new();
    for known in &KNOWN {
        let api_version = match known.group {
            "" => known.version.to_owned(),
            group => format!("{group}/{}", known.version),
        };
        let descriptor = message_of(&api_version, known.kind).expect("a known kind is described");
        mismatches(known.message, &descriptor, &mut out);
    }
    let status = pool
        .get_message_by_name("k8s.io.apimachinery.pkg.apis.meta.v1.Status")
        .expect("Status is described");
    mismatches(&STATUS, &status, &mut out);
    out.sort();
    out.dedup();
    assert!(
        out.is_empty(),
        "the tables differ from Kubernetes {}:\n{}",
        super::super::DESCRIBED_RELEASE,
        out.join("\n")
    );
}
