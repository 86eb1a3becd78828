"""Medians with min-max, ratios within each round, and the text tables."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["format_table", "per_round_ratios", "spread", "summary"]


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"median", "min", "max", "values"}`` of one series (one value per round)."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }


def per_round_ratios(values: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``values[i] / baseline[i]``: each ratio compares two runs of the same round."""
    return [v / b for v, b in zip(values, baseline, strict=True)]


def _num(value: float, digits: int) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def spread(stats: dict[str, Any], digits: int = 2, suffix: str = "") -> str:
    """``median (min-max)`` as text, e.g. ``1.08 (1.02-1.15)``."""
    median, low, high = stats["median"], stats["min"], stats["max"]
    if low == high:
        return f"{_num(median, digits)}{suffix}"
    return f"{_num(median, digits)}{suffix} ({_num(low, digits)}-{_num(high, digits)})"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain text table with ``|`` separators (also valid Markdown)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
