//! Services: the one behind a slice or an Endpoints object (looked up in the gateway's view),
//! and the type of a Service.

use super::endpoints::EndpointsKind;
use crate::host;
use crate::object::Object;
use crate::types::Resource;

/// Services.
pub const SERVICES: Resource<'static> = Resource::new("", "v1", "services");

/// The label by which an EndpointSlice names its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The name of the Service an endpoint object belongs to: a slice's
/// `kubernetes.io/service-name` label, an Endpoints object's own name.
pub fn service_name(kind: EndpointsKind, object: &Object) -> Option<&str> {
    match kind {
        EndpointsKind::SliceV1 | EndpointsKind::SliceV1beta1 => object.label(SERVICE_NAME_LABEL),
        EndpointsKind::Endpoints => object.name(),
    }
    .filter(|name| !name.is_empty())
}

/// The Service an endpoint object belongs to, from the gateway's view of the cluster
/// (`get(SERVICES, namespace, name)`); `None` if unnamed or unknown.
pub fn service_of(kind: EndpointsKind, object: &Object) -> Option<Object> {
    let namespace = object.namespace()?;
    let name = service_name(kind, object)?;
    host::get(SERVICES, Some(namespace), name)
}

/// A Service's `spec.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceType {
    /// `ClusterIP`, also when the type is absent (the API's default).
    ClusterIp,
    /// `NodePort`.
    NodePort,
    /// `LoadBalancer`.
    LoadBalancer,
    /// `ExternalName`.
    ExternalName,
    /// Any other value.
    Other,
}

impl ServiceType {
    /// The type of a Service.
    pub fn of(service: &Object) -> ServiceType {
        match service.spec("type").and_then(|t| t.as_str()) {
            None | Some("ClusterIP") => ServiceType::ClusterIp,
            Some("NodePort") => ServiceType::NodePort,
            Some("LoadBalancer") => ServiceType::LoadBalancer,
            Some("ExternalName") => ServiceType::ExternalName,
            Some(_) => ServiceType::Other,
        }
    }

    /// Whether Services of this type open a port on every node (NodePort, LoadBalancer).
    pub fn opens_node_ports(self) -> bool {
        matches!(self, ServiceType::NodePort | ServiceType::LoadBalancer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::Host;

    fn object(value: Value) -> Object {
        Object::from_value(value).unwrap()
    }

    #[test]
    fn slices_name_their_service_by_label_and_endpoints_by_name() {
        let slice = object(
            json!({"metadata": {"name": "web-abcde", "namespace": "default",
                                               "labels": {SERVICE_NAME_LABEL: "web"}}}),
        );
        assert_eq!(service_name(EndpointsKind::SliceV1, &slice), Some("web"));
        assert_eq!(
            service_name(EndpointsKind::Endpoints, &slice),
            Some("web-abcde")
        );
        let unlabelled =
            object(json!({"metadata": {"name": "x", "labels": {SERVICE_NAME_LABEL: ""}}}));
        assert_eq!(service_name(EndpointsKind::SliceV1beta1, &unlabelled), None);
    }

    #[test]
    fn the_service_is_looked_up_in_the_slices_namespace() {
        let host = Host::install();
        let service =
            |namespace: &str| json!({"metadata": {"name": "web", "namespace": namespace}});
        host.add_object(SERVICES, service("default"));
        host.add_object(SERVICES, service("prod"));
        let slice = |namespace: &str, service: &str| {
            object(json!({"metadata": {"name": "s", "namespace": namespace,
                                       "labels": {SERVICE_NAME_LABEL: service}}}))
        };
        let found = service_of(EndpointsKind::SliceV1, &slice("prod", "web")).unwrap();
        assert!(found.is_named("prod", "web"));
        assert!(service_of(EndpointsKind::SliceV1, &slice("prod", "db")).is_none());
        assert!(service_of(EndpointsKind::SliceV1, &slice("staging", "web")).is_none());
        let endpoints = object(json!({"metadata": {"name": "web", "namespace": "default"}}));
        assert!(service_of(EndpointsKind::Endpoints, &endpoints).is_some());
    }

    #[test]
    fn service_types() {
        let of = |spec: Value| ServiceType::of(&object(json!({"spec": spec})));
        assert_eq!(of(json!({})), ServiceType::ClusterIp);
        assert_eq!(of(json!({"type": "ClusterIP"})), ServiceType::ClusterIp);
        assert_eq!(of(json!({"type": "NodePort"})), ServiceType::NodePort);
        assert_eq!(
            of(json!({"type": "LoadBalancer"})),
            ServiceType::LoadBalancer
        );
        assert_eq!(
            of(json!({"type": "ExternalName"})),
            ServiceType::ExternalName
        );
        assert_eq!(of(json!({"type": "Weird"})), ServiceType::Other);
        assert!(ServiceType::NodePort.opens_node_ports());
        assert!(ServiceType::LoadBalancer.opens_node_ports());
        assert!(!ServiceType::ClusterIp.opens_node_ports());
    }
}
