"""The native test harness: runs a filter through the same path as its component, with a fake
host that serves lookups from the objects a test adds and keeps its counters and log lines.

    harness = Harness(MyFilter, {})
    assert harness.filter(ctx, {"metadata": {"name": "a"}}) == KEEP
"""

from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import contextmanager
from typing import Iterator, Optional, Union

from . import host
from ._adapter import Runner
from .filter import Filter
from .object import encode
from .types import Context, Decision, Level, Resource


class Harness:
    """A filter configured as the gateway would configure it, with a fake host."""

    def __init__(self, cls: type[Filter], config: Optional[dict] = None):
        """Configures `cls` with `config` (`{}` when None); raises `ValueError` with the
        message the gateway would log when the filter refuses it."""
        self.counters: Counter[str] = Counter()
        """The counters the filter added to."""
        self.logs: list[tuple[Level, str]] = []
        """The lines the filter logged."""
        self.log_level = Level.DEBUG
        """The lowest level `host.log_enabled` answers True for."""
        self._objects: dict[Resource, list[dict]] = {}
        self._runner = Runner(cls)
        with self._installed():
            error = self._runner.configure(json.dumps(config or {}))
        if error is not None:
            raise ValueError(error)

    def add_object(self, resource: Resource, obj: dict) -> None:
        """Makes `obj` known to lookups of `resource`."""
        self._objects.setdefault(resource, []).append(obj)

    def filter(self, ctx: Context, obj: Union[bytes, str, dict]) -> Decision:
        """What the gateway receives for one object: `KEEP` (its original bytes), `DROP` or a
        `Replace` (whose `json()` reads it)."""
        self._runner.context = ctx
        with self._installed():
            return self._runner.run(_bytes(obj))

    def filter_batch(self, ctx: Context, objects: list[Union[bytes, str, dict]]) -> list[Decision]:
        """What the gateway receives for several objects of one response."""
        self._runner.context = ctx
        with self._installed():
            return self._runner.run_batch([_bytes(obj) for obj in objects])

    @contextmanager
    def _installed(self) -> Iterator[None]:
        previous, host.backend = host.backend, _FakeHost(self)
        try:
            yield
        finally:
            host.backend = previous


def _bytes(obj: Union[bytes, str, dict]) -> bytes:
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, str):
        return obj.encode()
    return encode(obj)


def list_item(list_json: Union[str, bytes], namespace: str, name: str) -> dict:
    """The item `namespace/name` of a `...List` (a fixture file's text)."""
    for item in json.loads(list_json)["items"]:
        metadata = item.get("metadata", {})
        if metadata.get("namespace") == namespace and metadata.get("name") == name:
            return item
    raise KeyError(f"{namespace}/{name}")


class _FakeHost:
    """The host a harness stands for."""

    def __init__(self, harness: Harness):
        self.harness = harness

    def get(self, resource, namespace, name):
        for obj in self.harness._objects.get(resource, []):
            metadata = obj.get("metadata", {})
            if metadata.get("namespace") == namespace and metadata.get("name") == name:
                return encode(obj)
        return None

    def list(self, resource, namespace, selector):
        match = _selector(selector)
        return [
            encode(obj)
            for obj in self.harness._objects.get(resource, [])
            if namespace in (None, obj.get("metadata", {}).get("namespace"))
            and match(obj.get("metadata", {}).get("labels") or {})
        ]

    def log(self, level, message):
        self.harness.logs.append((level, message))

    def log_enabled(self, level):
        return level >= self.harness.log_level

    def count(self, name, delta):
        self.harness.counters[name] += delta


_REQUIREMENT = re.compile(
    r"\s*(?:(!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)


def _selector(text: str):
    """A label selector's test (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`);
    the fake host's, not the gateway's full parser."""
    tests = []
    for part in re.split(r",(?![^(]*\))", text) if text.strip() else []:
        found = _REQUIREMENT.fullmatch(part)
        if found is None:
            raise ValueError(f"bad label selector {text!r}")
        if found["absent"]:
            tests.append(lambda labels, k=found["absent"]: k not in labels)
        elif found["op"]:
            equal = found["op"] != "!="
            tests.append(
                lambda labels, k=found["key"], v=found["value"], e=equal: (labels.get(k) == v) == e
            )
        elif found["set"]:
            values = {v.strip() for v in found["values"].split(",")}
            inside = found["set"] == "in"
            tests.append(
                lambda labels, k=found["key"], vs=values, i=inside: (
                    (k in labels and labels[k] in vs) if i else labels.get(k) not in vs
                )
            )
        else:
            tests.append(lambda labels, k=found["key"]: k in labels)
    return lambda labels: all(test(labels) for test in tests)


__all__ = ["Harness", "list_item"]
