"""Bytes to models and back: leaf rules as functions, one cattrs converter, exact DecodeError paths.

Every rule about a JSON leaf (what a string, an int, a decimal, an enum value may be) is one
function in :data:`_LEAVES`; they are the structure hooks of the one cattrs converter
(:func:`make_converter`), which structures with detailed validation, so every error has the path
of its field (``orders[3].price``), and unstructures models back to the wire (:func:`to_wire`).

A body is decoded by the first of two paths that takes it:

1. the accelerated path (:func:`_accelerated`): msgspec parses the body into mirror Structs
   (C code: strict JSON types, camelCase names, 64-bit ints, the open enums), the decimal texts
   of the whole body are checked at once, and the attrs models are built: by
   ``msgspec.convert`` (C code again), or, on the CPython versions it was verified on, by the
   fast build (:func:`_fast_builder`). It accepts only bodies that the rules accept, and gives
   the same models; anything else it passes on.
2. the general path: ``orjson.loads`` and the converter, which accepts or names the bad field.

Wire names are camelCase, derived from the snake_case attribute names. Unknown fields are
ignored; missing required fields, wrong types and numeric strings that are not bounded,
finite decimal numbers are errors. No source is generated here (attrs writes the builders'
``__init__``, as for any attrs class). Neither build runs a model's own ``__init__``, so the
models they build must have no validators, converters or pre/post-init hooks, which is
checked at import (:func:`_check_built_without_init`).
"""

from __future__ import annotations

import collections.abc
import decimal
import functools
import itertools
import operator
import typing
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Final, TypeVar

import attrs
import cattrs
import msgspec
import orjson
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._errors import DecodeError
from ._fastpaths import FAST_BUILD, builder_class
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

__all__ = [
    "MAX_DECIMAL_DIGITS",
    "MAX_DECIMAL_EXPONENT",
    "MAX_DEPTH",
    "MAX_PATH",
    "Decoder",
    "camel",
    "configure_converter",
    "decoder",
    "make_converter",
    "to_wire",
]

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
_ENUMS: tuple[type[_OpenEnum], ...] = (Side, OrderStatus, MarketType)
_RECORDS: Final = Sequence[Mapping[str, Any]]

#: attribute name -> wire name, per class (used for both directions and for error paths).
_WIRE_NAMES: dict[type, dict[str, str]] = {
    cls: {a.name: camel(a.name) for a in attrs.fields(cls)} for cls in _MODELS
}


# --- the leaf rules: each converts a JSON value or raises with a message ----------------------

#: Bounds on a decimal from the wire (a uint256 at 18 decimals has 78 digits). Unbounded, a
#: 15-byte "1e-999999999" becomes a Decimal that format(d, "f") spells with 10**9 zeros.
MAX_DECIMAL_DIGITS: Final = 128
MAX_DECIMAL_EXPONENT: Final = 128
_DIGITS_AND_DOT: Final = "0123456789."
_EXACT_FLOAT_INT: Final = 2**53

#: Decimal(text) in a context that cannot round (a text is at most 128 digits) and refuses what
#: is not a number, whatever the caller's context; create_decimal() also costs less than
#: Decimal() (positional argument parsing instead of keywords).
_EXACT: Final = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[InvalidOperation],
)
_exact: Final = _EXACT.create_decimal


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad(value: object, expected: str) -> typing.NoReturn:
    raise TypeError(f"expected {expected}, got {type(value).__name__} {_preview(value)}")


def _str(value: Any, _: Any = None) -> str:
    if value.__class__ is not str:
        _bad(value, "a string")
    return value


def _int(value: Any, _: Any = None) -> int:
    """An int; an integral float while it is exact (JSON integers past 64 bits reach us as
    floats that have already lost digits, and are refused rather than returned wrong)."""
    if value.__class__ is int:
        return value
    if value.__class__ is float and value.is_integer() and abs(value) <= _EXACT_FLOAT_INT:
        return int(value)
    _bad(value, "an integer")


def _float(value: Any, _: Any = None) -> float:
    if value.__class__ is float:
        return value
    if value.__class__ is int:
        return float(value)
    _bad(value, "a number")


def _number(value: Any, _: Any = None) -> int | float:
    if value.__class__ is int or value.__class__ is float:
        return value
    _bad(value, "a number")


def _optional(rule: Callable[[Any, Any], T]) -> Callable[[Any, Any], T | None]:
    def structure(value: Any, _: Any = None) -> T | None:
        return None if value is None else rule(value, None)

    return structure


def _decimal(value: Any, _: Any = None) -> Decimal:
    """A bounded, finite decimal number from text: no NaN, Infinity, blanks, ``_`` or
    non-ASCII digits, at most 128 significant digits, adjusted exponent within +-128."""
    if value.__class__ is not str:
        _bad(value, "a decimal number as a string")
    if len(value) <= MAX_DECIMAL_DIGITS and not value.strip(_DIGITS_AND_DOT):
        # Digits and a dot only, at most 128 characters: a number within the bounds, or not
        # a number at all ("", ".", "1.2.3").
        try:
            return _exact(value)
        except InvalidOperation:
            raise ValueError(f"expected a finite decimal number, got {_preview(value)}") from None
    # Anything but plain digits and a dot must be ASCII with no underscores and no
    # surrounding blanks, which Decimal() would otherwise accept.
    if value.isascii() and "_" not in value and value == value.strip():
        try:
            number = _exact(value)
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


def _records(value: Any, _: Any = None) -> Sequence[Mapping[str, Any]]:
    """Balances or positions: an array of objects, frozen, at most MAX_NESTING deep."""
    if value.__class__ is not list:
        _bad(value, "an array")
    return freeze_records(value)


def _open_enum(cls: type[_OpenEnum]) -> Callable[[Any, Any], Any]:
    """A string as a member of ``cls``, or as a value it does not know (see _OpenEnum)."""
    known = dict(cls._value2member_map_).get
    expected = f"a {cls.__name__} string"

    def structure(value: Any, _: Any = None) -> Any:
        if value.__class__ is not str:
            _bad(value, expected)
        return known(value) or cls(value)

    return structure


def _cursor(value: Any, _: Any = None) -> str | None:
    """A page's cursor: an empty or null cursor means "no further page"."""
    if value is None:
        return None
    return _str(value) or None


#: The one table of leaf rules, by field type.
_LEAVES: dict[Any, Callable[..., Any]] = {
    str: _str,
    int: _int,
    float: _float,
    int | float: _number,
    str | None: _optional(_str),
    float | None: _optional(_float),
    Decimal: _decimal,
    _RECORDS: _records,
    **{enum_cls: _open_enum(enum_cls) for enum_cls in _ENUMS},
}

#: Per field, a rule that replaces its type's.
_FIELD_RULES: dict[tuple[type, str], Callable[..., Any]] = {
    (OrdersPage, "cursor"): _cursor,
}


# --- the one converter: cattrs' preconf pattern ---------------------------------------------


def _is_sequence(type_: Any) -> bool:
    return typing.get_origin(type_) is collections.abc.Sequence


def _sequence_hook(type_: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """A JSON array as a tuple, each element's error noted with its index."""
    (element_type,) = typing.get_args(type_)
    element = converter.get_structure_hook(element_type)

    def structure(value: Any, _: Any) -> tuple[Any, ...]:
        if value.__class__ is not list:
            _bad(value, "an array")
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

    return structure


def _object_hook(structure: Callable[[Any, Any], T]) -> Callable[[Any, Any], T]:
    """Refuse a non-object before the generated hook indexes into it.

    Without this, a string or a list where an object belongs fails on its first field and the
    path names that field (``tokens[1].address``) instead of the value (``tokens[1]``).
    """

    def structure_object(value: Any, type_: Any) -> T:
        if value.__class__ is not dict:
            _bad(value, "an object")
        return structure(value, type_)

    return structure_object


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


def configure_converter(conv: cattrs.Converter) -> None:
    """Configure ``conv`` for the wire, both ways (as cattrs' ``preconf`` modules do).

    Structure: the leaf rules as hooks, JSON arrays as tuples, models from camelCase objects
    (built by their ``__init__``). Unstructure: camelCase names, decimals as exact text, enums
    as their values, frozen records as plain dicts and lists.
    """
    for type_, rule in _LEAVES.items():
        if type_ is _RECORDS:
            conv.register_structure_hook_func(lambda t: t == _RECORDS, rule)
        else:
            conv.register_structure_hook(type_, rule)
    conv.register_structure_hook_factory(
        lambda t: _is_sequence(t) and t != _RECORDS, _sequence_hook
    )
    conv.register_unstructure_hook(Decimal, _decimal_text)
    for enum_cls in _ENUMS:
        conv.register_unstructure_hook(enum_cls, lambda e: e._value_)
    conv.register_unstructure_hook_func(lambda t: t == _RECORDS, lambda v: [_thaw(r) for r in v])
    for cls in _MODELS:
        names = _WIRE_NAMES[cls]
        structure_overrides: dict[str, Any] = {
            field.name: override(
                rename=names[field.name], struct_hook=_FIELD_RULES.get((cls, field.name))
            )
            for field in attrs.fields(cls)
        }
        structure: Callable[[Any, Any], Any] = make_dict_structure_fn(
            cls, conv, _cattrs_detailed_validation=True, **structure_overrides
        )
        conv.register_structure_hook(cls, _object_hook(structure))
        unstructure_overrides: dict[str, Any] = {
            name: override(rename=wire) for name, wire in names.items()
        }
        conv.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, conv, **unstructure_overrides)
        )


def make_converter() -> cattrs.Converter:
    """A new converter configured for the wire (detailed validation, extra keys ignored)."""
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    configure_converter(conv)
    return conv


@functools.cache
def _converter() -> cattrs.Converter:
    """The one converter, made on first use (a body the accelerated path passes on, ``to_wire``):
    building its hooks is about 35 ms at import that a process decoding only bodies the
    accelerated path takes need not pay."""
    return make_converter()


# --- the accelerated path: msgspec parses and checks types, msgspec.convert builds -----------
#
# msgspec cannot hold every rule (it reads Decimal("NaN"), " 1" and "1_000", takes ints of
# any size, and cannot rename attrs fields), so it gets a mirror of each model as a Struct
# whose fields are only what it checks exactly as the rules do: strings, 64-bit ints, floats
# (ints become floats), nulls, and the open enums (msgspec looks known values up and calls
# ``_missing_`` for the rest, as the enum itself does). Decimals stay text until they are
# checked here (plain digits and a dot, at most 128 characters: the rule's own first case).
# The attrs models are then built from the mirror by the fast build (below) or by
# ``msgspec.convert``, by attribute name. Whatever the mirror or the check refuses goes the
# general way, which accepts or explains.
#
# One difference is deliberate: msgspec skips the fields the client does not know without
# converting their numbers, so a number too large for a float (1e400) in such a field is
# ignored like the field, where orjson refuses the whole body as not JSON.

#: How deeply a body may nest arrays and objects (the top object is level 1): deeper, it is a
#: DecodeError on every path and every Python. The general path's parser (orjson, from 3.9.15,
#: the floor) holds this bound itself; msgspec's limit follows the interpreter's C recursion
#: limit (about 1,000 levels on 3.11, more on 3.12 and later), so the accelerated path only
#: skips unknown values where they cannot reach the bound: in a body shorter than
#: 2 * (MAX_DEPTH + 1) bytes. A longer body goes through a mirror that has no unknown fields to
#: skip (forbid_unknown_fields), where the nesting is the models' own; with unknown fields, it
#: goes the general way.
MAX_DEPTH: Final = 1024
_SHORT: Final = 2 * (MAX_DEPTH + 1)

_I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_DECIMAL_TEXT = Annotated[str, msgspec.Meta(max_length=MAX_DECIMAL_DIGITS)]
_MIRROR_LEAVES: dict[Any, Any] = {
    str: str,
    int: _I64,
    float: float,
    int | float: _I64 | float,
    str | None: str | None,
    float | None: float | None,
    Decimal: _DECIMAL_TEXT,
}

#: What the decimal texts of a body, joined, may hold on the accelerated path (bytes deleted).
_DIGITS_AND_DOT_BYTES: Final = _DIGITS_AND_DOT.encode()


class _Unsupported(Exception):
    """A model the accelerated path does not mirror (free-form records, nested sequences)."""


class _Refused(Exception):
    """The accelerated path does not take this body; the general path decides."""


def _check_built_without_init(cls: type) -> None:
    """Raise TypeError if ``cls`` does work in ``__init__`` that the accelerated path would skip.

    Neither ``msgspec.convert`` (it sets the attributes) nor the fast build (its builder's
    ``__init__`` is attrs' plain one) runs the model's ``__init__``: a validator, a converter or
    an ``__attrs_pre_init__``/``__attrs_post_init__`` would be skipped silently for every body
    the accelerated path decodes. Called at import for every model it builds.
    """
    for field in attrs.fields(cls):
        if field.validator is not None or field.converter is not None:
            kind = "a validator" if field.validator is not None else "a converter"
            raise TypeError(
                f"{cls.__name__}.{field.name} has {kind}, which the accelerated decoder would"
                " skip (it does not run the model's __init__): build the model by its"
                " __init__ in _decode, or drop the accelerated path for it"
            )
    for hook in ("__attrs_pre_init__", "__attrs_post_init__"):
        if hasattr(cls, hook):
            raise TypeError(
                f"{cls.__name__} has {hook}, which the accelerated decoder would skip"
                " (it does not run the model's __init__)"
            )


def _mirror(cls: type, top: bool, strict: bool, built: set[type]) -> Any:
    """A msgspec Struct with the wire names of ``cls`` (its attribute names are the model's);
    ``built`` gets the models msgspec.convert will build. ``strict``: no unknown fields."""
    hints = typing.get_type_hints(cls)
    fields: list[Any] = []
    for field in attrs.fields(cls):
        type_ = hints[field.name]
        if (cls, field.name) in _FIELD_RULES and not top:  # pragma: no cover - none today
            raise _Unsupported(f"{cls.__name__}.{field.name}")  # its rule would not be applied
        if type_ in _MIRROR_LEAVES:
            mirrored = _MIRROR_LEAVES[type_]
        elif type_ in _ENUMS:
            mirrored = type_
        elif type_ in _WIRE_NAMES:
            mirrored = _mirror(type_, False, strict, built)
            built.add(type_)
        elif _is_sequence(type_) and top and typing.get_args(type_)[0] in _WIRE_NAMES:
            (element,) = typing.get_args(type_)
            mirrored = list[_mirror(element, False, strict, built)]  # type: ignore[misc]
            built.add(element)
        else:
            raise _Unsupported(f"{cls.__name__}.{field.name}: {type_!r}")
        if field.default is attrs.NOTHING:
            fields.append((field.name, mirrored))
        else:
            fields.append((field.name, mirrored, field.default))
    return msgspec.defstruct(
        f"_{cls.__name__}Wire",
        fields,
        rename=_WIRE_NAMES.get(cls) or {f.name: camel(f.name) for f in attrs.fields(cls)},
        gc=False,
        kw_only=True,
        forbid_unknown_fields=strict,
    )


def _decimal_paths(cls: type, prefix: str = "") -> list[str]:
    """The attribute paths of the decimal fields of ``cls`` and of the models inside it
    (``price``, ``base_token.total_supply``, ``orders[].price``)."""
    hints = typing.get_type_hints(cls)
    paths: list[str] = []
    for field in attrs.fields(cls):
        type_ = hints[field.name]
        if type_ is Decimal:
            paths.append(prefix + field.name)
        elif type_ in _WIRE_NAMES:
            paths += _decimal_paths(type_, f"{prefix}{field.name}.")
        elif _is_sequence(type_) and typing.get_args(type_)[0] in _WIRE_NAMES:
            paths += _decimal_paths(typing.get_args(type_)[0], f"{prefix}{field.name}[].")
    return paths


def _decimal_texts(paths: list[str]) -> Callable[[Any], str] | None:
    """``texts(mirror) -> str``: every decimal text of a mirror, joined, iterated in C
    (``attrgetter``, ``map``, ``chain``): a Python loop over 10,000 orders would cost a fifth
    of the decode."""
    top = [path for path in paths if "[]" not in path]
    nested: dict[str, list[str]] = {}
    for path in paths:
        if "[]" in path:
            sequence, rest = path.split("[].", 1)
            nested.setdefault(sequence, []).append(rest)
    getters: list[Callable[[Any], str]] = []
    if top:
        getters.append(_joined(operator.attrgetter(*top), len(top) > 1))
    for sequence, inner in nested.items():
        getters.append(_joined_items(operator.attrgetter(sequence), inner))
    if not getters:
        return None
    if len(getters) == 1:
        return getters[0]
    return lambda mirror: "".join([get(mirror) for get in getters])  # pragma: no cover - none today


def _joined(get: Callable[[Any], Any], several: bool) -> Callable[[Any], str]:
    """``get(mirror)``, a text or (``several``) a tuple of texts, as one text."""
    if not several:
        return get
    return lambda mirror: "".join(get(mirror))


def _joined_items(get_items: Callable[[Any], Any], paths: list[str]) -> Callable[[Any], str]:
    """The texts at ``paths`` of every item of ``get_items(mirror)``, as one text."""
    get_texts: Callable[[Any], Any] = operator.attrgetter(*paths)
    if len(paths) == 1:
        return lambda mirror: "".join(map(get_texts, get_items(mirror)))
    chain = itertools.chain.from_iterable
    return lambda mirror: "".join(chain(map(get_texts, get_items(mirror))))


def _tuple_of(element: type) -> Callable[[Any], tuple[Any, ...]]:
    """A list of mirrors as a tuple of ``element`` models."""
    as_list: Any = list[element]  # type: ignore[valid-type]
    convert = msgspec.convert

    def build(items: Any) -> tuple[Any, ...]:
        return tuple(convert(items, as_list, from_attributes=True))

    return build


def _refusing(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``rule`` for the accelerated path: a value it refuses (TypeError, ValueError) makes
    the body one the general path decides (and names the field)."""

    def checked(value: Any) -> Any:
        try:
            return rule(value)
        except (TypeError, ValueError) as exc:
            raise _Refused from exc

    return checked


def _public_builder(cls: type) -> Callable[[Any], Any]:
    """``build(mirror) -> cls`` on public APIs: ``msgspec.convert`` for the whole model, or,
    where a field of the top model needs a tuple or a rule of its own, the model's
    ``__init__`` over its fields (each nested model by ``msgspec.convert``)."""
    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    convert = msgspec.convert
    if not any(_is_sequence(hints[f.name]) or (cls, f.name) in _FIELD_RULES for f in fields):
        return functools.partial(convert, type=cls, from_attributes=True)
    steps: list[tuple[Callable[[Any], Any], Callable[[Any], Any] | None]] = []
    for field in fields:
        type_ = hints[field.name]
        step: Callable[[Any], Any] | None = _FIELD_RULES.get((cls, field.name))
        if step is not None:
            step = _refusing(step)
        elif _is_sequence(type_):
            step = _tuple_of(typing.get_args(type_)[0])
        elif type_ in _WIRE_NAMES:  # pragma: no cover - no top model with a list has one today
            step = functools.partial(convert, type=type_, from_attributes=True)
        steps.append((operator.attrgetter(field.name), step))

    def build(mirror: Any) -> Any:
        return cls(*[get(mirror) if step is None else step(get(mirror)) for get, step in steps])

    return build


# --- the fast build (its gate and its layout trick in _fastpaths.py) and the public build ------
#
# msgspec.convert sets a model's fields one by one by name (about 1 us for a Token). The fast
# build makes each model as an instance of a private subclass whose ``__init__`` attrs writes
# with plain attribute stores (the subclass adds no slots and lets its slots be set: the
# interpreter's specialised slot stores), decimals and nested models made by that
# ``__init__``'s converters, and then makes it the contract's class by ``__class__``
# assignment (same layout). Chosen once at import: on the CPython versions the whole suite was
# run on with it and without it (``make matrix``), unless ASYNCAPI_CLIENT_PUBLIC_ONLY is set.


@functools.cache
def _fast_builder_class(cls: type) -> type:
    """The builder subclass of ``cls``, its converters the leaf rules and nested builds."""
    hints = typing.get_type_hints(cls)
    converters: dict[str, Callable[[Any], Any]] = {}
    for field in attrs.fields(cls):
        type_ = hints[field.name]
        rule = _FIELD_RULES.get((cls, field.name))
        if rule is not None:
            converters[field.name] = _refusing(rule)
        elif type_ is Decimal:
            converters[field.name] = _exact
        elif type_ in _WIRE_NAMES:
            converters[field.name] = _fast_builder(type_)
        elif _is_sequence(type_):
            converters[field.name] = _fast_tuple(typing.get_args(type_)[0])
    try:
        return builder_class(cls, converters)
    except TypeError as exc:  # pragma: no cover - a model with another layout
        raise _Unsupported(f"{cls.__name__}: {exc}") from exc


def _fast_builder(cls: type) -> Callable[[Any], Any]:
    """``build(mirror) -> cls`` by its builder subclass (see above); _Unsupported if it cannot."""
    builder = _fast_builder_class(cls)
    astuple = msgspec.structs.astuple  # the mirror's fields are the model's, in its order

    def build(mirror: Any) -> Any:
        model = builder(*astuple(mirror))
        model.__class__ = cls
        return model

    return build


def _fast_tuple(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """``build_all(mirrors) -> tuple of cls``: the builders called from C (``starmap``), and one
    loop that gives each its class (no Python call per item but the builder's ``__init__``)."""
    builder = _fast_builder_class(cls)
    astuple = msgspec.structs.astuple
    starmap = itertools.starmap

    def build_all(items: Any) -> tuple[Any, ...]:
        models = tuple(starmap(builder, map(astuple, items)))
        for model in models:
            model.__class__ = cls
        return models

    return build_all


#: The mirror decoder of each accelerated model, the one long bodies go through (for
#: ``benchmarks._stages``).
_MIRRORS: dict[type, msgspec.json.Decoder[Any]] = {}

_getcontext: Final = decimal.getcontext

#: Every model an accelerated decoder builds without running its ``__init__`` (all checked by
#: :func:`_check_built_without_init`).
_BUILT_WITHOUT_INIT: set[type] = set()


#: What the accelerated path raises for a body it does not take: then the general path decides
#: (anything else is a bug of the accelerated path, and is raised, so that a test fails).
#: msgspec raises RecursionError for arrays nested past its own limit (the general path
#: bounds nesting and names the field).
_REFUSALS: Final = (
    _Refused,
    msgspec.MsgspecError,
    UnicodeDecodeError,
    InvalidOperation,
    RecursionError,
)


def _accelerated(cls: type, fast: bool = FAST_BUILD) -> Callable[[bytes], Any] | None:
    """``accelerated(body) -> cls``, or None for a model the mirror cannot hold; raises on any
    body it does not take. ``fast``: the fast build where it can be had, else the public one."""
    built: set[type] = {cls}
    try:
        lenient = msgspec.json.Decoder(_mirror(cls, True, False, built)).decode
        strict = _MIRRORS[cls] = msgspec.json.Decoder(_mirror(cls, True, True, set()))
    except _Unsupported:
        return None
    for model in built:
        _check_built_without_init(model)
    _BUILT_WITHOUT_INIT.update(built)
    texts = _decimal_texts(_decimal_paths(cls))
    build: Callable[[Any], Any] | None = None
    if fast:
        try:
            build = _fast_builder(cls)
        except _Unsupported:  # pragma: no cover - every model has a builder today
            build = None
    # msgspec.convert makes a Decimal in the caller's context: where that returns NaN for a text
    # that is not a number ("1.2.3") instead of raising, the public build passes the body on.
    # The fast build makes them in an exact context of its own.
    check_context = build is None and texts is not None
    if build is None:
        build = _public_builder(cls)
    strict_decode = strict.decode
    delete = _DIGITS_AND_DOT_BYTES

    def accelerated(body: bytes) -> Any:
        # msgspec does not validate the UTF-8 of the strings it skips (unknown fields); the
        # general path refuses such a body, so this one passes it on.
        if not body.isascii():
            body.decode()
        mirror = lenient(body) if len(body) < _SHORT else strict_decode(body)
        if texts is not None and texts(mirror).encode().translate(None, delete):
            raise _Refused
        if check_context and not _getcontext().traps[InvalidOperation]:
            raise _Refused
        return build(mirror)

    accelerated.__doc__ = f"Decode a {cls.__name__} from JSON bytes (the accelerated path)."
    return accelerated


# --- error paths --------------------------------------------------------------------------

#: A DecodeError's path is at most this many characters: past it, its head (the field of the
#: model) and its tail (where the value went wrong) are kept. Keys are cut on the way in
#: (``_models.path_key``); this bounds a path through many of them.
MAX_PATH: Final = 1000


def _bounded(path: str) -> str:
    if len(path) <= MAX_PATH:
        return path
    head = MAX_PATH // 3
    return path[:head] + "…" + path[len(path) - (MAX_PATH - head - 1) :]


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

    __slots__ = ("_accelerated", "cls", "unwrap")

    def __init__(self, cls: type[Any], unwrap: Callable[[Any], T] | None = None) -> None:
        self.cls = cls
        self.unwrap = unwrap
        self._accelerated = _accelerated(cls)

    def __repr__(self) -> str:
        return f"Decoder({self.cls.__name__})"

    def __call__(self, body: bytes) -> T:
        if self._accelerated is not None:
            try:
                value = self._accelerated(body)
            except _REFUSALS:  # not for the accelerated path: the general path decides
                pass
            else:
                return value if self.unwrap is None else self.unwrap(value)
        return self.general(body)

    def general(self, body: bytes) -> T:
        """The general path alone: orjson, then the converter, which names a bad field."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"the body is not JSON: {exc}", path=None) from exc
        if data.__class__ is not dict:
            raise _not_an_object(data)
        try:
            value = _converter().structure(data, self.cls)
        except Exception as exc:
            path, leaf = _error_path(exc)
            path = _bounded(path)
            raise DecodeError(_describe(leaf, path), path=path) from exc
        return value if self.unwrap is None else self.unwrap(value)


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


def from_wire(data: Any, cls: type[T]) -> T:
    """A model from its wire form (a dict as ``to_wire`` gives it), by the general path:
    what a watch's state kept, read back."""
    value: T = _converter().structure(data, cls)
    return value


def to_wire(value: Any) -> Any:
    """A model, or a list of models, as the wire has it: camelCase names, decimals as exact
    text, enums as their values, balances and positions as plain dicts and lists.

    Typed for internal callers; the public, typed entry point is ``asyncapi_client.to_wire``.
    """
    if value.__class__ in _WIRE_NAMES:
        return _converter().unstructure(value, value.__class__)
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    raise TypeError(f"to_wire() takes a model or a sequence of models, not {type(value).__name__}")
