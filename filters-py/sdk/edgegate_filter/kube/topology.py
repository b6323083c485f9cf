"""The `openyurt.io/topologyKeys` annotation: how far a Service's traffic may travel from the
node it starts on."""

from __future__ import annotations

import enum
from typing import Optional

from ..object import Object

TOPOLOGY_KEYS = "openyurt.io/topologyKeys"
"""The annotation on a Service that limits which endpoints a node sees."""


class Topology(enum.Enum):
    """Where a Service's endpoints must be for a node to use them."""

    NODE = "node"
    """On the node itself (`kubernetes.io/hostname`)."""
    POOL = "pool"
    """In the node's pool (`openyurt.io/nodepool`, or `kubernetes.io/zone`, which OpenYurt
    treats as the pool)."""

    @classmethod
    def parse(cls, value: str) -> Optional["Topology"]:
        """Parses the annotation's value; None for values OpenYurt does not know (which leave
        the Service's endpoints as they are)."""
        return {
            "kubernetes.io/hostname": cls.NODE,
            "openyurt.io/nodepool": cls.POOL,
            "kubernetes.io/zone": cls.POOL,
        }.get(value.strip())

    @classmethod
    def of(cls, service: Object) -> Optional["Topology"]:
        """The topology a Service asks for, if it is annotated with a known one."""
        value = service.annotation(TOPOLOGY_KEYS)
        return None if value is None else cls.parse(value)
