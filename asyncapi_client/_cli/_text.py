"""Values as the command line writes them: wire-shaped, bounded, and safe for a terminal.

Nothing here trusts the server: decimals print exactly but never at unbounded length, data
nested deeper than any recursion limit still converts and prints (iteratively), and control
or escape characters reach a terminal only as visible escapes.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

import attrs
import orjson

from asyncapi_client._decode import camel

__all__ = [
    "MAX_DECIMAL_DIGITS",
    "OutputError",
    "decimal_text",
    "dumps",
    "plain",
    "tty_safe_json",
    "visible",
]

#: A decimal with more significant digits than this is refused rather than printed.
MAX_DECIMAL_DIGITS: Final = 128
#: Within this adjusted exponent a decimal prints positionally (``0.000123``), else in
#: exponent form (``1E-999999999``): both exact, and never more than a few hundred characters.
MAX_POSITIONAL_EXPONENT: Final = 128


class OutputError(Exception):
    """A value the command line will not print (exit status 1, one line on stderr)."""


# A path is a linked chain of (parent, key) pairs, built for free and spelt out on error.
_Path = tuple[Any, str | int] | None


def _spell(path: _Path) -> str:
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    text = ""
    for key in reversed(keys):
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text or "the value"


def decimal_text(value: Decimal, where: str = "a decimal") -> str:
    """Exact decimal text as the wire has it, in a bounded length.

    Positional text keeps its digits (``0.0000001`` stays so) and a positive exponent stays
    (``1E+2``); past :data:`MAX_POSITIONAL_EXPONENT` the exponent form is used (exact too).
    """
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise OutputError(f"{where} is not a finite number ({value})")
    if len(digits) > MAX_DECIMAL_DIGITS:
        raise OutputError(
            f"{where} has {len(digits):,} significant digits, more than the "
            f"{MAX_DECIMAL_DIGITS} the command line prints"
        )
    if exponent > 0 or not -MAX_POSITIONAL_EXPONENT <= value.adjusted() <= MAX_POSITIONAL_EXPONENT:
        return str(value)
    return format(value, "f")


def plain(value: object) -> Any:
    """``value`` as JSON-ready data: models by their wire (camelCase) names, enums as their
    values, decimals as bounded exact text. Iterative, so any nesting depth converts."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, object, _Path]] = [(root, 0, value, None)]
    while stack:
        parent, key, item, path = stack.pop()
        if item is None or isinstance(item, str | bool | int | float):
            parent[key] = item
        elif isinstance(item, Decimal):
            parent[key] = decimal_text(item, _spell(path))
        elif isinstance(item, enum.Enum):
            parent[key] = item.value
        elif attrs.has(cls := type(item)):
            obj: dict[str, Any] = {}
            parent[key] = obj
            for field in attrs.fields(cls):
                name = camel(field.name)
                obj[name] = None
                stack.append((obj, name, getattr(item, field.name), (path, name)))
        elif isinstance(item, Mapping):
            obj = {}
            parent[key] = obj
            for name, child in item.items():
                obj[str(name)] = None
                stack.append((obj, str(name), child, (path, str(name))))
        elif isinstance(item, list | tuple):
            seq: list[Any] = [None] * len(item)
            parent[key] = seq
            stack.extend((seq, i, child, (path, i)) for i, child in enumerate(item))
        else:
            parent[key] = str(item)
    return root[0]


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """JSON bytes of plain data (no trailing newline); any nesting depth, any int size."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    except TypeError:  # orjson.JSONEncodeError: nested past its limit, or a huge int
        return _dumps_deep(value, indent)


def _dumps_deep(value: Any, indent: bool) -> bytes:
    """The slow path of :func:`dumps`: an explicit stack instead of recursion."""
    out: list[bytes] = []
    colon = b": " if indent else b":"

    def newline(depth: int) -> bytes:
        return b"\n" + b"  " * depth if indent else b""

    stack: list[tuple[bool, Any, int]] = [(False, value, 0)]  # (raw bytes?, item, depth)
    while stack:
        raw, item, depth = stack.pop()
        if raw:
            out.append(item)
        elif isinstance(item, dict):
            if not item:
                out.append(b"{}")
                continue
            out.append(b"{")
            parts: list[tuple[bool, Any, int]] = []
            for i, (name, child) in enumerate(item.items()):
                head = (b"," if i else b"") + newline(depth + 1) + orjson.dumps(name) + colon
                parts += [(True, head, 0), (False, child, depth + 1)]
            parts.append((True, newline(depth) + b"}", 0))
            stack.extend(reversed(parts))
        elif isinstance(item, list):
            if not item:
                out.append(b"[]")
                continue
            out.append(b"[")
            parts = []
            for i, child in enumerate(item):
                parts += [(True, (b"," if i else b"") + newline(depth + 1), 0)]
                parts.append((False, child, depth + 1))
            parts.append((True, newline(depth) + b"]", 0))
            stack.extend(reversed(parts))
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                out.append(str(item).encode())
            except ValueError:  # more digits than Python converts
                raise OutputError("an integer in the answer is too large to print") from None
        else:
            out.append(orjson.dumps(item))
    return b"".join(out)


#: C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a reader sees.
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """``text`` with every control, escape and bidi character written as a visible escape."""
    return _UNSAFE.sub(_escape, text)


# In JSON text the C0 controls are already escaped; what is left raw is DEL, the C1 controls
# (UTF-8 C2 80..C2 9F) and the bidi overrides. All of them sit inside strings, where a \\u
# escape means the same character, so the output stays valid, equal JSON.
_UNSAFE_JSON: Final = re.compile(
    b"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)


def tty_safe_json(data: bytes) -> bytes:
    """JSON bytes with the characters a terminal would act on written as ``\\u`` escapes."""
    if data.isascii() and b"\x7f" not in data:
        return data
    return _UNSAFE_JSON.sub(lambda m: b"".join(b"\\u%04x" % ord(c) for c in m[0].decode()), data)
