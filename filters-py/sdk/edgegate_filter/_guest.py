"""The component side of the `edgegate:filter` world: `export_filter` makes the `WitWorld`
class componentize-py looks for in the app module, converting the generated bindings' types
to and from the SDK's."""

from __future__ import annotations

import traceback
from typing import Optional

from . import host
from ._adapter import Runner
from .filter import Filter
from .types import Context, Drop, Keep, Level, Verb

_VERBS = list(Verb)


def export_filter(cls: type[Filter]) -> Optional[type]:
    """The class implementing the world's exports for the filter `cls`. In the app module
    given to `componentize-py componentize`, write `WitWorld = export_filter(MyFilter)`.

    Outside a component build (the bindings are generated only then) this returns None, so
    that tests import the same module natively."""
    try:
        from componentize_py_types import Err  # type: ignore[import-not-found]
        from wit_world.imports import types as wit  # type: ignore[import-not-found]
    except ImportError:
        return None

    runner = Runner(cls)
    wit_verbs = list(wit.Verb)
    keep, drop = wit.Decision_Keep(), wit.Decision_Drop()

    def decision_to_wit(decision):
        if isinstance(decision, Keep):
            return keep
        if isinstance(decision, Drop):
            return drop
        return wit.Decision_Replace(decision.data)

    def logged(call):
        """Runs `call`; an exception is written to the gateway's log, then traps the call, so
        that the host applies the filter's failure policy. (componentize-py's runtime reports
        it on stderr, which a filter is not given: the gateway's trap message names
        `wasi:cli/stderr`, and the line logged here says why.)"""
        try:
            return call()
        except Exception as error:
            host.log(Level.ERROR, f"exception: {describe(error)}")
            raise

    class WitWorld:
        def manifest(self):
            manifest = logged(cls.manifest)
            return wit.Manifest(
                name=manifest.name,
                version=manifest.version,
                matches=[
                    wit.ResourceMatch(
                        group=m.group,
                        resources=list(m.resources),
                        verbs=[wit_verbs[_VERBS.index(verb)] for verb in m.verbs],
                    )
                    for m in manifest.matches
                ],
                components=list(manifest.components),
                priority=manifest.priority,
                config_schema=manifest.schema_text(),
            )

        def configure(self, config: str) -> None:
            error = logged(lambda: runner.configure(config))
            if error is not None:
                raise Err(error)

        def begin(self, ctx) -> None:
            runner.context = Context(
                component=ctx.component,
                verb=_VERBS[ctx.verb.value],
                group=ctx.group,
                version=ctx.version,
                resource=ctx.resource,
                namespace=ctx.namespace,
                node_name=ctx.node_name,
                node_pool=ctx.node_pool,
            )

        def filter(self, object: bytes):
            return decision_to_wit(logged(lambda: runner.run(object)))

        def filter_batch(self, objects: list[bytes]):
            return [decision_to_wit(d) for d in logged(lambda: runner.run_batch(objects))]

    return WitWorld


def describe(error: BaseException) -> str:
    """An exception and where it was raised, innermost call last. Formatted from the frames
    alone: `traceback`'s usual formatting reads the source files, and a filter has no
    filesystem (the read would trap, naming the import instead of the exception)."""
    calls = [
        f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{line})"
        for frame, line in traceback.walk_tb(error.__traceback__)
    ]
    return f"{type(error).__name__}: {error}; in " + " > ".join(calls)
