"""Medians with min-max or quartiles, ratios within each round, and the text tables."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["format_table", "per_round_ratios", "spread", "summary"]


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"median", "q1", "q3", "min", "max", "values"}`` of one series (a value a round)."""
    q1, q3 = _quartiles(values)
    return {
        "median": statistics.median(values),
        "q1": q1,
        "q3": q3,
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def per_round_ratios(values: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``values[i] / baseline[i]``: each ratio compares two runs of the same round."""
    return [v / b for v, b in zip(values, baseline, strict=True)]


def _num(value: float, digits: int) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def spread(
    stats: dict[str, Any], digits: int = 2, suffix: str = "", quartiles: bool = False
) -> str:
    """``median (min-max)`` as text, e.g. ``1.08 (1.02-1.15)``; with ``quartiles``, the
    middle half of the rounds instead, ``1.08 [1.05-1.11]`` (for cases of many rounds, whose
    extremes say more about the machine than the client)."""
    median, low, high = stats["median"], stats["min"], stats["max"]
    if quartiles:
        low, high = stats["q1"], stats["q3"]
    if low == high:
        return f"{_num(median, digits)}{suffix}"
    inner = f"{_num(low, digits)}-{_num(high, digits)}"
    return f"{_num(median, digits)}{suffix} " + (f"[{inner}]" if quartiles else f"({inner})")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain text table with ``|`` separators (also valid Markdown)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
