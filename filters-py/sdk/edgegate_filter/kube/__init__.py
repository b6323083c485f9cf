"""Kubernetes and OpenYurt knowledge filters share: annotation values, the hub's address, the
resources lookups name."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Iterator, Union

from ..filter import ConfigError
from ..object import Object
from ..types import Resource

SERVICES = Resource("", "v1", "services")
"""Services."""
NODES = Resource("", "v1", "nodes")
"""Nodes."""
ENDPOINTS = Resource("", "v1", "endpoints")
"""Endpoints."""
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices")
"""EndpointSlices."""

DEFAULT_HOST = "169.254.2.1"
"""YurtHub's default: the address of the dummy interface it creates on every edge node."""
DEFAULT_PORT = 10268
"""YurtHub's default: its HTTPS proxy port, the one in-cluster clients can use."""
API_SERVICE_NAMESPACE = "default"
"""Namespace of the Service through which pods reach the cluster's API."""
API_SERVICE_NAME = "kubernetes"
"""Name of that Service."""
API_PORT_NAME = "https"
"""Name of its port that carries the API."""


def flag(obj: Object, key: str) -> bool:
    """Whether the annotation `key` is exactly `"true"`, the one spelling OpenYurt honours."""
    return obj.annotation(key) == "true"


def comma_list(value: str) -> Iterator[str]:
    """The items of a comma-separated value (`foo, -bar,*`), trimmed, empty items left out."""
    return (item for item in (part.strip() for part in value.split(",")) if item)


_LABEL_INNER = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def is_label_value(value: str) -> bool:
    """Whether `value` is a valid non-empty label value (at most 63 characters:
    alphanumerics, with `-`, `_` or `.` inside), and so safe to put into a label selector."""
    return (
        0 < len(value) <= 63
        and value[0].isascii()
        and value[0].isalnum()
        and value[-1].isascii()
        and value[-1].isalnum()
        and all(c in _LABEL_INNER for c in value)
    )


IP = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


@dataclass(frozen=True)
class HubAddress:
    """The gateway's address as node clients should use it. As a filter's config it reads
    from `{"host": "<IP>", "port": <1..65535>}`, both optional (`HubAddress.schema()`)."""

    ip: IP = ipaddress.IPv4Address(DEFAULT_HOST)
    """The IP clients connect to."""
    port: int = DEFAULT_PORT
    """The port clients connect to."""

    @staticmethod
    def schema() -> dict:
        """The JSON Schema of the config, the same as the Rust SDK's."""
        return {
            "type": "object",
            "properties": {
                "host": {
                    "type": "string",
                    "minLength": 1,
                    "default": DEFAULT_HOST,
                    "description": "IP address at which node clients reach the gateway",
                },
                "port": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 65535,
                    "default": DEFAULT_PORT,
                    "description": "port at which node clients reach the gateway (HTTPS)",
                },
            },
            "additionalProperties": False,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "HubAddress":
        """Reads a config of the shape `schema()` describes; raises `ConfigError`."""
        unknown = sorted(set(config) - {"host", "port"})
        if unknown:
            raise ConfigError(f"bad host/port config: unknown field `{unknown[0]}`")
        host = config.get("host", DEFAULT_HOST)
        port = config.get("port", DEFAULT_PORT)
        if not isinstance(host, str):
            raise ConfigError("bad host/port config: host is not a string")
        if type(port) is not int or not 0 <= port <= 65535:
            raise ConfigError("bad host/port config: port is not an integer of 0 to 65535")
        if port == 0:
            raise ConfigError("port must be between 1 and 65535")
        # A zone (`fe80::1%eth0`) is no address to put into an object.
        try:
            ip = ipaddress.ip_address(host) if "%" not in host else None
        except ValueError:
            ip = None
        if ip is None:
            raise ConfigError(f"host {json.dumps(host)} is not an IP address")
        return cls(ip, port)

    @property
    def host(self) -> str:
        """The IP as text, as it goes into objects."""
        if isinstance(self.ip, ipaddress.IPv6Address) and self.ip.ipv4_mapped is not None:
            return f"::ffff:{self.ip.ipv4_mapped}"
        return str(self.ip)

    @property
    def address_type(self) -> str:
        """The `addressType` of an EndpointSlice that holds this address."""
        return "IPv4" if self.ip.version == 4 else "IPv6"

    def set_named_port(self, obj: Object, ports: str, name: str) -> bool:
        """Sets the `port` of the port named `name` in the array at path `ports` to the hub's
        port. Returns whether the object changed; an array without such a port is left
        alone."""
        index = obj.position(ports, lambda port: isinstance(port, dict) and port.get("name") == name)
        if index is None:
            return False
        return obj.update(f"{ports}.{index}.port", self.port)
