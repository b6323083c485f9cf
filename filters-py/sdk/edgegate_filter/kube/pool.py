"""The member nodes of a node pool, from the gateway's view of the cluster."""

from __future__ import annotations

from typing import Optional

from .. import host
from ..types import Resource
from . import NODES, is_label_value

NODE_POOL_LABEL = "apps.openyurt.io/nodepool"
"""The label OpenYurt puts on a node to place it in a pool."""
NODE_POOLS = Resource("apps.openyurt.io", "v1beta1", "nodepools")
"""NodePools, in the version looked up."""


def members(pool: str) -> Optional[set[str]]:
    """The nodes of `pool`: the `status.nodes` of the NodePool `pool`, or, when that names
    none, the nodes labelled `apps.openyurt.io/nodepool=<pool>`. None when neither knows a
    member: the gateway has not seen the pool, which is not the same as an empty one."""
    nodepool = host.get(NODE_POOLS, None, pool)
    listed = nodepool.status("nodes") if nodepool is not None else None
    if isinstance(listed, list):
        from_pool = {node for node in listed if isinstance(node, str)}
        if from_pool:
            return from_pool
    # A name that is not a label value would make the selector fail to parse (a trap).
    if not is_label_value(pool):
        return None
    labelled = {
        node.name
        for node in host.list(NODES, None, f"{NODE_POOL_LABEL}={pool}")
        if node.name is not None
    }
    return labelled or None
