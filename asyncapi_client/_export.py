"""Walks of items to Arrow record batches, tables and Parquet files: exact, in bounded memory.

The columns come from the model's attrs fields, in attribute order, under their attribute
names: ``Decimal`` is ``decimal128(38, scale)`` (exact or refused, never rounded), ``int``
``int64``, ``int | float`` (a timestamp) ``int64`` (a fractional value is refused), ``float``
``float64``, ``str`` and the open enums ``string`` (an enum as its value), a nested model a
struct; ``X | None`` is nullable, every other column is not.

A walk is read item by item; every :data:`CHUNK` items (or fewer, at a batch's end) become
Arrow arrays at once, so what is held is one batch of columns plus one chunk of models. A
value that does not fit its column raises :class:`ValueError` naming the field and the
item's position, counted from 0 where the export began; no row of its batch is handed out,
the walk is closed, and its checkpoint names the end of the last batch handed out (for
``to_arrow`` and ``to_parquet``: where the export began, since nothing was).

pyarrow is imported when an export starts, never with the package: without it, the export
raises :class:`ImportError` naming the ``arrow`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import errno
import functools
import os
import types
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import attrs

from ._models import LeaderboardEntry, Order

if TYPE_CHECKING:
    import pyarrow as pa

    from ._checkpoint import Checkpoint
    from ._walks import Walk

__all__ = [
    "CHUNK",
    "DEFAULT_ROWS",
    "EXTRA",
    "arrow_schema",
    "record_batches",
    "to_arrow",
    "to_parquet",
]

#: The install that brings pyarrow in, as the ImportError names it.
EXTRA: Final = "asyncapi-client[arrow]"
#: Rows of a record batch and of a Parquet row group unless the caller says otherwise.
DEFAULT_ROWS: Final = 65_536
#: Items turned into Arrow arrays at once: the models held beside a batch's columns.
CHUNK: Final = 8_192
#: pyarrow writes no larger row group (it would split one silently).
MAX_ROWS_PER_GROUP: Final = 64 * 1024 * 1024
#: A ``decimal128`` holds 38 digits; ``decimal_scale`` of them are after the point.
MAX_PRECISION: Final = 38

#: What each walk of items hands out, by its checkpoint's operation.
MODELS: Final[dict[str, type]] = {"orders": Order, "leaderboard": LeaderboardEntry}

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _pyarrow() -> types.ModuleType:
    """pyarrow, or an ImportError that says how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet  # to_parquet needs it; a broken install fails here
    except ImportError as exc:
        raise ImportError(
            f"columnar export needs pyarrow: install the extra, pip install '{EXTRA}' ({exc})"
        ) from exc
    return typing.cast(types.ModuleType, pyarrow)


# --- arguments ---------------------------------------------------------------------------------


def _check_rows(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_scale(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PRECISION:
        raise ValueError(
            f"decimal_scale must be an int from 0 to {MAX_PRECISION} "
            f"(digits after the point in decimal128({MAX_PRECISION}, scale)), got {value!r}"
        )
    return value


# --- the columns of a model --------------------------------------------------------------------


class _Refused(Exception):
    """A value that does not fit its column: ``index`` in the chunk, and why."""

    def __init__(self, index: int, why: str, field: str = "") -> None:
        super().__init__(why)
        self.index = index
        self.why = why
        self.field = field


def _show(value: object) -> str:
    """A value for a message: bounded, whatever the server sent."""
    text = str(value)
    if len(text) > 60:
        text = f"{text[:28]}...{text[-28:]} ({len(text):,} characters)"
    return text


@attrs.frozen
class _Column:
    """One column: its name (dotted for a nested field), its Arrow type and how to build it."""

    name: str
    type: Any  # pyarrow.DataType
    nullable: bool
    #: the values of a chunk -> a pyarrow.Array; raises _Refused for a value that does not fit
    build: Callable[[list[Any]], Any]


def _refuse_first(values: list[Any], check: Callable[[Any], str | None]) -> None:
    """Raise _Refused for the first value ``check`` finds wrong (it returns why)."""
    for index, value in enumerate(values):
        if value is not None:
            why = check(value)
            if why is not None:
                raise _Refused(index, why)


def _strings(pa: types.ModuleType) -> Callable[[list[Any]], Any]:
    string = pa.string()

    def build(values: list[Any]) -> Any:
        try:
            return pa.array(values, type=string)
        except (pa.ArrowException, TypeError, ValueError):
            _refuse_first(values, lambda v: None if isinstance(v, str) else "is not text")
            raise  # pragma: no cover - pyarrow refused text: nothing of ours to name

    return build


def _floats(pa: types.ModuleType) -> Callable[[list[Any]], Any]:
    float64 = pa.float64()

    def check(value: Any) -> str | None:
        if value.__class__ is float:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                if float(value) == value:
                    return None
            except OverflowError:
                pass
            return "cannot be a float64 exactly"
        return "is not a number"

    def build(values: list[Any]) -> Any:
        if not all(v.__class__ is float or v is None for v in values):
            _refuse_first(values, check)
        return pa.array(values, type=float64)

    return build


def _whole(value: Any) -> str | None:
    """Why ``value`` cannot be an int64 (None: it can)."""
    if isinstance(value, bool):
        return "is not a number"
    if isinstance(value, int):
        return None if _INT64_MIN <= value <= _INT64_MAX else "does not fit int64"
    if isinstance(value, float):
        if not value.is_integer():
            return "is fractional (or not finite): int64 holds whole numbers only"
        return None if _INT64_MIN <= value < 2.0**63 else "does not fit int64"
    return "is not a number"


def _ints(pa: types.ModuleType) -> Callable[[list[Any]], Any]:
    """int64 from ints; a float is taken only when whole (pyarrow would truncate 1.5 to 1)."""
    int64 = pa.int64()

    def build(values: list[Any]) -> Any:
        if not all(v.__class__ is int or v is None for v in values):
            _refuse_first(values, _whole)
            values = [v if v is None or v.__class__ is int else int(v) for v in values]
        try:
            return pa.array(values, type=int64)
        except (pa.ArrowException, OverflowError):
            _refuse_first(values, _whole)
            raise  # pragma: no cover - every int64 value was checked

    return build


def _why_not(value: Any, scale: int) -> str | None:
    """Why ``value`` does not fit decimal128(38, scale) exactly (None: it does)."""
    if not isinstance(value, Decimal):
        return "is not a decimal"
    if not value.is_finite():
        return "is not a finite number"
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    kept = max(len(digits) + min(exponent + scale, 0), 0)  # those left at ``scale`` places
    if any(digits[kept:]):
        return f"has more than {scale} digits after the point: decimal128(38, {scale})"
    if value and value.adjusted() + 1 > MAX_PRECISION - scale:
        return (
            f"has too many digits before the point: decimal128(38, {scale}) holds "
            f"{MAX_PRECISION - scale}"
        )
    return None


def _decimals(pa: types.ModuleType, scale: int) -> Callable[[list[Any]], Any]:
    """decimal128(38, scale), exactly: each value is first quantized to ``scale`` places in a
    38-digit context that traps any rounding and any overflow, so pyarrow receives values it
    only has to copy (it rounds some others silently: 8E-39 becomes 0 at scale 0)."""
    arrow_type = pa.decimal128(MAX_PRECISION, scale)
    places = Decimal(1).scaleb(-scale)
    exact = decimal.Context(
        prec=MAX_PRECISION,
        Emax=999_999,
        Emin=-999_999,
        traps=[decimal.Inexact, decimal.InvalidOperation],
    )
    quantize = Decimal.quantize

    def build(values: list[Any]) -> Any:
        try:
            fitted = [None if v is None else quantize(v, places, context=exact) for v in values]
            array = pa.array(fitted, type=arrow_type)
        except (decimal.DecimalException, TypeError, pa.ArrowException):
            array = None
        if array is None or array.null_count != values.count(None):  # NaN would be a null
            _refuse_first(values, lambda value: _why_not(value, scale))
            raise AssertionError(f"pyarrow refused decimals that fit decimal128(38, {scale})")
        return array

    return build


def _struct(pa: types.ModuleType, columns: list[_Column]) -> Callable[[list[Any]], Any]:
    names = [column.name.rpartition(".")[2] for column in columns]
    fields = [pa.field(n, c.type, nullable=c.nullable) for n, c in zip(names, columns, strict=True)]

    def build(values: list[Any]) -> Any:
        children = []
        for name, column in zip(names, columns, strict=True):
            try:
                children.append(column.build([getattr(v, name) for v in values]))
            except _Refused as refused:
                refused.field = refused.field or column.name
                raise
        return pa.StructArray.from_arrays(children, fields=fields)

    return build


def _optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (hint, False)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = typing.get_args(hint)
        if type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            return (rest[0] if len(rest) == 1 else functools.reduce(lambda a, b: a | b, rest)), True
    return hint, False


def _column(pa: types.ModuleType, name: str, hint: Any, scale: int) -> _Column:
    """The column of one field, from its annotation."""
    hint, nullable = _optional(hint)
    if hint is Decimal:
        return _Column(name, pa.decimal128(MAX_PRECISION, scale), nullable, _decimals(pa, scale))
    if hint is int or hint == int | float:
        return _Column(name, pa.int64(), nullable, _ints(pa))
    if hint is float:
        return _Column(name, pa.float64(), nullable, _floats(pa))
    if hint is str or (isinstance(hint, type) and issubclass(hint, str)):
        return _Column(name, pa.string(), nullable, _strings(pa))
    if isinstance(hint, type) and attrs.has(hint) and not nullable:
        children = _columns(pa, hint, scale, prefix=f"{name}.")
        struct = pa.struct(
            [pa.field(c.name.rpartition(".")[2], c.type, nullable=c.nullable) for c in children]
        )
        return _Column(name, struct, False, _struct(pa, children))
    raise TypeError(f"{name}: no Arrow column for a field of type {hint!r}")


def _columns(pa: types.ModuleType, model: type, scale: int, prefix: str = "") -> list[_Column]:
    hints = typing.get_type_hints(model)
    return [
        _column(pa, prefix + field.name, hints[field.name], scale) for field in attrs.fields(model)
    ]


@attrs.frozen
class _Plan:
    """How the rows of one model become record batches at one decimal scale."""

    model: type
    schema: Any  # pyarrow.Schema
    columns: Sequence[_Column]

    def chunk(self, pa: types.ModuleType, items: list[Any], position: int) -> Any:
        """``items`` as one RecordBatch; ``position`` is the first item's, for errors."""
        arrays = []
        for column in self.columns:
            name = column.name
            try:
                arrays.append(column.build([getattr(item, name) for item in items]))
            except _Refused as refused:
                field = refused.field or name
                value: Any = items[refused.index]
                for part in field.split("."):
                    value = getattr(value, part)
                raise ValueError(
                    f"{field} of item {position + refused.index} (counted from 0 where the "
                    f"export began) {refused.why}: {_show(value)}; nothing of its batch was "
                    "handed out"
                ) from None
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


@functools.lru_cache(maxsize=32)
def _plan(model: type, scale: int) -> _Plan:
    pa = _pyarrow()
    columns = _columns(pa, model, scale)
    schema = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in columns])
    return _Plan(model, schema, tuple(columns))


def arrow_schema(model: type, *, decimal_scale: int = 18) -> pa.Schema:
    """The Arrow schema an export of ``model`` items writes (from its attrs fields)."""
    return _plan(model, _check_scale(decimal_scale)).schema


# --- reading a walk ----------------------------------------------------------------------------


def _plan_of(walk: Walk[Any], scale: int) -> _Plan:
    operation = walk.checkpoint.operation
    if not walk._of_items() or operation not in MODELS:
        raise TypeError(
            "columnar export is for walks of items (iter_orders, iter_leaderboard), "
            f"not a walk of pages ({operation})"
        )
    return _plan(MODELS[operation], scale)


async def _runs(
    walk: Walk[Any],
    plan: _Plan,
    rows: int,
    on_rows: Callable[[int], None] | None = None,
) -> AsyncGenerator[list[Any], None]:
    """The walk's items from where it stands, as runs of ``rows`` rows (the last may be
    shorter, none empty), each a list of chunk RecordBatches.

    Between two runs no item is read: while the caller holds a run, the walk stands just
    after its last row.
    """
    pa = _pyarrow()
    position = 0  # items turned into rows so far
    run: list[Any] = []
    in_run = 0
    pending: list[Any] = []
    want = min(CHUNK, rows)
    async for item in walk:
        pending.append(item)
        if len(pending) < want:
            continue
        run.append(plan.chunk(pa, pending, position))
        position += want
        in_run += want
        pending = []
        if on_rows is not None:
            on_rows(position)
        if in_run == rows:
            yield run
            run, in_run = [], 0
        want = min(CHUNK, rows - in_run)
    if pending:
        run.append(plan.chunk(pa, pending, position))
        position += len(pending)
        if on_rows is not None:
            on_rows(position)
    if run:
        yield run


async def _abandon(walk: Walk[Any], settled: Checkpoint) -> None:
    """After a failed export: the walk ends, standing just after the last row handed out."""
    with contextlib.suppress(RuntimeError):  # still stepping in another task: it ends there
        await walk.aclose()
    walk._rewind(settled)


def _combine(pa: types.ModuleType, run: list[Any]) -> Any:
    """One RecordBatch of a run's chunks."""
    if len(run) == 1:
        return run[0]
    columns = [
        pa.concat_arrays([chunk.column(i) for chunk in run]) for i in range(run[0].num_columns)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=run[0].schema)


def record_batches(
    walk: Walk[Any], *, rows: int = DEFAULT_ROWS, decimal_scale: int = 18
) -> AsyncIterator[pa.RecordBatch]:
    """The walk's items from where it stands as RecordBatches of ``rows`` rows (the last may
    be shorter). Arguments and pyarrow are checked now, before anything is read."""
    _check_rows(rows, "rows")
    plan = _plan_of(walk, _check_scale(decimal_scale))
    pa = _pyarrow()

    async def batches() -> AsyncIterator[Any]:
        settled = walk.checkpoint
        try:
            async with contextlib.aclosing(_runs(walk, plan, rows)) as runs:
                async for run in runs:
                    batch = _combine(pa, run)
                    del run
                    settled = walk.checkpoint
                    yield batch
        except GeneratorExit:
            raise  # closed at a yield: the walk stands just after the batch handed out
        except BaseException:
            await _abandon(walk, settled)
            raise

    return batches()


async def to_arrow(walk: Walk[Any], *, decimal_scale: int = 18) -> pa.Table:
    """The rest of the walk as one Table (its columns in chunks of :data:`CHUNK` rows)."""
    plan = _plan_of(walk, _check_scale(decimal_scale))
    pa = _pyarrow()
    start = walk.checkpoint
    chunks: list[Any] = []
    try:
        async for run in _runs(walk, plan, CHUNK):
            chunks.extend(run)
    except BaseException:
        await _abandon(walk, start)
        raise
    return pa.Table.from_batches(chunks, schema=plan.schema)


def _temporary_beside(target: str) -> tuple[int, str]:
    """A new file in ``target``'s directory, named after it: ``.NAME.<random>.part``."""
    directory, name = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{os.urandom(4).hex()}.part")
        try:
            return os.open(path, flags, 0o666), path  # less the umask, as open() would give
        except FileExistsError:  # pragma: no cover - 32 random bits, taken
            continue
    raise FileExistsError(f"no free temporary name beside {target}")  # pragma: no cover


class _PartFile:
    """A Parquet file written beside its target and renamed over it once complete.

    ``write`` and ``finish`` run in a worker thread (pyarrow encodes and writes without the
    GIL, while the event loop fetches the next pages); ``rename`` and ``discard`` on the loop.
    """

    def __init__(self, target: str, schema: Any) -> None:
        import pyarrow.parquet as pq

        if os.path.isdir(target):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
        self.target = target
        self.writer: Any = None
        self.fd, self.part = _temporary_beside(target)
        try:
            self.file = open(self.fd, "wb")  # noqa: SIM115 - closed by finish() or discard()
            self.writer = pq.ParquetWriter(self.file, schema)
        except BaseException:
            self.discard()
            raise

    def write(self, table: Any, rows_per_group: int) -> None:
        self.writer.write_table(table, row_group_size=rows_per_group)

    def finish(self) -> None:
        """Footer, flush, and to the disk: what ``rename`` makes appear is complete."""
        self.writer.close()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def rename(self) -> None:
        os.replace(self.part, self.target)

    def discard(self) -> None:
        """The file in progress goes; nothing appears at the target."""
        if self.writer is not None:
            with contextlib.suppress(Exception):  # its footer goes to a file removed below
                self.writer.close()
        with contextlib.suppress(OSError):
            if hasattr(self, "file"):
                self.file.close()
            else:
                os.close(self.fd)
        with contextlib.suppress(OSError):
            os.unlink(self.part)


async def _off_loop(function: Callable[..., None], *args: Any) -> None:
    """``function(*args)`` in a worker thread. A cancellation waits for it to finish first:
    the file it writes is never closed or removed under it."""
    future = asyncio.get_running_loop().run_in_executor(None, function, *args)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
        if not future.cancelled():
            future.exception()  # seen: the cancellation is what propagates
        raise


async def to_parquet(
    walk: Walk[Any],
    path: str | os.PathLike[str],
    *,
    rows_per_group: int = DEFAULT_ROWS,
    decimal_scale: int = 18,
    on_rows: Callable[[int], None] | None = None,
) -> int:
    """Write the rest of the walk to a Parquet file at ``path``; returns the rows written.

    Each row group is written as it fills, to a file beside ``path`` that is renamed to it
    once complete: ``path`` appears only whole, and a failure or cancellation removes the
    file in progress. ``on_rows(n)`` is told the rows read so far (the CLI's progress).
    """
    _check_rows(rows_per_group, "rows_per_group")
    if rows_per_group > MAX_ROWS_PER_GROUP:
        raise ValueError(
            f"rows_per_group must be at most {MAX_ROWS_PER_GROUP:,} (pyarrow's largest row "
            f"group), got {rows_per_group:,}"
        )
    plan = _plan_of(walk, _check_scale(decimal_scale))
    pa = _pyarrow()
    target = os.fspath(path)
    if not isinstance(target, str):
        raise TypeError(f"path must be a str or a path, got {path!r}")
    start = walk.checkpoint
    part = _PartFile(target, plan.schema)
    written = 0
    try:
        async for run in _runs(walk, plan, rows_per_group, on_rows):
            table = pa.Table.from_batches(run, schema=plan.schema)
            del run
            await _off_loop(part.write, table, rows_per_group)
            written += table.num_rows
            del table
        await _off_loop(part.finish)
        part.rename()  # no await since finish(): a cancellation cannot fall in between
    except BaseException:
        part.discard()
        await _abandon(walk, start)
        raise
    return written
