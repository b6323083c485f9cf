"""What the gateway grants a filter: read-only lookups of the objects it knows (served from its
informers and cache, so they work offline), logging and counters. Nothing else.

In a component these call the world's `host` imports; natively they are served by the
`testing.Harness` that is filtering (and do nothing without one).
"""

from __future__ import annotations

from typing import Optional, Protocol

from .object import Object, ObjectError
from .types import Level, Resource


class Backend(Protocol):
    """Where the calls go: the component's imports, or a test's fake host."""

    def get(self, resource: Resource, namespace: Optional[str], name: str) -> Optional[bytes]: ...
    def list(self, resource: Resource, namespace: Optional[str], selector: str) -> list[bytes]: ...
    def log(self, level: Level, message: str) -> None: ...
    def log_enabled(self, level: Level) -> bool: ...
    def count(self, name: str, delta: int) -> None: ...


class _Nothing:
    """The backend outside a component and a harness: knows nothing, writes nothing."""

    def get(self, resource, namespace, name):
        return None

    def list(self, resource, namespace, selector):
        return []

    def log(self, level, message):
        pass

    def log_enabled(self, level):
        return False

    def count(self, name, delta):
        pass


class _Imports:
    """The component's `host` imports."""

    def __init__(self, host, types):
        self._host = host
        self._levels = [types.Level(level.value) for level in Level]

    def get(self, resource, namespace, name):
        return self._host.get(resource.group, resource.version, resource.resource, namespace, name)

    def list(self, resource, namespace, selector):
        return self._host.list(
            resource.group, resource.version, resource.resource, namespace, selector
        )

    def log(self, level, message):
        self._host.log(self._levels[level], message)

    def log_enabled(self, level):
        return self._host.log_enabled(self._levels[level])

    def count(self, name, delta):
        self._host.count(name, delta)


def _imports() -> Backend:
    try:
        from wit_world.imports import host, types  # type: ignore[import-not-found]
    except ImportError:
        return _Nothing()
    return _Imports(host, types)


backend: Backend = _imports()
"""The backend in use; `testing.Harness` swaps in its fake host while it filters."""


def get(resource: Resource, namespace: Optional[str], name: str) -> Optional[Object]:
    """One object of `resource` by namespace (None when cluster-scoped) and name; None if the
    gateway does not know it (or it is not a JSON object)."""
    data = backend.get(resource, namespace, name)
    if data is None:
        return None
    try:
        return Object(data)
    except ObjectError:
        return None


def list(resource: Resource, namespace: Optional[str] = None, label_selector: str = "") -> "list[Object]":
    """The objects of a resource (in one namespace, or in all with None) whose labels match a
    Kubernetes label selector (`app=web,tier!=db`; empty matches all). A selector that does
    not parse traps the call."""
    found = []
    for data in backend.list(resource, namespace, label_selector):
        try:
            found.append(Object(data))
        except ObjectError:
            pass
    return found


def log(level: Level, message: str) -> None:
    """Writes a line to the gateway's log, tagged with the filter's name."""
    backend.log(level, message)


def log_enabled(level: Level) -> bool:
    """Whether `log` at `level` would write a line now: check it before building a message
    that is costly or written for every object."""
    return backend.log_enabled(level)


def count(name: str, delta: int = 1) -> None:
    """Adds `delta` to the counter `name`, exported as a metric labelled with the filter."""
    backend.count(name, delta)
