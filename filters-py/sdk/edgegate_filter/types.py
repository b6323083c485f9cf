"""The request context, the manifest and the decisions, as plain Python types.

They mirror the `edgegate:filter` WIT world (`filters-sdk/wit/filter.wit`) and the Rust SDK's
`types` module; the guest side converts them to and from the generated bindings.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union


class Verb(enum.Enum):
    """The Kubernetes verb of the request being served, valued as Kubernetes spells it.

    The members are in the WIT world's order.
    """

    GET = "get"
    LIST = "list"
    WATCH = "watch"
    CREATE = "create"
    UPDATE = "update"
    PATCH = "patch"
    DELETE = "delete"
    DELETE_COLLECTION = "deletecollection"


class Level(enum.IntEnum):
    """Severity of a log line, lowest first (the WIT world's order)."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


@dataclass(frozen=True)
class Resource:
    """A Kubernetes resource by API group (empty for the core group), version and plural,
    lowercase name: what a lookup (`host.get`, `host.list`) names."""

    group: str
    version: str
    resource: str


@dataclass
class Context:
    """The request an object belongs to."""

    component: str
    """The sending component: the User-Agent up to its first `/`, lowercased (`kube-proxy`)."""
    verb: Verb
    group: str = ""
    """API group; empty for the core group."""
    version: str = "v1"
    resource: str = ""
    """Resource, plural and lowercase."""
    namespace: Optional[str] = None
    """Namespace of the request; None for cluster-wide requests."""
    node_name: str = ""
    """Name of the node the gateway runs on."""
    node_pool: Optional[str] = None
    """Node pool of that node, if known."""

    @classmethod
    def of(cls, component: str, verb: Verb, resource: Resource, **rest: Any) -> "Context":
        """A context for a request of `component` with `verb` on `resource`; the other
        fields (`namespace`, `node_name`, `node_pool`) by keyword."""
        return cls(component, verb, resource.group, resource.version, resource.resource, **rest)


@dataclass
class ResourceMatch:
    """A group of resources and verbs a filter handles; versions are not distinguished."""

    group: str
    """API group; empty for the core group."""
    resources: list[str]
    """Resources, plural and lowercase."""
    verbs: list[Verb]


NO_CONFIG: dict = {"type": "object", "additionalProperties": False}
"""The config schema of a filter that takes no config: the gateway refuses any key at load,
so a misplaced setting is reported instead of silently ignored."""


@dataclass
class Manifest:
    """What a filter says about itself; read once when it is loaded."""

    name: str
    """Unique name; the gateway loads the filter from `NAME.wasm`."""
    version: str
    """The filter's own version."""
    matches: list[ResourceMatch] = field(default_factory=list)
    """Resources and verbs it handles."""
    components: list[str] = field(default_factory=list)
    """Components it applies to by default (the gateway config may add or remove some)."""
    priority: int = 0
    """Order in the chain: lower runs first; ties are broken by name."""
    config_schema: Optional[dict] = None
    """JSON Schema (draft 2020-12) of the config, if the filter takes one (`NO_CONFIG` for
    none at all)."""

    def schema_text(self) -> Optional[str]:
        """The config schema as the JSON text the WIT world carries."""
        if self.config_schema is None:
            return None
        return json.dumps(self.config_schema, separators=(",", ":"))


@dataclass(frozen=True)
class Keep:
    """Pass the object on as the filter left it: its original bytes when it was not edited
    (nothing is re-encoded), else with its edits (see `Object.is_edited`)."""


@dataclass(frozen=True)
class Drop:
    """Leave the object out (in a watch the gateway sends DELETED if the client had seen
    it)."""


@dataclass(frozen=True)
class Replace:
    """Pass on this JSON instead: an object with the `metadata.name`, `namespace` and
    `resourceVersion` of the object it replaces, or the gateway refuses it. `data` is the
    JSON's bytes; `Replace.of(value)` encodes a value."""

    data: bytes

    @classmethod
    def of(cls, value: Any) -> "Replace":
        """A replacement by the JSON encoding of `value`."""
        return cls(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    def json(self) -> Any:
        """The replacement parsed as JSON."""
        return json.loads(self.data)


Decision = Union[Keep, Drop, Replace]
"""What a filter decides about one object."""

KEEP = Keep()
"""The `Keep` decision."""
DROP = Drop()
"""The `Drop` decision."""
