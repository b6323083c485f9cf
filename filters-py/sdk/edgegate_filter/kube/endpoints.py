"""The endpoints of a Service in its three shapes (EndpointSlice v1 and v1beta1, core v1
Endpoints), each endpoint with the node it runs on, pruned by that node.

The shape comes from the request, not from the object: the items of a JSON list carry no
`apiVersion` or `kind`."""

from __future__ import annotations

import enum
from typing import Any, Callable, Optional

from ..object import Object
from ..types import Context

HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The label (and v1beta1 topology key) that names a node."""

_ADDRESS_LISTS = ("addresses", "notReadyAddresses")
"""Address lists of an Endpoints subset."""


def _string(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


class EndpointsKind(enum.Enum):
    """Which shape of endpoint object a request serves."""

    SLICE_V1 = "discovery.k8s.io/v1"
    """The node is `endpoints[].nodeName`, or else
    `endpoints[].deprecatedTopology["kubernetes.io/hostname"]`, where Kubernetes 1.21's
    conversion left it for slices written through v1beta1 (kube-proxy reads it so too)."""
    SLICE_V1BETA1 = "discovery.k8s.io/v1beta1"
    """The node is `endpoints[].topology["kubernetes.io/hostname"]`, or else
    `endpoints[].nodeName`."""
    ENDPOINTS = "v1"
    """Core Endpoints: the node is `subsets[].addresses[].nodeName` (and the same in
    `notReadyAddresses`)."""

    @classmethod
    def of(cls, ctx: Context) -> Optional["EndpointsKind"]:
        """The shape a request's objects have, from its group, version and resource; None for
        anything else (other resources, other versions)."""
        return {
            ("discovery.k8s.io", "v1", "endpointslices"): cls.SLICE_V1,
            ("discovery.k8s.io", "v1beta1", "endpointslices"): cls.SLICE_V1BETA1,
            ("", "v1", "endpoints"): cls.ENDPOINTS,
        }.get((ctx.group, ctx.version, ctx.resource))

    @property
    def is_slice(self) -> bool:
        """Whether this is an EndpointSlice shape."""
        return self is not EndpointsKind.ENDPOINTS

    def node_of(self, endpoint: Any) -> Optional[str]:
        """The node an endpoint (a slice's endpoint or an Endpoints address) runs on."""
        if not isinstance(endpoint, dict):
            return None
        node_name = _string(endpoint.get("nodeName"))
        if self is EndpointsKind.ENDPOINTS:
            return node_name
        field = "topology" if self is EndpointsKind.SLICE_V1BETA1 else "deprecatedTopology"
        topology = endpoint.get(field)
        hostname = _string(topology.get(HOSTNAME_LABEL)) if isinstance(topology, dict) else None
        # v1beta1's topology first; v1's deprecated topology only when nodeName is absent.
        if self is EndpointsKind.SLICE_V1BETA1:
            return hostname if hostname is not None else node_name
        return node_name if node_name is not None else hostname

    def retain_by_node(self, obj: Object, keep: Callable[[str], bool]) -> bool:
        """Keeps only the endpoints whose node `keep` accepts; endpoints with no node are
        removed too, as they cannot be placed. An Endpoints subset left with no address at
        all is removed; a slice left with no endpoint keeps an empty list (the object itself
        stays, so that clients learn its endpoints are gone). Returns whether anything was
        removed."""

        def accept(endpoint: Any) -> bool:
            node = self.node_of(endpoint)
            return node is not None and keep(node)

        if self.is_slice:
            return obj.retain_items("endpoints", accept)
        subsets = obj.get("subsets")
        if not isinstance(subsets, list):
            return False
        pruned = [_pruned(subset, accept) for subset in subsets]
        kept = [subset for subset in pruned if _has_addresses(subset)]
        if all(a is b for a, b in zip(pruned, subsets)) and len(kept) == len(subsets):
            return False
        obj.set("subsets", kept)
        return True


def _pruned(subset: Any, accept: Callable[[Any], bool]) -> Any:
    """A subset with both address lists pruned, a list that becomes empty removed (the API
    omits empty lists); the subset itself when nothing is removed."""
    if not isinstance(subset, dict):
        return subset
    changed = dict(subset)
    for key in _ADDRESS_LISTS:
        addresses = subset.get(key)
        if not isinstance(addresses, list):
            continue
        kept = [address for address in addresses if accept(address)]
        if len(kept) == len(addresses):
            continue
        if kept:
            changed[key] = kept
        else:
            del changed[key]
    return subset if changed == subset else changed


def _has_addresses(subset: Any) -> bool:
    return isinstance(subset, dict) and any(
        isinstance(subset.get(key), list) and subset[key] for key in _ADDRESS_LISTS
    )
