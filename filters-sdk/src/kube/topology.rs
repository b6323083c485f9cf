//! The `openyurt.io/topologyKeys` annotation: how far a Service's traffic may travel from the
//! node it starts on.

use crate::object::Object;

/// The annotation on a Service that limits which endpoints a node sees.
pub const TOPOLOGY_KEYS: &str = "openyurt.io/topologyKeys";

/// Where a Service's endpoints must be for a node to use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// On the node itself (`kubernetes.io/hostname`).
    Node,
    /// In the node's pool (`openyurt.io/nodepool`, or `kubernetes.io/zone`, which OpenYurt
    /// treats as the pool).
    Pool,
}

impl Topology {
    /// Parses the annotation's value; `None` for values OpenYurt does not know (which leave
    /// the Service's endpoints as they are).
    pub fn parse(value: &str) -> Option<Topology> {
        match value.trim() {
            "kubernetes.io/hostname" => Some(Topology::Node),
            "openyurt.io/nodepool" | "kubernetes.io/zone" => Some(Topology::Pool),
            _ => None,
        }
    }

    /// The topology a Service asks for, if it is annotated with a known one.
    pub fn of(service: &Object) -> Option<Topology> {
        Topology::parse(service.annotation(TOPOLOGY_KEYS)?)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn known_values_and_nothing_else() {
        assert_eq!(
            Topology::parse("kubernetes.io/hostname"),
            Some(Topology::Node)
        );
        assert_eq!(
            Topology::parse("openyurt.io/nodepool"),
            Some(Topology::Pool)
        );
        assert_eq!(
            Topology::parse(" kubernetes.io/zone "),
            Some(Topology::Pool)
        );
        for unknown in ["", "hostname", "topology.kubernetes.io/zone", "*"] {
            assert_eq!(Topology::parse(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn read_from_a_services_annotation() {
        let service = |annotations| {
            Object::from_value(json!({"metadata": {"name": "web", "annotations": annotations}}))
                .unwrap()
        };
        let pool = service(json!({TOPOLOGY_KEYS: "openyurt.io/nodepool"}));
        assert_eq!(Topology::of(&pool), Some(Topology::Pool));
        assert_eq!(Topology::of(&service(json!({}))), None);
    }
}
