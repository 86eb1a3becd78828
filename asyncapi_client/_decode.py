"""Bytes to models and back: one table of leaf rules, one cattrs converter, exact DecodeError paths.

Every rule about a JSON leaf (what a string, an int, a decimal, an enum value may be) is
written once, in :data:`_LEAVES`, as a few lines of Python source. Two things are compiled
from that text at import:

* the cattrs hooks of the one converter (:func:`make_converter`), which structures with
  detailed validation (so every error has the path of its field: ``orders[3].price``) and
  unstructures models back to the wire (:func:`to_wire`);
* one generated structure function per model (the general fast path), which inlines the same
  lines so that a field costs no hook call.

A body is decoded by the first of these that applies:

1. the accelerated path (:class:`_Accelerated`): msgspec parses the body into mirror Structs
   (C code: strict JSON types, camelCase names, 64-bit ints), decimals are checked as text, and
   ``msgspec.convert`` builds the attrs models (C code again). It accepts only bodies that the
   rules accept, and gives the same models; anything else it passes on.
2. the general fast path: ``orjson.loads`` and the generated functions.
3. when those refuse, the detailed converter runs on the same data to name the field.

Wire names are camelCase, derived from the snake_case attribute names. Unknown fields are
ignored; missing required fields, wrong types and numeric strings that are not bounded,
finite decimal numbers are errors.
"""

from __future__ import annotations

import collections.abc
import decimal
import functools
import itertools
import textwrap
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


# --- the slow helpers the rules call: they either convert or raise with a message -----------

#: Bounds on a decimal from the wire (a uint256 at 18 decimals has 78 digits). Unbounded, a
#: 15-byte "1e-999999999" becomes a Decimal that format(d, "f") spells with 10**9 zeros.
MAX_DECIMAL_DIGITS: Final = 128
MAX_DECIMAL_EXPONENT: Final = 128
_DIGITS_AND_DOT: Final = "0123456789."
_EXACT_FLOAT_INT: Final = 2**53


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad(value: object, expected: str) -> typing.NoReturn:
    raise TypeError(f"expected {expected}, got {type(value).__name__} {_preview(value)}")


def _int(value: Any) -> int:
    # An integral float is fine while it is exact; JSON integers past 64 bits reach us as
    # floats that have already lost digits, and are refused rather than returned wrong.
    if value.__class__ is float and value.is_integer() and abs(value) <= _EXACT_FLOAT_INT:
        return int(value)
    _bad(value, "an integer")


def _float(value: Any) -> float:
    if value.__class__ is int:
        return float(value)
    _bad(value, "a number")


def _decimal(value: Any) -> Decimal:
    """A bounded, finite decimal number from text: no NaN, Infinity, blanks, ``_`` or
    non-ASCII digits, at most 128 significant digits, adjusted exponent within +-128."""
    if value.__class__ is not str:
        _bad(value, "a decimal number as a string")
    # Anything but plain digits and a dot must be ASCII with no underscores and no
    # surrounding blanks, which Decimal() would otherwise accept.
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


def _records(value: Any) -> Sequence[Mapping[str, Any]]:
    """Balances or positions: an array of objects, frozen, at most MAX_NESTING deep."""
    if value.__class__ is not list:
        _bad(value, "an array")
    return freeze_records(value)


def _open_enum(cls: type[_OpenEnum]) -> Callable[[str], Any]:
    def structure(value: str) -> Any:
        return cls(value)  # keeps values the enum does not know (see _OpenEnum)

    return structure


# --- the one table of leaf rules ------------------------------------------------------------
#
# Each rule is Python source over a variable ``{v}`` holding the JSON value: afterwards ``{v}``
# holds the structured value, or the source raised. The common case is inline (a class check,
# Decimal() on plain digits); the rest goes to a helper above that converts or explains.

_HELPERS: dict[str, Any] = {
    "_bad": _bad,
    "_int": _int,
    "_float": _float,
    "_decimal": _decimal,
    "_records": _records,
    "_D": Decimal,
    "_DD": _DIGITS_AND_DOT,
    "_MAXLEN": MAX_DECIMAL_DIGITS,
}

_LEAVES: dict[Any, str] = {
    str: "if {v}.__class__ is not str: _bad({v}, 'a string')",
    int: "if {v}.__class__ is not int: {v} = _int({v})",
    float: "if {v}.__class__ is not float: {v} = _float({v})",
    int | float: (
        "if {v}.__class__ is not int and {v}.__class__ is not float: _bad({v}, 'a number')"
    ),
    # Digits and a dot only, at most 128 characters: Decimal() either raises or gives a
    # finite number within the bounds (<= 128 digits, adjusted exponent in (-128, 128)).
    Decimal: (
        "{v} = _D({v}) if {v}.__class__ is str and len({v}) <= _MAXLEN"
        " and not {v}.strip(_DD) else _decimal({v})"
    ),
    _RECORDS: "{v} = _records({v})",
}
for _enum in _ENUMS:
    _HELPERS[f"_{_enum.__name__}_get"] = dict(_enum._value2member_map_).get
    _HELPERS[f"_{_enum.__name__}_open"] = _open_enum(_enum)
    _LEAVES[_enum] = (
        f"{{v}} = _{_enum.__name__}_get({{v}}) or _{_enum.__name__}_open({{v}})"
        f" if {{v}}.__class__ is str else _bad({{v}}, 'a {_enum.__name__} string')"
    )
for _leaf in (str, float):
    _LEAVES[_leaf | None] = "if {v} is not None:\n    " + _LEAVES[_leaf]

#: Per field, a rule that replaces its type's: an empty or null cursor means "no further page".
_FIELD_RULES: dict[tuple[type, str], str] = {
    (OrdersPage, "cursor"): (
        "if {v} is not None:\n"
        "    if {v}.__class__ is not str: _bad({v}, 'a string')\n"
        "    {v} = {v} or None"
    ),
}


def _rule(cls: type, field: attrs.Attribute[Any], type_: Any) -> str | None:
    return _FIELD_RULES.get((cls, field.name)) or _LEAVES.get(type_)


def _compile(source: str, name: str, namespace: dict[str, Any]) -> Any:
    exec(compile(source, f"<asyncapi_client {name}>", "exec"), namespace)
    return namespace[name]


def _leaf_hook(rule: str, name: str) -> Callable[[Any, Any], Any]:
    """A cattrs structure hook compiled from a leaf rule."""
    body = textwrap.indent(rule.format(v="v"), "    ")
    source = f"def {name}(v, _):\n{body}\n    return v"
    hook: Callable[[Any, Any], Any] = _compile(source, name, dict(_HELPERS))
    return hook


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

    Structure: the leaf rules as hooks, JSON arrays as tuples, models from camelCase objects.
    Unstructure: camelCase names, decimals as exact text, enums as their values, frozen
    records as plain dicts and lists.
    """
    for type_, rule in _LEAVES.items():
        hook = _leaf_hook(rule, f"structure_{getattr(type_, '__name__', 'leaf')}")
        if type_ is _RECORDS:
            conv.register_structure_hook_func(lambda t: t == _RECORDS, hook)
        else:
            conv.register_structure_hook(type_, hook)
    conv.register_structure_hook_factory(
        lambda t: _is_sequence(t) and t != _RECORDS, _sequence_hook
    )
    conv.register_unstructure_hook(Decimal, _decimal_text)
    for enum_cls in _ENUMS:
        conv.register_unstructure_hook(enum_cls, lambda e: e._value_)
    conv.register_unstructure_hook_func(lambda t: t == _RECORDS, lambda v: [_thaw(r) for r in v])
    for cls in _MODELS:
        names = _WIRE_NAMES[cls]
        structure_overrides: dict[str, Any] = {}
        for field in attrs.fields(cls):
            special = _FIELD_RULES.get((cls, field.name))
            field_hook = None if special is None else _leaf_hook(special, f"structure_{field.name}")
            structure_overrides[field.name] = override(
                rename=names[field.name], struct_hook=field_hook
            )
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
    """The one detailed converter, made on first use (a refused body, ``to_wire``): building its
    hooks is about 35 ms at import that a process decoding only good bodies need not pay."""
    return make_converter()


# --- the general fast path: one generated function per model ---------------------------------
#
# The same rules, inlined: a field costs a dict lookup and a class check, not a hook call.
# These functions only have to fail on bad input, not explain it: the converter does that.


def _generate(cls: type, done: dict[type, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """Compile ``structure(o) -> cls`` for a dict from the wire (nested models first)."""
    if cls in done:
        return done[cls]
    hints = typing.get_type_hints(cls)
    namespace: dict[str, Any] = dict(_HELPERS)
    namespace.update(__cls=cls, __new=object.__new__)
    lines = [f"def structure_{cls.__name__}(o):"]
    for index, field in enumerate(attrs.fields(cls)):
        var, type_ = f"v{index}", hints[field.name]
        wire = _WIRE_NAMES[cls][field.name]
        optional = field.default is not attrs.NOTHING
        lines.append(f"    {var} = o.get({wire!r})" if optional else f"    {var} = o[{wire!r}]")
        rule = _rule(cls, field, type_)
        if rule is not None:
            lines.append(textwrap.indent(rule.format(v=var), "    "))
        elif type_ in _WIRE_NAMES:
            namespace[f"s{index}"] = _generate(type_, done)
            lines.append(f"    {var} = s{index}({var})")
        elif _is_sequence(type_) and typing.get_args(type_)[0] in _WIRE_NAMES:
            namespace[f"s{index}"] = _generate(typing.get_args(type_)[0], done)
            lines.append(f"    if {var}.__class__ is not list: _bad({var}, 'an array')")
            lines.append(f"    {var} = tuple([s{index}(x) for x in {var}])")
        else:  # pragma: no cover - a field type no rule knows: a bug found at import
            raise TypeError(f"no rule for {cls.__name__}.{field.name}: {type_!r}")
    # Fill the slots directly: what attrs' frozen __init__ does for these classes (they have
    # no validators or post-init; UserProfile's converters are the rules' own), without its
    # per-field setattr by name.
    lines.append("    self = __new(__cls)")
    for index, field in enumerate(attrs.fields(cls)):
        namespace[f"set{index}"] = cls.__dict__[field.name].__set__
        lines.append(f"    set{index}(self, v{index})")
    lines.append("    return self")
    source = "\n".join(lines)
    function: Callable[[Any], Any] = _compile(source, f"structure_{cls.__name__}", namespace)
    function.__doc__ = f"Structure a {cls.__name__} from a wire dict (generated).\n\n{source}"
    done[cls] = function
    return function


_GENERATED: dict[type, Callable[[Any], Any]] = {}
for _cls in _MODELS:
    _generate(_cls, _GENERATED)


# --- the accelerated path: msgspec parses and checks types, generated code builds -----------
#
# msgspec cannot hold every rule (it reads Decimal("NaN"), " 1" and "1_000", takes ints of
# any size, and cannot rename attrs fields), so it gets a mirror of each model as a Struct
# whose fields are only what it checks exactly as the rules do: strings, 64-bit ints, floats
# (ints become floats), nulls, and the open enums (msgspec looks known values up and calls
# ``_missing_`` for the rest, as the enum itself does). Decimals stay text until they are
# checked here (plain digits and a dot, at most 128 characters: the rules' own inline case).
# A function generated per model then builds the attrs models from the mirror. Whatever the
# mirror or the check refuses goes the general way, which accepts or explains.
#
# One difference is deliberate: msgspec skips the fields the client does not know without
# converting their numbers, so a number too large for a float (1e400) in such a field is
# ignored like the field, where orjson refuses the whole body as not JSON.

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


class _Unsupported(Exception):
    """A model the accelerated path does not mirror (free-form records, nested sequences)."""


def _mirror(cls: type, top: bool) -> Any:
    """A msgspec Struct with the wire names of ``cls`` (its attribute names are the model's)."""
    hints = typing.get_type_hints(cls)
    fields: list[Any] = []
    for field in attrs.fields(cls):
        type_ = hints[field.name]
        if (cls, field.name) in _FIELD_RULES and not top:  # pragma: no cover - none today
            raise _Unsupported(f"{cls.__name__}.{field.name}")  # its fix would not be applied
        if type_ in _MIRROR_LEAVES:
            mirrored = _MIRROR_LEAVES[type_]
        elif type_ in _ENUMS:
            mirrored = type_
        elif type_ in _WIRE_NAMES:
            mirrored = _mirror(type_, False)
        elif _is_sequence(type_) and top and typing.get_args(type_)[0] in _WIRE_NAMES:
            mirrored = list[_mirror(typing.get_args(type_)[0], False)]  # type: ignore[misc]
        else:
            raise _Unsupported(f"{cls.__name__}.{field.name}: {type_!r}")
        if field.default is attrs.NOTHING:
            fields.append((field.name, mirrored))
        else:
            fields.append((field.name, mirrored, field.default))
    return msgspec.defstruct(
        f"_{cls.__name__}Wire", fields, rename=_WIRE_NAMES[cls], gc=False, kw_only=True
    )


#: What a decimal text may hold on the accelerated path (the rule's inline case); the texts
#: of a body are joined, encoded and stripped of these bytes: anything left refuses the body.
_DIGITS_AND_DOT_BYTES: Final = _DIGITS_AND_DOT.encode()


#: Decimal(text) for the accelerated path: a context that cannot round (a text is at most 128
#: digits) and refuses what is not a number; its create_decimal() costs less than Decimal()
#: (positional argument parsing instead of keywords).
_EXACT: Final = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[InvalidOperation],
)


class _Refused(Exception):
    """The accelerated path does not take this body; the general path decides."""


def _refuse() -> typing.NoReturn:
    raise _Refused


@functools.cache
def _builder_class(cls: type) -> type:
    """A subclass of ``cls`` that lets its slots be set: a model is built as one of these, then
    turned into a ``cls`` by ``__class__`` assignment (same layout: the subclass adds nothing).

    Attribute stores on it are the interpreter's specialised slot stores, where a frozen
    model's slot descriptors cost a method call a field (and ``msgspec.convert`` a
    ``setattr`` by name). ``__delattr__`` is reset too: one Python-level slot function left
    behind would route every store through it. ``builder()`` makes an empty one (no attrs
    ``__init__``), cheaper than ``object.__new__(builder)``.
    """
    namespace = {
        "__slots__": (),
        "__init__": object.__init__,
        "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__,
        "__doc__": f"Building {cls.__name__} instances (private to the decoder).",
    }
    builder = type(f"_{cls.__name__}Builder", (cls,), namespace)
    probe = builder()
    try:
        probe.__class__ = cls
    except TypeError as exc:  # pragma: no cover - a model with another layout: a bug at import
        raise _Unsupported(f"{cls.__name__}: {exc}") from exc
    return builder


class _Emitter:
    """Python source that builds a model from its mirror Struct, nested models inline.

    ``texts`` are the local names (or, in loops, the list) holding the decimal texts; they are
    checked once, together, before the model is returned.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.lines: list[str] = []
        self.texts: list[str] = []
        self.in_loop = 0
        self.uses_list = False
        self._count = itertools.count()

    def name(self, prefix: str) -> str:
        return f"{prefix}{next(self._count)}"

    def constant(self, prefix: str, value: Any) -> str:
        for key, held in self.namespace.items():
            if held is value and key.startswith(prefix):
                return key
        key = self.name(prefix)
        self.namespace[key] = value
        return key

    def emit(self, line: str, depth: int) -> None:
        self.lines.append("    " * depth + line)

    def model(self, cls: type, source: str, depth: int, top: bool) -> str:
        """Emit the statements that build ``cls`` from the mirror in ``source``; its name."""
        hints = typing.get_type_hints(cls)
        builder = self.constant(f"_B_{cls.__name__}", _builder_class(cls))
        final = self.constant(f"_C_{cls.__name__}", cls)
        target = self.name("o")
        self.emit(f"{target} = {builder}()", depth)
        for field in attrs.fields(cls):
            type_ = hints[field.name]
            value = f"{source}.{field.name}"
            fix = _ACCELERATED_FIELD_FIXES.get((cls, field.name))
            if fix is not None:
                if not top:  # pragma: no cover - none today; the mirror refuses it (_mirror)
                    raise _Unsupported(f"{cls.__name__}.{field.name}")
                value = fix.format(v=value)
            elif type_ is Decimal:
                text = self.name("d")
                self.emit(f"{text} = {value}", depth)
                if self.in_loop:
                    self.emit(f"_add({text})", depth)
                    self.uses_list = True
                else:
                    self.texts.append(text)
                value = f"_exact({text})"
            elif type_ in _WIRE_NAMES:
                inner = self.name("m")
                self.emit(f"{inner} = {value}", depth)
                value = self.model(type_, inner, depth, top=False)
            elif _is_sequence(type_) and typing.get_args(type_)[0] in _WIRE_NAMES:
                items, append, item = self.name("l"), self.name("a"), self.name("x")
                self.emit(f"{items} = []", depth)
                self.emit(f"{append} = {items}.append", depth)
                self.emit(f"for {item} in {value}:", depth)
                self.in_loop += 1
                built = self.model(typing.get_args(type_)[0], item, depth + 1, top=False)
                self.in_loop -= 1
                self.emit(f"{append}({built})", depth + 1)
                value = f"tuple({items})"
            elif type_ not in _MIRROR_LEAVES and type_ not in _ENUMS:  # pragma: no cover
                raise _Unsupported(f"{cls.__name__}.{field.name}: {type_!r}")
            self.emit(f"{target}.{field.name} = {value}", depth)
        self.emit(f"{target}.__class__ = {final}", depth)
        return target


#: What a per-field rule does once the mirror has checked the field's type (source over {v}).
_ACCELERATED_FIELD_FIXES: dict[tuple[type, str], str] = {
    (OrdersPage, "cursor"): "{v} or None",
}


#: The mirror decoder of each accelerated model (for ``benchmarks._stages``).
_MIRRORS: dict[type, msgspec.json.Decoder[Any]] = {}


def _accelerated(cls: type) -> Callable[[bytes], Any] | None:
    """``accelerated(body) -> cls``, or None for a model the mirror cannot hold.

    Generated once per model: msgspec parses the body into the mirror, the statements from
    :class:`_Emitter` build the models, and the decimal texts, joined, must be plain digits
    and dots (the mirror bounds their length). Raises on any body it does not take.
    """
    try:
        decoder = _MIRRORS[cls] = msgspec.json.Decoder(_mirror(cls, True))
        namespace: dict[str, Any] = dict(_HELPERS)
        namespace.update(_decode=decoder.decode, _exact=_EXACT.create_decimal, _refuse=_refuse)
        namespace["_DDB"] = _DIGITS_AND_DOT_BYTES
        emitter = _Emitter(namespace)
        built = emitter.model(cls, "m", 1, top=True)
    except _Unsupported:
        return None
    name = f"accelerated_{cls.__name__}"
    lines = [
        f"def {name}(body):",
        # msgspec does not validate the UTF-8 of the strings it skips (unknown fields); the
        # general path refuses such a body, so this one passes it on.
        "    if not body.isascii():",
        "        body.decode()",
        "    m = _decode(body)",
    ]
    if emitter.uses_list:
        lines += ["    texts = []", "    _add = texts.append"]
    lines += emitter.lines
    joined = " + ".join(emitter.texts)
    if emitter.uses_list:
        joined = f"{joined} + ''.join(texts)" if joined else "''.join(texts)"
    if joined:
        lines.append(f"    if ({joined}).encode().translate(None, _DDB):")
        lines.append("        _refuse()")
    lines.append(f"    return {built}")
    source = "\n".join(lines)
    function: Callable[[bytes], Any] = _compile(source, name, namespace)
    function.__doc__ = f"Decode a {cls.__name__} from JSON bytes (generated).\n\n{source}"
    return function


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

    __slots__ = ("_accelerated", "_structure", "cls", "unwrap")

    def __init__(self, cls: type[Any], unwrap: Callable[[Any], T] | None = None) -> None:
        self.cls = cls
        self.unwrap = unwrap
        self._structure: Callable[[Any], Any] = _GENERATED[cls]
        self._accelerated = _accelerated(cls)

    def __repr__(self) -> str:
        return f"Decoder({self.cls.__name__})"

    def __call__(self, body: bytes) -> T:
        if self._accelerated is not None:
            try:
                value = self._accelerated(body)
            except Exception:  # not for the accelerated path: the general path decides
                pass
            else:
                return value if self.unwrap is None else self.unwrap(value)
        return self.general(body)

    def general(self, body: bytes) -> T:
        """The general path alone: orjson and the generated functions, then the converter."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"the body is not JSON: {exc}", path=None) from exc
        if data.__class__ is not dict:
            raise _not_an_object(data)
        try:
            value = self._structure(data)
        except Exception as fast_error:
            raise self._explain(data) from fast_error
        return value if self.unwrap is None else self.unwrap(value)

    def _explain(self, data: dict[str, Any]) -> DecodeError:
        """Run the detailed converter on the same data to name the bad field."""
        try:
            _converter().structure(data, self.cls)
        except Exception as exc:
            path, leaf = _error_path(exc)
            path = _bounded(path)
            error = DecodeError(_describe(leaf, path), path=path)
            error.__cause__ = exc
            return error
        # The converter accepted what the fast path refused: a bug in the rules.
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
