"""Services: the one behind a slice or an Endpoints object, looked up in the gateway's view."""

from __future__ import annotations

from typing import Optional

from .. import host
from ..object import Object
from . import SERVICES
from .endpoints import EndpointsKind

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label by which an EndpointSlice names its Service."""


def service_name(kind: EndpointsKind, obj: Object) -> Optional[str]:
    """The name of the Service an endpoint object belongs to: a slice's
    `kubernetes.io/service-name` label, an Endpoints object's own name."""
    name = obj.label(SERVICE_NAME_LABEL) if kind.is_slice else obj.name
    return name or None


def service_of(kind: EndpointsKind, obj: Object) -> Optional[Object]:
    """The Service an endpoint object belongs to, from the gateway's view of the cluster;
    None if unnamed or unknown."""
    namespace = obj.namespace
    name = service_name(kind, obj)
    if namespace is None or name is None:
        return None
    return host.get(SERVICES, namespace, name)
