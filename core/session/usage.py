"""Tokens used per reply and per chat (issue 31, item 17).

Each model request of a chat has one ``usage`` entry, stored in the same append as the round
holding its reply (:meth:`core.session.manager.SessionManager.store_round`); a round that made no
request (the rest of a task round, a round resumed after an approval) has none::

    {"type": "usage", "ts": float, "at": int, "model": str, "prompt_tokens": int,
     "completion_tokens": int, "estimated": bool}

``at``: the message count after the round (the reply is message ``at - 1`` or before);
``prompt_tokens``/``completion_tokens``: the server's ``usage`` of that request when it sent one,
else anycode's estimate with ``"estimated": true`` (shown with ``~``). The fold ignores them;
:func:`usage_totals` adds them up. Cost is shown only when the user sets prices for the model
(:func:`prices`, ``ANYCODE_PRICES``); anycode never guesses a price.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

log = logging.getLogger(__name__)


def usage_entry(at: int, model: str, prompt_tokens: int, completion_tokens: int, *, estimated: bool,
                ts: float | None = None) -> dict[str, Any]:
    """Build a usage entry (see the module docstring)."""
    return {"type": "usage", "ts": time.time() if ts is None else ts, "at": int(at), "model": str(model or ""),
            "prompt_tokens": max(0, int(prompt_tokens)), "completion_tokens": max(0, int(completion_tokens)),
            "estimated": bool(estimated)}


@dataclass
class UsageTotals:
    """A chat's tokens: ``prompt``, ``completion``, how many ``replies`` were counted, whether any
    figure is an estimate, and per model ``{model: [prompt, completion]}`` (for the cost)."""

    prompt: int = 0
    completion: int = 0
    replies: int = 0
    estimated: bool = False
    by_model: dict[str, list[int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def cost(self, price_table: dict[str, tuple[float, float]]) -> float | None:
        """The cost in the user's unit from ``price_table`` (:func:`prices`), or None when a model
        used has no price set (a partial sum would mislead) or nothing was counted."""
        if not self.by_model or not price_table:
            return None
        total = 0.0
        for model, (p, c) in self.by_model.items():
            if model not in price_table:
                return None
            pin, pout = price_table[model]
            total += p / 1e6 * pin + c / 1e6 * pout
        return total

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt, "completion_tokens": self.completion, "total_tokens": self.total,
                "replies": self.replies, "estimated": self.estimated, "by_model": self.by_model}


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def usage_totals(entries: Iterable[Any]) -> UsageTotals:
    """Add up the usage entries of ``entries`` (malformed ones skipped)."""
    out = UsageTotals()
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "usage":
            continue
        p, c = _count(e.get("prompt_tokens")), _count(e.get("completion_tokens"))
        out.prompt += p
        out.completion += c
        out.replies += 1
        out.estimated = out.estimated or bool(e.get("estimated"))
        per = out.by_model.setdefault(str(e.get("model") or ""), [0, 0])
        per[0] += p
        per[1] += c
    return out


def prices(value: str | None = None) -> dict[str, tuple[float, float]]:
    """The prices the user set, ``{model: (per million prompt tokens, per million completion
    tokens)}``, from ``ANYCODE_PRICES`` (or ``value``): ``model=IN/OUT`` items separated by
    commas or semicolons, e.g. ``gpt-4o-mini=0.15/0.6;gpt-4o=2.5/10``. A malformed item is logged
    and ignored; nothing set: ``{}`` (no cost is ever shown then)."""
    text = os.environ.get("ANYCODE_PRICES", "") if value is None else value
    out: dict[str, tuple[float, float]] = {}
    for item in text.replace(";", ",").split(","):
        if not item.strip():
            continue
        model, _, rate = item.strip().rpartition("=")
        pin, _, pout = rate.partition("/")
        try:
            price = (float(pin), float(pout))
        except ValueError:
            log.warning("ANYCODE_PRICES: cannot read %r (model=IN/OUT per million tokens); ignored", item)
            continue
        if model.strip() and min(price) >= 0:
            out[model.strip()] = price
    return out


def describe(totals: UsageTotals, price_table: dict[str, tuple[float, float]] | None = None) -> str:
    """One line: ``"~1,234 tokens (1,000 in, 234 out) in 3 replies, cost 0.0012"`` (``~`` when
    any figure is an estimate; the cost only with prices for every model used)."""
    mark = "~" if totals.estimated else ""
    text = (f"{mark}{totals.total:,} tokens ({mark}{totals.prompt:,} in, {mark}{totals.completion:,} out) "
            f"in {totals.replies} repl{'y' if totals.replies == 1 else 'ies'}")
    cost = totals.cost(prices() if price_table is None else price_table)
    if cost is not None:
        text += f", cost {cost:.4f}"
    return text
