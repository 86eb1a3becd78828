"""Bytes to models: the one configured cattrs converter, and exact DecodeError paths.

Two converters are configured once, at import, from the same hooks:

* the fast one (``detailed_validation=False``) decodes every response;
* the detailed one runs only after the fast one failed, on the same data, to find the
  path of the first bad field (``orders[3].price``) for :class:`DecodeError`.

Wire names are camelCase, derived from the snake_case attribute names (never written out
per field). Unknown fields are ignored; missing required fields, wrong types and numeric
strings that are not finite decimal numbers are errors.
"""

from __future__ import annotations

import collections.abc
import typing
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._errors import DecodeError
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    MarketType,
    NestingError,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
    _OpenEnum,
    freeze_records,
)

__all__ = ["Decoder", "camel", "decoder", "to_wire"]

T = TypeVar("T")


def camel(name: str) -> str:
    """snake_case attribute name -> camelCase wire name (``volume_24h`` -> ``volume24h``)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# --- envelopes: the documented bodies that wrap a list ------------------------------------


@attrs.frozen(slots=True)
class _TokensBody:
    tokens: Sequence[Token]


@attrs.frozen(slots=True)
class _MarketsBody:
    markets: Sequence[Market]


_MODELS: tuple[type, ...] = (
    Token,
    Market,
    Pool,
    Order,
    UserProfile,
    LeaderboardEntry,
    OrdersPage,
    LeaderboardPage,
    _TokensBody,
    _MarketsBody,
)

#: attribute name -> wire name, per class (used for both directions and for error paths).
_WIRE_NAMES: dict[type, dict[str, str]] = {
    cls: {a.name: camel(a.name) for a in attrs.fields(cls)} for cls in _MODELS
}


# --- leaf hooks: strict about JSON types --------------------------------------------------

_DIGITS_AND_DOT = "0123456789."
#: Bounds on a decimal from the wire (a uint256 at 18 decimals has 78 digits). Unbounded, a
#: 15-byte "1e-999999999" becomes a Decimal that format(d, "f") spells with 10**9 zeros.
MAX_DECIMAL_DIGITS = 128
MAX_DECIMAL_EXPONENT = 128
_EXACT_FLOAT_INT = 2**53


def _type_error(value: object, expected: str) -> TypeError:
    return TypeError(f"expected {expected}, got {type(value).__name__} {_preview(value)}")


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _str(value: Any, _: Any) -> str:
    if value.__class__ is str:
        return value
    raise _type_error(value, "a string")


def _int(value: Any, _: Any) -> int:
    cls = value.__class__
    if cls is int:
        return value  # type: ignore[no-any-return]
    # An integral float is fine while it is exact; JSON integers past 64 bits reach us as
    # floats that have already lost digits, and are refused rather than returned wrong.
    if cls is float and value.is_integer() and abs(value) <= _EXACT_FLOAT_INT:
        return int(value)
    raise _type_error(value, "an integer")


def _float(value: Any, _: Any) -> float:
    cls = value.__class__
    if cls is float:
        return value  # type: ignore[no-any-return]
    if cls is int:
        return float(value)
    raise _type_error(value, "a number")


def _number(value: Any, _: Any) -> int | float:
    cls = value.__class__
    if cls is int or cls is float:
        return value  # type: ignore[no-any-return]
    raise _type_error(value, "a number")


def _decimal(value: Any, _: Any) -> Decimal:
    """A finite decimal number from text: no NaN, Infinity, blanks, ``_`` or non-ASCII digits."""
    if value.__class__ is not str:
        raise _type_error(value, "a decimal number as a string")
    # Plain digits and a dot are the common case; anything else must be ASCII with no
    # underscores and no surrounding blanks, which Decimal() would otherwise accept.
    if not value.strip(_DIGITS_AND_DOT) or (
        value.isascii() and "_" not in value and value == value.strip()
    ):
        try:
            number = Decimal(value)
        except InvalidOperation:
            pass
        else:
            if number.is_finite():
                if (
                    len(number.as_tuple().digits) <= MAX_DECIMAL_DIGITS
                    and -MAX_DECIMAL_EXPONENT <= number.adjusted() <= MAX_DECIMAL_EXPONENT
                ):
                    return number
                raise ValueError(
                    f"expected a decimal number of at most {MAX_DECIMAL_DIGITS} significant"
                    f" digits and an exponent within +-{MAX_DECIMAL_EXPONENT},"
                    f" got {_preview(value)}"
                )
    raise ValueError(f"expected a finite decimal number, got {_preview(value)}")


def _records(value: Any, _: Any) -> Sequence[Mapping[str, Any]]:
    """Balances or positions: an array of objects, frozen, at most MAX_NESTING deep."""
    if value.__class__ is not list:
        raise _type_error(value, "an array")
    return freeze_records(value)


def _optional(hook: Callable[[Any, Any], T]) -> Callable[[Any, Any], T | None]:
    def structure(value: Any, type_: Any) -> T | None:
        return None if value is None else hook(value, type_)

    return structure


def _cursor(value: Any, _: Any) -> str | None:
    # An empty or null cursor both mean "no further page".
    if value is None:
        return None
    return _str(value, None) or None


def _enum_hook(cls: type[_OpenEnum]) -> Callable[[Any, Any], Any]:
    members = dict(cls._value2member_map_)  # a dict lookup, not an Enum() call, when known

    def structure(value: Any, _: Any) -> Any:
        # The type check comes first: an unhashable value (a list) must not reach the lookup.
        if value.__class__ is not str:
            raise _type_error(value, f"a {cls.__name__} string")
        member = members.get(value)
        if member is not None:
            return member
        return cls(value)  # keeps values the enum does not know (see _OpenEnum)

    return structure


def _is_sequence(type_: Any) -> bool:
    return typing.get_origin(type_) is collections.abc.Sequence


def _sequence_factory(detailed: bool) -> Callable[[Any, cattrs.Converter], Any]:
    def factory(type_: Any, converter: cattrs.Converter) -> Callable[[Any, Any], tuple[Any, ...]]:
        (element_type,) = typing.get_args(type_)
        element = converter.get_structure_hook(element_type)

        if not detailed:

            def fast(value: Any, _: Any) -> tuple[Any, ...]:
                if value.__class__ is not list:
                    raise _type_error(value, "an array")
                return tuple([element(item, element_type) for item in value])

            return fast

        def detailed_(value: Any, _: Any) -> tuple[Any, ...]:
            if value.__class__ is not list:
                raise _type_error(value, "an array")
            out: list[Any] = []
            errors: list[Exception] = []
            for index, item in enumerate(value):
                try:
                    out.append(element(item, element_type))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ index {index}", index, element_type))
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {type_!r}", errors, type_)
            return tuple(out)

        return detailed_

    return factory


#: Per field, a hook that replaces the generic one for its type (both converters use it).
_FIELD_HOOKS: dict[tuple[type, str], Callable[[Any, Any], Any]] = {(OrdersPage, "cursor"): _cursor}


def _make_converter(*, detailed: bool) -> cattrs.Converter:
    """Configure one converter: leaf hooks, open enums, sequences, camelCase classes."""
    conv = cattrs.Converter(detailed_validation=detailed, forbid_extra_keys=False)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(Decimal, _decimal)
    conv.register_structure_hook(int | float, _number)
    conv.register_structure_hook(str | None, _optional(_str))
    conv.register_structure_hook(float | None, _optional(_float))
    for enum_cls in (Side, OrderStatus, MarketType):
        conv.register_structure_hook(enum_cls, _enum_hook(enum_cls))
    conv.register_structure_hook_factory(_is_sequence, _sequence_factory(detailed))
    conv.register_structure_hook_func(lambda t: t == Sequence[Mapping[str, Any]], _records)
    for cls in _MODELS:
        if detailed:
            renames: dict[str, Any] = {
                name: override(rename=wire, struct_hook=_FIELD_HOOKS.get((cls, name)))
                for name, wire in _WIRE_NAMES[cls].items()
            }
            structure: Callable[[Any, Any], Any] = make_dict_structure_fn(
                cls, conv, _cattrs_detailed_validation=True, **renames
            )
            conv.register_structure_hook(cls, _object_hook(structure))
        else:
            conv.register_structure_hook(cls, _generate_fast_structure(cls, conv))
    return conv


# --- the fast path: one generated function per model ---------------------------------------
#
# cattrs' generated functions call one hook per field; on a page of 10,000 orders those calls
# are a third of the time. These functions do the same checks inline (``x.__class__ is str``),
# look enums up in a dict, call Decimal directly, and call nested models' functions directly.
# They only have to fail on bad input, not explain it: the detailed converter does that.


def _generate_fast_structure(cls: type, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Compile ``structure(o, _=None) -> cls`` for a dict from the wire, built once at import."""
    hints = typing.get_type_hints(cls)
    namespace: dict[str, Any] = {
        "__cl": cls,
        "_D": Decimal,
        "_DD": _DIGITS_AND_DOT,
        "_MAXLEN": MAX_DECIMAL_DIGITS,
        "_decimal": _decimal,
        "_int": _int,
        "_float": _float,
        "_Mismatch": _Mismatch,
    }
    lines = ["def structure(o, _=None):"]
    names = []
    for index, field in enumerate(attrs.fields(cls)):
        var = f"v{index}"
        wire = _WIRE_NAMES[cls][field.name]
        optional = field.default is not attrs.NOTHING
        lines.append(f"    {var} = o.get({wire!r})" if optional else f"    {var} = o[{wire!r}]")
        hook = _FIELD_HOOKS.get((cls, field.name))
        if hook is not None:
            namespace[f"h{index}"] = hook
            lines.append(f"    {var} = h{index}({var}, None)")
        else:
            lines.extend(_check(hints[field.name], var, f"h{index}", namespace, conv))
        names.append(var)
    # Fill the slots directly: what attrs' frozen __init__ does for these classes (they have
    # no validators, converters or post-init), without its per-field setattr by name.
    namespace["__new"] = object.__new__
    lines.append("    self = __new(__cl)")
    for index, field in enumerate(attrs.fields(cls)):
        namespace[f"set{index}"] = cls.__dict__[field.name].__set__
        lines.append(f"    set{index}(self, {names[index]})")
    lines.append("    return self")
    source = "\n".join(lines)
    exec(compile(source, f"<asyncapi_client fast structure {cls.__name__}>", "exec"), namespace)
    function: Callable[[Any, Any], Any] = namespace["structure"]
    function.__doc__ = f"Structure a {cls.__name__} from a wire dict (generated).\n\n{source}"
    return function


def _check(
    type_: Any, var: str, name: str, ns: dict[str, Any], conv: cattrs.Converter
) -> list[str]:
    """Source lines that check ``var`` against ``type_`` and convert it in place."""
    if type_ is str:
        return [f"    if {var}.__class__ is not str: raise _Mismatch"]
    if type_ == str | None:
        return [f"    if {var} is not None and {var}.__class__ is not str: raise _Mismatch"]
    if type_ is int:
        return [f"    if {var}.__class__ is not int: {var} = _int({var}, None)"]
    if type_ is float:
        return [f"    if {var}.__class__ is not float: {var} = _float({var}, None)"]
    if type_ == float | None:
        return [
            f"    if {var} is not None and {var}.__class__ is not float:",
            f"        {var} = _float({var}, None)",
        ]
    if type_ == int | float:
        return [
            f"    if {var}.__class__ is not int and {var}.__class__ is not float: raise _Mismatch"
        ]
    if type_ is Decimal:
        # Digits and a dot only, at most 128 characters: Decimal() either raises or gives a
        # finite number within the bounds (<= 128 digits, adjusted exponent in (-128, 128)).
        return [
            f"    {var} = _D({var}) if {var}.__class__ is str and len({var}) <= _MAXLEN"
            f" and not {var}.strip(_DD) else _decimal({var}, None)"
        ]
    if isinstance(type_, type) and issubclass(type_, _OpenEnum):
        ns[f"{name}_get"] = dict(type_._value2member_map_).get
        ns[f"{name}_hook"] = _enum_hook(type_)
        return [f"    {var} = {name}_get({var}) or {name}_hook({var}, None)"]
    if type_ in _MODELS:
        ns[name] = conv.get_structure_hook(type_)
        return [f"    {var} = {name}({var})"]
    if _is_sequence(type_):
        (element,) = typing.get_args(type_)
        if element == Mapping[str, Any]:
            ns["_records"] = _records
            return [f"    {var} = _records({var}, None)"]
        ns[name] = conv.get_structure_hook(element)
        return [
            f"    if {var}.__class__ is not list: raise _Mismatch",
            f"    {var} = tuple([{name}(x) for x in {var}])",
        ]
    raise TypeError(f"no fast structure for {type_!r}")  # pragma: no cover - a new field type


class _Mismatch(Exception):
    """The fast path met something it does not accept; the detailed converter will say what."""


def _object_hook(structure: Callable[[Any, Any], T]) -> Callable[[Any, Any], T]:
    """Refuse a non-object before the generated hook indexes into it.

    Without this, a string or a list where an object belongs fails on its first field and the
    path names that field (``tokens[1].address``) instead of the value (``tokens[1]``). Only
    the detailed converter needs it: the fast one fails either way.
    """

    def structure_object(value: Any, type_: Any) -> T:
        if value.__class__ is not dict:
            raise _type_error(value, "an object")
        return structure(value, type_)

    return structure_object


_FAST = _make_converter(detailed=False)
_DETAILED = _make_converter(detailed=True)


# --- error paths --------------------------------------------------------------------------


def _error_path(exc: BaseException) -> tuple[str, BaseException]:
    """Follow a detailed cattrs error to its first leaf: (wire path, leaf exception)."""
    path = ""
    while True:
        if isinstance(exc, ClassValidationError):
            sub = exc.exceptions[0]
            attr_notes = [
                n for n in getattr(sub, "__notes__", ()) if isinstance(n, AttributeValidationNote)
            ]
            if attr_notes:
                name = attr_notes[-1].name
                wire = _WIRE_NAMES.get(exc.cl, {}).get(name, name)
                path += f".{wire}" if path else wire
            exc = sub
        elif isinstance(exc, IterableValidationError):
            sub = exc.exceptions[0]
            index_notes = [
                n for n in getattr(sub, "__notes__", ()) if isinstance(n, IterableValidationNote)
            ]
            if index_notes:
                path += f"[{index_notes[-1].index}]"
            exc = sub
        elif isinstance(exc, NestingError):
            return path + exc.where, exc
        else:
            return path, exc


def _describe(leaf: BaseException, path: str) -> str:
    if isinstance(leaf, NestingError):
        return f"bad value at {path}: {leaf.message}"
    if isinstance(leaf, KeyError):
        return f"required field {path or 'at the top level'} is missing"
    return f"bad value at {path or 'the top level'}: {leaf}"


def _not_an_object(value: Any) -> DecodeError:
    return DecodeError(
        f"expected a JSON object at the top level, got {type(value).__name__}", path=""
    )


# --- the decoders -------------------------------------------------------------------------


class Decoder(typing.Generic[T]):
    """Decode one operation's body: JSON bytes -> model, built once per operation.

    Compared and hashed by identity: a decoder is part of the request-coalescing key.
    """

    __slots__ = ("_structure", "cls", "unwrap")

    def __init__(self, cls: type[Any], unwrap: Callable[[Any], T] | None = None) -> None:
        self.cls = cls
        self.unwrap = unwrap
        self._structure: Callable[[Any, Any], Any] = _FAST.get_structure_hook(cls)

    def __repr__(self) -> str:
        return f"Decoder({self.cls.__name__})"

    def __call__(self, body: bytes) -> T:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"the body is not JSON: {exc}", path=None) from exc
        if data.__class__ is not dict:
            raise _not_an_object(data)
        try:
            value = self._structure(data, None)
        except Exception as fast_error:
            raise self._explain(data) from fast_error
        return value if self.unwrap is None else self.unwrap(value)

    def _explain(self, data: dict[str, Any]) -> DecodeError:
        """Run the detailed converter on the same data to name the bad field."""
        try:
            _DETAILED.structure(data, self.cls)
        except Exception as exc:
            path, leaf = _error_path(exc)
            error = DecodeError(_describe(leaf, path), path=path)
            error.__cause__ = exc
            return error
        # The detailed converter accepted what the fast one refused: a bug in the hooks.
        return DecodeError(
            "the body does not have the documented shape", path=""
        )  # pragma: no cover


def decoder(cls: type[T]) -> Decoder[T]:
    """The decoder for a top-level model class."""
    return Decoder(cls)


TOKENS: Decoder[Sequence[Token]] = Decoder(_TokensBody, lambda body: body.tokens)
MARKETS: Decoder[Sequence[Market]] = Decoder(_MarketsBody, lambda body: body.markets)
POOL: Decoder[Pool] = decoder(Pool)
USER: Decoder[UserProfile] = decoder(UserProfile)
ORDERS_PAGE: Decoder[OrdersPage] = decoder(OrdersPage)
LEADERBOARD_PAGE: Decoder[LeaderboardPage] = decoder(LeaderboardPage)


# --- models back to the wire (to_wire, to_json, the CLI) ----------------------------------


def _decimal_text(value: Decimal) -> str:
    """Decimal text as the wire had it: positional text never has a positive exponent, so
    ``"0.0000001"`` stays positional (``str`` would give ``1E-7``) and ``"1E+2"`` stays ``1E+2``.
    """
    exponent = value.as_tuple().exponent
    return str(value) if isinstance(exponent, int) and exponent > 0 else format(value, "f")


def _thaw(value: Any) -> Any:
    """A frozen record back to JSON types: FrozenDict -> dict, tuple -> list."""
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(item) for item in value]
    return value


def _make_unstructurer() -> cattrs.Converter:
    conv = cattrs.Converter()
    conv.register_unstructure_hook(Decimal, _decimal_text)
    for enum_cls in (Side, OrderStatus, MarketType):
        conv.register_unstructure_hook(enum_cls, lambda e: e._value_)
    conv.register_unstructure_hook_func(
        lambda t: t == Sequence[Mapping[str, Any]], lambda v: [_thaw(r) for r in v]
    )
    for cls in _MODELS:
        renames: dict[str, Any] = {
            name: override(rename=wire) for name, wire in _WIRE_NAMES[cls].items()
        }
        conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv, **renames))
    return conv


_UNSTRUCTURE = _make_unstructurer()


def to_wire(value: Any) -> Any:
    """A model, or a list of models, as the wire has it: camelCase names, decimals as exact
    text, enums as their values, balances and positions as plain dicts and lists.

    Typed for internal callers; the public, typed entry point is ``asyncapi_client.to_wire``.
    """
    if value.__class__ in _WIRE_NAMES:
        return _UNSTRUCTURE.unstructure(value, value.__class__)
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    raise TypeError(f"to_wire() takes a model or a sequence of models, not {type(value).__name__}")
