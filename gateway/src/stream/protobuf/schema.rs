//! The messages the gateway can turn from Kubernetes' protobuf into its JSON: Services,
//! EndpointSlices (`v1` and `v1beta1`) and what they hold, and the `Status` of a watch's
//! error. Field numbers are Kubernetes' (`generated.proto` of `k8s.io/api` and
//! `k8s.io/apimachinery`), fields listed in the order of their Go structs, which is the order
//! kube-apiserver writes their JSON in; fields of older releases are kept (a 1.20 cluster's
//! `clusterName`, `topologyKeys`), each with whether Go's JSON leaves it out when zero. A
//! field not listed here makes a body untranscodable, and
//! the resource is then asked for as JSON. What the tables hold beyond the JSON rules (numbers,
//! names, kinds) is checked against the descriptor set compiled from those files
//! (`schema/tests.rs`), so a release's new field fails a test once `protos/` is run again.

/// How a field's value is written in JSON.
#[derive(Debug)]
pub(super) enum Kind {
    /// A string.
    String,
    /// An integer of any width.
    Int,
    /// A boolean.
    Bool,
    /// `map<string, string>`: an object.
    Map,
    /// `meta.v1.Time`: RFC 3339 in UTC to the second, `null` when empty.
    Time,
    /// `util.intstr.IntOrString`: a number or a string.
    IntOrString,
    /// A message whose one field holds JSON as it is (`meta.v1.FieldsV1`).
    RawJson,
    /// A message.
    Message(&'static Message),
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct Field {
    /// Its number on the wire.
    pub tag: u32,
    /// Its name in JSON.
    pub name: &'static str,
    /// How its value is written.
    pub kind: Kind,
    /// Whether it repeats (a JSON array).
    pub repeated: bool,
    /// Whether a zero value (`""`, `0`, `false`) is left out, as Go's JSON leaves out an
    /// `omitempty` field that is not a pointer. A pointer field is on the wire only when
    /// set, so it is written whatever its value (`"ready":false`).
    pub omit_zero: bool,
}

/// A message's fields.
#[derive(Debug)]
pub(super) struct Message {
    /// Its name, for errors.
    pub name: &'static str,
    /// Its fields, in the order they are written.
    pub fields: &'static [Field],
}

/// A resource whose watches are asked for in protobuf.
#[derive(Debug)]
pub(super) struct Known {
    /// Its API group, empty for the core group.
    pub group: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Its plural, as in a request's path.
    pub resource: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// Its object's message.
    pub message: &'static Message,
}

/// A field always written: a pointer, or a field without `omitempty`.
const fn one(tag: u32, name: &'static str, kind: Kind) -> Field {
    Field {
        tag,
        name,
        kind,
        repeated: false,
        omit_zero: false,
    }
}

/// An `omitempty` field that is not a pointer: left out when zero.
const fn opt(tag: u32, name: &'static str, kind: Kind) -> Field {
    Field {
        omit_zero: true,
        ..one(tag, name, kind)
    }
}

/// A repeated field (left out when empty: the wire cannot carry an empty one).
const fn many(tag: u32, name: &'static str, kind: Kind) -> Field {
    Field {
        repeated: true,
        ..one(tag, name, kind)
    }
}

use Kind::{Bool, Int, IntOrString, Map, Message as M, RawJson, String as S, Time};

/// The resources the gateway watches in protobuf.
pub(super) const KNOWN: [Known; 3] = [
    Known {
        group: "",
        version: "v1",
        resource: "services",
        kind: "Service",
        message: &SERVICE,
    },
    Known {
        group: "discovery.k8s.io",
        version: "v1",
        resource: "endpointslices",
        kind: "EndpointSlice",
        message: &ENDPOINT_SLICE_V1,
    },
    Known {
        group: "discovery.k8s.io",
        version: "v1beta1",
        resource: "endpointslices",
        kind: "EndpointSlice",
        message: &ENDPOINT_SLICE_V1BETA1,
    },
];

/// `meta.v1.Status`, the object of a watch's `ERROR` event.
pub(super) const STATUS: Message = Message {
    name: "Status",
    fields: &[
        one(1, "metadata", M(&LIST_META)),
        opt(2, "status", S),
        opt(3, "message", S),
        opt(4, "reason", S),
        one(5, "details", M(&STATUS_DETAILS)),
        opt(6, "code", Int),
    ],
};

const LIST_META: Message = Message {
    name: "ListMeta",
    fields: &[
        opt(1, "selfLink", S),
        opt(2, "resourceVersion", S),
        opt(3, "continue", S),
        one(4, "remainingItemCount", Int),
    ],
};

const STATUS_DETAILS: Message = Message {
    name: "StatusDetails",
    fields: &[
        opt(1, "name", S),
        opt(2, "group", S),
        opt(3, "kind", S),
        opt(6, "uid", S),
        many(4, "causes", M(&STATUS_CAUSE)),
        opt(5, "retryAfterSeconds", Int),
    ],
};

const STATUS_CAUSE: Message = Message {
    name: "StatusCause",
    fields: &[
        opt(1, "reason", S),
        opt(2, "message", S),
        opt(3, "field", S),
    ],
};

const OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        opt(1, "name", S),
        opt(2, "generateName", S),
        opt(3, "namespace", S),
        opt(4, "selfLink", S),
        opt(5, "uid", S),
        opt(6, "resourceVersion", S),
        opt(7, "generation", Int),
        one(8, "creationTimestamp", Time),
        one(9, "deletionTimestamp", Time),
        one(10, "deletionGracePeriodSeconds", Int),
        one(11, "labels", Map),
        one(12, "annotations", Map),
        many(13, "ownerReferences", M(&OWNER_REFERENCE)),
        many(14, "finalizers", S),
        opt(15, "clusterName", S),
        many(17, "managedFields", M(&MANAGED_FIELDS_ENTRY)),
    ],
};

const OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        one(5, "apiVersion", S),
        one(1, "kind", S),
        one(3, "name", S),
        one(4, "uid", S),
        one(6, "controller", Bool),
        one(7, "blockOwnerDeletion", Bool),
    ],
};

const MANAGED_FIELDS_ENTRY: Message = Message {
    name: "ManagedFieldsEntry",
    fields: &[
        opt(1, "manager", S),
        opt(2, "operation", S),
        opt(3, "apiVersion", S),
        one(4, "time", Time),
        opt(6, "fieldsType", S),
        one(7, "fieldsV1", RawJson),
        opt(8, "subresource", S),
    ],
};

const CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        one(1, "type", S),
        one(2, "status", S),
        opt(3, "observedGeneration", Int),
        one(4, "lastTransitionTime", Time),
        one(5, "reason", S),
        one(6, "message", S),
    ],
};

const OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        opt(1, "kind", S),
        opt(2, "namespace", S),
        opt(3, "name", S),
        opt(4, "uid", S),
        opt(5, "apiVersion", S),
        opt(6, "resourceVersion", S),
        opt(7, "fieldPath", S),
    ],
};

const SERVICE: Message = Message {
    name: "Service",
    fields: &[
        one(1, "metadata", M(&OBJECT_META)),
        one(2, "spec", M(&SERVICE_SPEC)),
        one(3, "status", M(&SERVICE_STATUS)),
    ],
};

const SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        many(1, "ports", M(&SERVICE_PORT)),
        one(2, "selector", Map),
        opt(3, "clusterIP", S),
        many(18, "clusterIPs", S),
        opt(4, "type", S),
        many(5, "externalIPs", S),
        opt(7, "sessionAffinity", S),
        opt(8, "loadBalancerIP", S),
        many(9, "loadBalancerSourceRanges", S),
        opt(10, "externalName", S),
        opt(11, "externalTrafficPolicy", S),
        opt(12, "healthCheckNodePort", Int),
        opt(13, "publishNotReadyAddresses", Bool),
        one(14, "sessionAffinityConfig", M(&SESSION_AFFINITY_CONFIG)),
        one(15, "ipFamily", S),
        many(16, "topologyKeys", S),
        many(19, "ipFamilies", S),
        one(17, "ipFamilyPolicy", S),
        one(20, "allocateLoadBalancerNodePorts", Bool),
        one(21, "loadBalancerClass", S),
        one(22, "internalTrafficPolicy", S),
        one(23, "trafficDistribution", S),
    ],
};

const SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        opt(1, "name", S),
        opt(2, "protocol", S),
        one(6, "appProtocol", S),
        one(3, "port", Int),
        one(4, "targetPort", IntOrString),
        opt(5, "nodePort", Int),
    ],
};

const SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[one(1, "clientIP", M(&CLIENT_IP_CONFIG))],
};

const CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[one(1, "timeoutSeconds", Int)],
};

const SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        one(1, "loadBalancer", M(&LOAD_BALANCER_STATUS)),
        many(2, "conditions", M(&CONDITION)),
    ],
};

const LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[many(1, "ingress", M(&LOAD_BALANCER_INGRESS))],
};

const LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[
        opt(1, "ip", S),
        opt(2, "hostname", S),
        one(3, "ipMode", S),
        many(4, "ports", M(&PORT_STATUS)),
    ],
};

const PORT_STATUS: Message = Message {
    name: "PortStatus",
    fields: &[
        one(1, "port", Int),
        one(2, "protocol", S),
        one(3, "error", S),
    ],
};

const ENDPOINT_SLICE_V1: Message = Message {
    name: "EndpointSlice",
    fields: &[
        one(1, "metadata", M(&OBJECT_META)),
        one(4, "addressType", S),
        many(2, "endpoints", M(&ENDPOINT_V1)),
        many(3, "ports", M(&ENDPOINT_PORT)),
    ],
};

const ENDPOINT_V1: Message = Message {
    name: "Endpoint",
    fields: &[
        many(1, "addresses", S),
        one(2, "conditions", M(&ENDPOINT_CONDITIONS)),
        one(3, "hostname", S),
        one(4, "targetRef", M(&OBJECT_REFERENCE)),
        one(5, "deprecatedTopology", Map),
        one(6, "nodeName", S),
        one(7, "zone", S),
        one(8, "hints", M(&ENDPOINT_HINTS)),
    ],
};

const ENDPOINT_SLICE_V1BETA1: Message = Message {
    name: "EndpointSlice",
    fields: &[
        one(1, "metadata", M(&OBJECT_META)),
        one(4, "addressType", S),
        many(2, "endpoints", M(&ENDPOINT_V1BETA1)),
        many(3, "ports", M(&ENDPOINT_PORT)),
    ],
};

const ENDPOINT_V1BETA1: Message = Message {
    name: "Endpoint",
    fields: &[
        many(1, "addresses", S),
        one(2, "conditions", M(&ENDPOINT_CONDITIONS)),
        one(3, "hostname", S),
        one(4, "targetRef", M(&OBJECT_REFERENCE)),
        one(5, "topology", Map),
        one(6, "nodeName", S),
        one(7, "hints", M(&ENDPOINT_HINTS)),
    ],
};

const ENDPOINT_CONDITIONS: Message = Message {
    name: "EndpointConditions",
    fields: &[
        one(1, "ready", Bool),
        one(2, "serving", Bool),
        one(3, "terminating", Bool),
    ],
};

const ENDPOINT_HINTS: Message = Message {
    name: "EndpointHints",
    fields: &[
        many(1, "forZones", M(&FOR_ZONE)),
        many(2, "forNodes", M(&FOR_NODE)),
    ],
};

const FOR_ZONE: Message = Message {
    name: "ForZone",
    fields: &[one(1, "name", S)],
};

const FOR_NODE: Message = Message {
    name: "ForNode",
    fields: &[one(1, "name", S)],
};

const ENDPOINT_PORT: Message = Message {
    name: "EndpointPort",
    fields: &[
        one(1, "name", S),
        one(2, "protocol", S),
        one(3, "port", Int),
        one(4, "appProtocol", S),
    ],
};

#[cfg(test)]
mod tests;
