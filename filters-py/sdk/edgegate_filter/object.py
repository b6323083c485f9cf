"""`Object`: one Kubernetes object, parsed on first read, with the accessors filters use:
identity, labels, annotations, and fields by path.

A path is a dot-separated list of keys, where a number indexes an array: `spec.ports.0.port`
is the first port's `port`. Keys that contain a dot are reached through `Object.value`.

An object knows whether it was edited, as the Rust SDK's does: a setter or a removal that
changed it, or a `..._mut` accessor that handed out a part of it to change (counted even when
nothing is written through it). A setter that finds the value already there (`update`) and a
removal that finds nothing edit nothing, so a kept object goes on as its original bytes.

Unlike the Rust SDK, which splits the bytes and re-encodes only the value an edit ends on,
this one parses the whole object on its first read and encodes it whole when it was edited
(compact, keys in their order, non-ASCII as UTF-8): the same JSON, not the same bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Optional

_INDEX = re.compile(r"\+?[0-9]+")


class ObjectError(ValueError):
    """The bytes are not JSON, or the JSON is not an object."""


def _refuse_constant(name: str) -> Any:
    raise ObjectError(f"not JSON: {name}")


def parse(data: bytes | str) -> Any:
    """JSON text as a value, strictly (no `NaN` or `Infinity`)."""
    return json.loads(data, parse_constant=_refuse_constant)


def encode(value: Any) -> bytes:
    """A value as compact JSON bytes, keys in their order, non-ASCII as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON values are (as `serde_json` compares them):
    `1`, `1.0` and `true` are three values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def keys_of(path: str) -> list[str]:
    """The keys of a dot-separated path."""
    return path.split(".")


def _child(value: Any, key: str) -> Any:
    """The value under `key` (an object's entry, an array's item by index), or None."""
    if isinstance(value, dict):
        return value.get(key)
    if isinstance(value, list) and _INDEX.fullmatch(key):
        index = int(key)
        return value[index] if index < len(value) else None
    return None


def walk(value: Any, keys: Iterable[str]) -> Any:
    """The value below `value` at `keys`, or None."""
    for key in keys:
        value = _child(value, key)
        if value is None:
            return None
    return value


def _set(value: Any, keys: list[str], new: Any) -> bool:
    """Sets the value below `value` at `keys`, adding missing objects on the way (never array
    items); False, changing nothing, when the path runs through a scalar or past an array's
    end."""
    if not keys:
        return False
    *on_the_way, last = keys
    # Check first, so that a path that cannot be set adds no objects on its way.
    parent = value
    for depth, key in enumerate(on_the_way):
        if isinstance(parent, dict):
            if key not in parent:
                break
            parent = parent[key]
        elif isinstance(parent, list) and _INDEX.fullmatch(key) and int(key) < len(parent):
            parent = parent[int(key)]
        else:
            return False
    else:
        if isinstance(parent, list):
            if not (_INDEX.fullmatch(last) and int(last) < len(parent)):
                return False
        elif not isinstance(parent, dict):
            return False
    parent = value
    for key in on_the_way:
        if isinstance(parent, dict):
            parent = parent.setdefault(key, {})
        else:
            parent = parent[int(key)]
    if isinstance(parent, dict):
        parent[last] = new
    else:
        parent[int(last)] = new
    return True


class Object:
    """A Kubernetes object: its bytes, and its JSON value once a read needs it.

    Make one with `Object(data)` from bytes (checked to open a JSON object; parsed on first
    read) or `Object.from_value(mapping)`.
    """

    __slots__ = ("_raw", "_value", "_edited", "_lent")

    def __init__(self, data: bytes):
        data = bytes(data)
        if not data.lstrip(b" \t\r\n").startswith(b"{"):
            try:
                value = parse(data)
            except ValueError as error:
                raise ObjectError(f"not JSON: {error}") from None
            raise ObjectError(f"not a JSON object: {type(value).__name__}")
        self._raw = data
        self._value: Optional[dict] = None
        self._edited = False
        # Whether a part was handed out to change, which may have changed nothing.
        self._lent = False

    @classmethod
    def from_value(cls, value: dict) -> "Object":
        """Wraps a JSON value, which must be an object (a dict)."""
        if not isinstance(value, dict):
            raise ObjectError("not a JSON object")
        obj = cls.__new__(cls)
        obj._raw = b""
        obj._value = value
        obj._edited = False
        obj._lent = False
        return obj

    # The whole value.

    @property
    def value(self) -> dict:
        """The whole object, to read. Change it only through the setters or `value_mut`, or
        the change may not be forwarded."""
        if self._value is None:
            try:
                value = parse(self._raw)
            except ValueError as error:
                raise ObjectError(f"the object does not parse whole: {error}") from None
            if not isinstance(value, dict):
                raise ObjectError("not a JSON object")
            self._value = value
        return self._value

    def value_mut(self) -> dict:
        """The whole object, to change; counted as an edit."""
        self._edited = self._lent = True
        return self.value

    def is_edited(self) -> bool:
        """Whether the object may differ from what it was made from (see the module's
        docstring)."""
        return self._edited

    def to_bytes(self) -> bytes:
        """The object as JSON: its original bytes if it was not edited."""
        if not self._edited and self._raw:
            return self._raw
        return encode(self.value)

    def edits(self) -> Optional[bytes]:
        """The object encoded as JSON if it was edited and no longer reads as it came: what a
        filter's `Keep` forwards."""
        if not self._edited:
            return None
        data = encode(self.value)
        if not self._raw:
            return data
        if data == self._raw:
            return None
        # The setters mark only changes; a part handed out may have been left as it was.
        if self._lent and same(parse(self._raw), self._value):
            return None
        return data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Object) and same(self.value, other.value)

    def __repr__(self) -> str:
        return f"Object({self.namespace!r}, {self.name!r}, edited={self._edited})"

    # Fields by path.

    def get(self, path: str) -> Any:
        """Any field by path from the root (`metadata.ownerReferences.0.kind`), or None."""
        return walk(self.value, keys_of(path))

    def get_mut(self, path: str) -> Any:
        """Any field by path, to change in place (a dict or a list); counted as an edit when
        there is one."""
        found = walk(self.value, keys_of(path))
        if found is not None:
            self._edited = self._lent = True
        return found

    def set(self, path: str, value: Any) -> bool:
        """Sets any field by path, creating missing objects on the way (never array items).
        Returns False, changing nothing, when the path runs through a scalar or past an
        array's end."""
        if _set(self.value, keys_of(path), value):
            self._edited = True
            return True
        return False

    def update(self, path: str, value: Any) -> bool:
        """Sets a field as `set` does, unless it already holds `value` (an equal JSON
        value), in which case the object is not edited. Returns whether it changed."""
        return self._update_keys(keys_of(path), value)

    def _update_keys(self, keys: list[str], value: Any) -> bool:
        found = walk(self.value, keys)
        if found is not None and same(found, value):
            return False
        if _set(self.value, keys, value):
            self._edited = True
            return True
        return False

    def remove(self, path: str) -> Any:
        """Removes the field at a path (`spec.externalIPs`) and returns its value; None,
        changing nothing, when there is none (a path that ends at an array's item removes
        nothing)."""
        *on_the_way, last = keys_of(path)
        parent = walk(self.value, on_the_way)
        if isinstance(parent, dict) and last in parent:
            self._edited = True
            return parent.pop(last)
        return None

    def retain_items(self, key: str, keep: Callable[[Any], bool]) -> bool:
        """Keeps only the items of the array in top-level field `key` (`endpoints`) that
        `keep` accepts; returns whether any was removed (False when the field is missing or
        not an array)."""
        items = self.value.get(key)
        if not isinstance(items, list):
            return False
        kept = [item for item in items if keep(item)]
        if len(kept) == len(items):
            return False
        items[:] = kept
        self._edited = True
        return True

    def position(self, path: str, accept: Callable[[Any], bool]) -> Optional[int]:
        """The index of the first item of the array at `path` that `accept` accepts; None when
        none does or the path leads to no array."""
        items = self.get(path)
        if not isinstance(items, list):
            return None
        for index, item in enumerate(items):
            if accept(item):
                return index
        return None

    def spec(self, path: str) -> Any:
        """A field of `spec` by path (`clusterIP`, `ports.0.port`)."""
        return walk(self.value, ["spec", *keys_of(path)])

    def spec_mut(self, path: str) -> Any:
        """A field of `spec` by path, to change in place; counted as an edit."""
        return self.get_mut(f"spec.{path}")

    def set_spec(self, path: str, value: Any) -> bool:
        """Sets a field of `spec` by path, creating missing objects on the way."""
        return self.set(f"spec.{path}", value)

    def status(self, path: str) -> Any:
        """A field of `status` by path."""
        return walk(self.value, ["status", *keys_of(path)])

    def status_mut(self, path: str) -> Any:
        """A field of `status` by path, to change in place; counted as an edit."""
        return self.get_mut(f"status.{path}")

    def set_status(self, path: str, value: Any) -> bool:
        """Sets a field of `status` by path, creating missing objects on the way."""
        return self.set(f"status.{path}", value)

    # Identity.

    def _string(self, keys: list[str]) -> Optional[str]:
        found = walk(self.value, keys)
        return found if isinstance(found, str) else None

    def _set_string(self, keys: list[str], value: str) -> None:
        """Sets a string at `keys`; where something that is not an object lies on the way
        (`"labels": null`), an object is put in its place."""
        if self._update_keys(keys, value) or same(walk(self.value, keys), value):
            return
        parent = self.value
        for key in keys[:-1]:
            if not isinstance(parent.get(key), dict):
                parent[key] = {}
            parent = parent[key]
        parent[keys[-1]] = value
        self._edited = True

    @property
    def api_version(self) -> Optional[str]:
        """`apiVersion`."""
        return self._string(["apiVersion"])

    @property
    def kind(self) -> Optional[str]:
        """`kind`; settable."""
        return self._string(["kind"])

    @kind.setter
    def kind(self, kind: str) -> None:
        self._set_string(["kind"], kind)

    @property
    def name(self) -> Optional[str]:
        """`metadata.name`; settable."""
        return self._string(["metadata", "name"])

    @name.setter
    def name(self, name: str) -> None:
        self._set_string(["metadata", "name"], name)

    @property
    def namespace(self) -> Optional[str]:
        """`metadata.namespace`; settable."""
        return self._string(["metadata", "namespace"])

    @namespace.setter
    def namespace(self, namespace: str) -> None:
        self._set_string(["metadata", "namespace"], namespace)

    @property
    def resource_version(self) -> Optional[str]:
        """`metadata.resourceVersion` (which a filter must never change)."""
        return self._string(["metadata", "resourceVersion"])

    def is_named(self, namespace: str, name: str) -> bool:
        """Whether this is the object `namespace/name`. While the object is unparsed, an
        object whose bytes cannot hold both strings is answered without parsing it."""
        if self._value is None and not (self._may_hold(namespace) and self._may_hold(name)):
            return False
        return self.namespace == namespace and self.name == name

    def _may_hold(self, text: str) -> bool:
        """Whether the unparsed bytes may hold the JSON string `text`: False only when they
        cannot, `text` having nothing to escape, the bytes no escape that could spell it,
        and its quoted form not found."""
        if any(c in text for c in '"\\/') or not text.isprintable():
            return True
        raw = self._raw
        if b"\\u" in raw or b"\\/" in raw:
            return True
        return b'"' + text.encode() + b'"' in raw

    # Labels and annotations.

    def _strings(self, keys: list[str]) -> dict[str, str]:
        found = walk(self.value, keys)
        if not isinstance(found, dict):
            return {}
        return {k: v for k, v in found.items() if isinstance(v, str)}

    def _remove_string(self, keys: list[str]) -> Optional[str]:
        parent = walk(self.value, keys[:-1])
        if isinstance(parent, dict) and keys[-1] in parent:
            self._edited = True
            removed = parent.pop(keys[-1])
            return removed if isinstance(removed, str) else None
        return None

    def label(self, key: str) -> Optional[str]:
        """One label's value."""
        return self._string(["metadata", "labels", key])

    def labels(self) -> dict[str, str]:
        """All labels (string values only), as a new dict."""
        return self._strings(["metadata", "labels"])

    def set_label(self, key: str, value: str) -> None:
        """Sets a label (an edit only when it had another value)."""
        self._set_string(["metadata", "labels", key], value)

    def remove_label(self, key: str) -> Optional[str]:
        """Removes a label, returning its value (None when it was not a string); no edit when
        there was no such label."""
        return self._remove_string(["metadata", "labels", key])

    def annotation(self, key: str) -> Optional[str]:
        """One annotation's value."""
        return self._string(["metadata", "annotations", key])

    def annotations(self) -> dict[str, str]:
        """All annotations (string values only), as a new dict."""
        return self._strings(["metadata", "annotations"])

    def set_annotation(self, key: str, value: str) -> None:
        """Sets an annotation (an edit only when it had another value)."""
        self._set_string(["metadata", "annotations", key], value)

    def remove_annotation(self, key: str) -> Optional[str]:
        """Removes an annotation, returning its value (None when it was not a string); no
        edit when there was no such annotation."""
        return self._remove_string(["metadata", "annotations", key])
