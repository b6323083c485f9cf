"""The one class a filter derives from."""

from __future__ import annotations

from typing import Any

from .object import Object
from .types import KEEP, Context, Decision, Manifest


class ConfigError(ValueError):
    """A config the filter cannot be built from; the gateway refuses the generation being
    loaded and keeps serving the previous one."""


class Filter:
    """A filter: it says what it is, builds itself from its config, and decides about objects.

    Derive from it, implement `manifest` and `filter`, and export the class with
    `export_filter`. The gateway keeps several instances of a filter and replaces one after it
    traps, so a filter must not rely on state kept between calls.
    """

    @classmethod
    def manifest(cls) -> Manifest:
        """What the filter is and what it applies to; read once when it is loaded."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Filter":
        """Builds the filter from its config: the JSON the gateway has already checked
        against the manifest's schema (`{}` when none is given). By default the config's
        keys are the constructor's keyword arguments. Raise `ConfigError` (or any
        `ValueError` or `TypeError`) to refuse it."""
        return cls(**config)

    def filter(self, ctx: Context, obj: Object) -> Decision:
        """Decides about one object: a list item, a watch event's object or a single GET's
        body. `KEEP` passes the object on as the filter left it: edits made to `obj` are
        forwarded, and an object nothing edited goes on as its original bytes."""
        return KEEP

    def filter_batch(self, ctx: Context, objects: list[Object]) -> list[Decision]:
        """Decides about several objects of one response, in order; by default one at a
        time."""
        return [self.filter(ctx, obj) for obj in objects]
