"""`masterservice`: rewrites the `default/kubernetes` Service kubelet sees, so that the
`KUBERNETES_SERVICE_*` variables it gives pods (and the Service kube-proxy programs for them)
lead to the gateway: `spec.clusterIP` and `spec.clusterIPs` become the hub's host, and the
port named `https` its port. Every other Service passes untouched.

The Python port of `filters/masterservice`. Config (both optional):
`{"host": "169.254.2.1", "port": 10268}`.
"""

from edgegate_filter import KEEP, Filter, Manifest, ResourceMatch, Verb, export_filter, host
from edgegate_filter.kube import API_PORT_NAME, API_SERVICE_NAME, API_SERVICE_NAMESPACE, HubAddress

PRIORITY = 50
"""Rewrites run after the filters that drop or prune, on what is left."""


class MasterService(Filter):
    """The configured filter."""

    def __init__(self, hub: HubAddress):
        self.hub = hub
        self.cluster_ip = hub.host
        self.cluster_ips = [hub.host]

    @classmethod
    def manifest(cls):
        return Manifest(
            "masterservice",
            "0.1.0",
            matches=[ResourceMatch("", ["services"], [Verb.LIST, Verb.WATCH])],
            components=["kubelet"],
            priority=PRIORITY,
            config_schema=HubAddress.schema(),
        )

    @classmethod
    def from_config(cls, config):
        return cls(HubAddress.from_config(config))

    def filter(self, ctx, service):
        if not service.is_named(API_SERVICE_NAMESPACE, API_SERVICE_NAME):
            return KEEP
        service.update("spec.clusterIP", self.cluster_ip)
        service.update("spec.clusterIPs", list(self.cluster_ips))
        self.hub.set_named_port(service, "spec.ports", API_PORT_NAME)
        if service.is_edited():
            host.count("rewritten", 1)
        return KEEP


WitWorld = export_filter(MasterService)
