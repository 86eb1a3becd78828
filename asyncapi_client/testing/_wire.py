"""Small helpers for the fake's wire dicts: ids, amounts as text, rounding, copies."""

from __future__ import annotations

import math
import random
from typing import Any, Final

__all__ = [
    "EPOCH_MS",
    "WireDict",
    "copy_wire",
    "fraction_digits",
    "hex_id",
    "round_sig",
    "units_text",
]

#: One resource as the wire has it: camelCase keys, numeric text where the API uses text.
WireDict = dict[str, Any]

# 2025-01-01T00:00:00Z in milliseconds: the newest generated order is a little before it.
EPOCH_MS: Final = 1_735_689_600_000


def hex_id(rng: random.Random, nbytes: int) -> str:
    """``0x`` and ``nbytes`` random bytes in hex: an address or a transaction id."""
    return f"0x{rng.getrandbits(nbytes * 8):0{nbytes * 2}x}"


def units_text(units: int, decimals: int) -> str:
    """An integer amount of the smallest unit as text: ``units_text(1505, 3) == "1.505"``."""
    if decimals == 0:
        return str(units)
    text = str(units).rjust(decimals + 1, "0")
    return f"{text[:-decimals]}.{text[-decimals:]}"


def round_sig(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant digits."""
    return float(f"{value:.{digits}g}")


def fraction_digits(value: float, significant: int) -> int:
    """How many decimals show ``significant`` digits of ``value`` (at least 0)."""
    return max(0, significant - 1 - math.floor(math.log10(value)))


def copy_wire(value: Any) -> Any:
    """A deep copy of a JSON-like value (dicts and lists copied, the rest shared)."""
    if isinstance(value, dict):
        return {key: copy_wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_wire(item) for item in value]
    return value
