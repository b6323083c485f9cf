"""The edgegate filter SDK for Python: write a filter as one class, export it with one call.

    from edgegate_filter import DROP, KEEP, Filter, Manifest, ResourceMatch, Verb, export_filter
    from edgegate_filter.kube import flag

    class CloudOnly(Filter):
        @classmethod
        def manifest(cls):
            return Manifest("cloudonly", "0.1.0",
                            matches=[ResourceMatch("", ["services"], [Verb.LIST, Verb.WATCH])])

        def filter(self, ctx, obj):
            return DROP if flag(obj, "example.com/cloud-only") else KEEP

    WitWorld = export_filter(CloudOnly)

Built with componentize-py against `filters-sdk/wit` (world `filter`), the module is a
component of the `edgegate:filter` world, which `edgegate filter check|test|bench` and the
gateway load as they load a Rust filter; natively the same class runs under
`testing.Harness`, a fake host.

Modules: `types` (context, manifest, decisions), `object` (`Object`), `filter` (`Filter`),
`host` (lookups, logging, counters), `kube` (annotations, the hub's address), `testing`.
"""

from . import host, kube
from ._guest import export_filter
from .filter import ConfigError, Filter
from .object import Object, ObjectError
from .types import (
    DROP,
    KEEP,
    NO_CONFIG,
    Context,
    Decision,
    Drop,
    Keep,
    Level,
    Manifest,
    Replace,
    Resource,
    ResourceMatch,
    Verb,
)

__all__ = [
    "ConfigError",
    "Context",
    "DROP",
    "Decision",
    "Drop",
    "Filter",
    "KEEP",
    "Keep",
    "Level",
    "Manifest",
    "NO_CONFIG",
    "Object",
    "ObjectError",
    "Replace",
    "Resource",
    "ResourceMatch",
    "Verb",
    "export_filter",
    "host",
    "kube",
]
