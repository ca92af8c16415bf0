"""One ``change`` event for everything that follows the tab's state (issue 32).

Eight features showed something derived from the tab's ``gr.State`` — the version arrows, the
context meter, the approval card, the archived bar, the Move button, the Memory toast's watch,
"Show earlier messages", the rewind card's Undo — each with its own ``state.change`` listener.
Every open, send or switch therefore cost eight more round trips (eight queue joins, eight event
streams) after the one the user waited for. Here they are registered instead, and one listener
computes all of them in one call: one round trip, whatever the number of features.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gradio as gr

log = logging.getLogger(__name__)


def _is_skip(value: Any) -> bool:
    return isinstance(value, dict) and value == {"__type__": "update"}  # gr.skip()


class StateListeners:
    """Functions of the tab's state, run together on each change of ``state``.

    :meth:`add` takes what ``state.change`` took (``fn``, its input and output components); call
    :meth:`wire` once, after every feature has added its own. Outputs are merged in the order of
    :meth:`add`: a later function's value for a component wins over an earlier one's unless it is
    ``gr.skip()``. A function that raises is logged and leaves its outputs as they were; the others
    still run (one feature's bug must not freeze the rest of the page)."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self._items: list[tuple[Callable[..., Any], list[Any], list[Any]]] = []
        self._wired = False

    def add(self, fn: Callable[..., Any], inputs: Any, outputs: Any) -> None:
        """Run ``fn(*inputs)`` on each change of the state; its result fills ``outputs`` (one value
        or a tuple, as for a Gradio event). Raises ``RuntimeError`` after :meth:`wire`."""
        if self._wired:
            raise RuntimeError("StateListeners.add after wire(): the listener is already built")
        as_list = lambda x: list(x) if isinstance(x, (list, tuple)) else [x]  # noqa: E731
        self._items.append((fn, as_list(inputs), as_list(outputs)))

    def wire(self) -> None:
        """Create the one ``state.change`` listener (``trigger_mode="always_last"``: of changes
        that arrive while it runs, only the latest is computed, as every feature shows only the
        current state)."""
        self._wired = True
        inputs: list[Any] = []
        outputs: list[Any] = []
        for _fn, ins, outs in self._items:
            inputs += [c for c in ins if all(c is not x for x in inputs)]
            outputs += [c for c in outs if all(c is not x for x in outputs)]

        def where(component: Any, among: list[Any]) -> int:
            return next(i for i, x in enumerate(among) if x is component)

        plan = [(fn, [where(c, inputs) for c in ins], [where(c, outputs) for c in outs])
                for fn, ins, outs in self._items]

        def on_state(*values: Any) -> tuple:
            result: list[Any] = [gr.skip()] * len(outputs)
            for fn, in_at, out_at in plan:
                try:
                    got = fn(*[values[i] for i in in_at])
                except Exception:  # noqa: BLE001 -- one feature's failure leaves the others working
                    log.exception("%s failed on a state change", getattr(fn, "__qualname__", fn))
                    continue
                got = got if len(out_at) > 1 else (got,)
                for i, value in zip(out_at, got):
                    if not _is_skip(value):
                        result[i] = value
            return tuple(result)

        self.state.change(on_state, inputs, outputs, api_visibility="private", show_progress="hidden",
                          trigger_mode="always_last")
