"""`servicetopology`: shows node clients only the endpoints of a Service that are near enough,
as the Service's `openyurt.io/topologyKeys` annotation asks: `kubernetes.io/hostname` keeps
the endpoints on this node; `openyurt.io/nodepool` or `kubernetes.io/zone` keeps those in this
node's pool (this node alone when it is in no pool). A Service without the annotation, or
unknown to the gateway, keeps all its endpoints. An object left with no endpoints is still
sent, so clients drop the old ones.

The Python port of `filters/servicetopology`; it takes no config.
"""

from __future__ import annotations

from typing import Optional

from edgegate_filter import KEEP, NO_CONFIG, Filter, Level, Manifest, ResourceMatch, Verb, export_filter, host
from edgegate_filter.kube import pool
from edgegate_filter.kube.endpoints import EndpointsKind
from edgegate_filter.kube.service import service_name, service_of
from edgegate_filter.kube.topology import Topology

PRIORITY = 30
"""After the filters that drop whole Services (which spares pruning what is dropped anyway)
and before those that rewrite endpoints to point at the gateway, whose endpoint has no node
and would be pruned."""


class Lookups:
    """What one call looks up in the gateway's view, each thing once: a list of a thousand
    slices asks for its Services and its pool's members once, not a thousand times."""

    def __init__(self):
        self.topologies: dict[tuple[str, str], Optional[Topology]] = {}
        self.pool_members: dict[str, Optional[set[str]]] = {}
        self.warned = False

    def topology(self, kind: EndpointsKind, obj) -> Optional[Topology]:
        """The topology the Service of `obj` asks for."""
        namespace, name = obj.namespace, service_name(kind, obj)
        if namespace is None or name is None:
            return None
        key = (namespace, name)
        if key not in self.topologies:
            service = service_of(kind, obj)
            self.topologies[key] = None if service is None else Topology.of(service)
        return self.topologies[key]

    def members(self, name: str) -> Optional[set[str]]:
        """The nodes of pool `name`, if the gateway knows any."""
        if name not in self.pool_members:
            self.pool_members[name] = pool.members(name)
        return self.pool_members[name]

    def warn_once(self, message: str) -> None:
        """Logs a warning, unless this call has logged one already."""
        if not self.warned:
            self.warned = True
            host.log(Level.WARN, message)


class ServiceTopology(Filter):
    """The filter."""

    @classmethod
    def manifest(cls):
        return Manifest(
            "servicetopology",
            "0.1.0",
            matches=[
                ResourceMatch("discovery.k8s.io", ["endpointslices"], [Verb.LIST, Verb.WATCH]),
                ResourceMatch("", ["endpoints"], [Verb.LIST, Verb.WATCH]),
            ],
            components=["kube-proxy", "coredns", "nginx-ingress-controller"],
            priority=PRIORITY,
            config_schema=NO_CONFIG,
        )

    def filter(self, ctx, obj):
        return prune(ctx, obj, Lookups())

    def filter_batch(self, ctx, objects):
        # The slices of one list share Services and the pool: look each up once.
        lookups = Lookups()
        return [prune(ctx, obj, lookups) for obj in objects]


def prune(ctx, obj, lookups: Lookups):
    """Removes the endpoints of `obj` that its Service's topology puts out of reach."""
    kind = EndpointsKind.of(ctx)
    if kind is None:
        return KEEP
    topology = lookups.topology(kind, obj)
    if topology is None:
        return KEEP
    node, node_pool = ctx.node_name, ctx.node_pool or None
    if topology is Topology.POOL and node_pool is not None:
        members = lookups.members(node_pool)
        if members is None:
            # All endpoints beat none while the gateway's view of the pool is missing.
            lookups.warn_once(f"no NodePool {node_pool} and no node labelled for it: endpoints left unfiltered")
            host.count("pool-unknown", 1)
            return KEEP
        # This node is in the pool even while the NodePool's status has not caught up.
        removed = kind.retain_by_node(obj, lambda n: n == node or n in members)
    else:
        # A node in no pool keeps to itself, as in YurtHub.
        removed = kind.retain_by_node(obj, lambda n: n == node)
    if removed:
        host.count("pruned", 1)
        if host.log_enabled(Level.DEBUG):
            host.log(Level.DEBUG, f"pruned the endpoints of {obj.namespace}/{obj.name} to {topology.name.lower()} topology")
    return KEEP


WitWorld = export_filter(ServiceTopology)
