"""Runs a `Filter` behind the world's exports: builds it from its config, parses each object
and turns decisions into what the host receives. The component's exports and the test
harness both go through here, so tests exercise the same path."""

from __future__ import annotations

import json
from typing import NoReturn, Optional

from . import host
from .filter import Filter
from .object import Object, ObjectError
from .types import KEEP, Context, Decision, Drop, Keep, Level, Replace


class Runner:
    """One instance's filter (None until configured) and the context last begun."""

    def __init__(self, cls: type[Filter]):
        self.cls = cls
        self.filter: Optional[Filter] = None
        self.context: Optional[Context] = None

    def configure(self, config: str) -> Optional[str]:
        """Builds the filter; returns why it cannot be, or None."""
        try:
            value = json.loads(config) if config.strip() else {}
        except ValueError as error:
            return f"config is not JSON: {error}"
        if not isinstance(value, dict):
            return "bad config: not a JSON object"
        try:
            self.filter = self.cls.from_config(value)
        except (ValueError, TypeError) as error:
            return f"bad config: {error}"
        return None

    def _ready(self) -> tuple[Filter, Context]:
        if self.filter is None:
            fail("filter called before configure")
        if self.context is None:
            fail("filter called before begin")
        return self.filter, self.context

    def run(self, data: bytes) -> Decision:
        """Decides about one object; `Keep` means its original bytes."""
        filter, ctx = self._ready()
        obj = _parse(data)
        return output(filter.filter(ctx, obj), obj)

    def run_batch(self, objects: list[bytes]) -> list[Decision]:
        """Decides about several objects; one output per object, in order."""
        filter, ctx = self._ready()
        parsed = [_parse(data) for data in objects]
        decisions = filter.filter_batch(ctx, parsed)
        if len(decisions) != len(parsed):
            fail(f"filter_batch returned {len(decisions)} decisions for {len(parsed)} objects")
        return [output(decision, obj) for decision, obj in zip(decisions, parsed)]


def _parse(data: bytes) -> Object:
    try:
        return Object(data)
    except ObjectError as error:
        fail(f"the object is not a Kubernetes object: {error}")


def output(decision: Decision, obj: Object) -> Decision:
    """A decision as the host receives it: `Keep` of an edited object forwards its edits, so
    an edit is never lost; an edit that changed nothing still forwards the original."""
    if isinstance(decision, Keep):
        edits = obj.edits()
        return KEEP if edits is None else Replace(edits)
    if isinstance(decision, (Drop, Replace)):
        return decision
    fail(f"the filter returned {decision!r}, not KEEP, DROP or Replace")


def fail(message: str) -> NoReturn:
    """Something only a host bug or a broken filter causes: say why in the gateway's log, then
    trap, so that the host applies the filter's failure policy."""
    host.log(Level.ERROR, message)
    raise RuntimeError(message)

