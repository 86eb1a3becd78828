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
import collections
import contextlib
import decimal
import errno
import functools
import os
import re
import shutil
import types
import typing
import urllib.parse
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import attrs

from ._models import LeaderboardEntry, Order

_fcntl: types.ModuleType | None
try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None

if TYPE_CHECKING:
    import pyarrow as pa

    from ._checkpoint import Checkpoint
    from ._walks import Walk

__all__ = [
    "CHUNK",
    "DEFAULT_ROWS",
    "EXTRA",
    "PartFile",
    "Sink",
    "WalkChain",
    "arrow_schema",
    "export_path",
    "fsync_directory",
    "item_runs",
    "lock",
    "off_loop",
    "record_batches",
    "remove_stale_parts",
    "to_arrow",
    "to_parquet",
    "write_parquet",
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


async def item_runs(
    walk: AsyncIterable[Any],
    plan: _Plan,
    rows: int,
    on_rows: Callable[[int], None] | None = None,
) -> AsyncGenerator[list[Any], None]:
    """The items (of a walk, from where it stands), as runs of ``rows`` rows (the last may be
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
            async with contextlib.aclosing(item_runs(walk, plan, rows)) as runs:
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
        async for run in item_runs(walk, plan, CHUNK):
            chunks.extend(run)
    except BaseException:
        await _abandon(walk, start)
        raise
    return pa.Table.from_batches(chunks, schema=plan.schema)


# --- part files: written beside the target, renamed over it once complete -------------------

#: A part's name: ``.NAME.<pid>-<8 hex>.part`` (``.new`` for the instant before it is locked).
_PART_NAME: Final = re.compile(r"(\d+)-[0-9a-f]{8}\.(part|new)")


def export_path(path: object) -> str:
    """``path`` as text: a ``str`` or ``os.PathLike`` of one, and not empty (checked before
    any request, so a bad path never costs a walk)."""
    try:
        target = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        target = None
    if not isinstance(target, str):
        raise TypeError(f"path must be a str or a path, got {path!r}")
    if not target:
        raise ValueError("path is empty: name the file (or directory) to write")
    return target


def lock(path: str) -> int | None:
    """An open descriptor of ``path`` (a file or a directory) holding an exclusive lock on
    it; None where this platform or file system has no locks. Closing the descriptor
    releases the lock, as the end of its process does. Raises BlockingIOError when another
    descriptor holds the lock, OSError when ``path`` cannot be opened."""
    fcntl = _fcntl
    if fcntl is None:  # pragma: no cover - Windows: parts are not told apart from running ones
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    except OSError:  # a file system without locks
        os.close(fd)
        return None
    return fd


def _lock(path: str) -> int | None:
    """:func:`lock`, or None for any failure."""
    try:
        return lock(path)
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` may still be running (this one always is)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale_parts(target: str) -> None:
    """Remove the parts beside ``target`` that a killed export left: those nobody holds the
    lock of. A running export holds its part's lock from the moment the part has its name,
    so its parts stay (a ``.new`` one is taken only once its process is gone as well)."""
    directory, name = os.path.split(target)
    prefix = f".{name}."
    try:
        with os.scandir(directory or os.curdir) as entries:
            found = [entry.path for entry in entries if entry.name.startswith(prefix)]
    except OSError:  # the export itself says what is wrong with the directory
        return
    for path in found:
        match = _PART_NAME.fullmatch(os.path.basename(path)[len(prefix) :])
        if match is None or (match[2] == "new" and _alive(int(match[1]))):
            continue
        fd = _lock(path)
        if fd is None:
            continue
        os.close(fd)
        _remove(path)


def _claim(target: str, make: Callable[[str], None]) -> tuple[str, int | None]:
    """A new part beside ``target``, made by ``make(path)`` (a file or a directory that must
    not exist yet) and locked before it takes its ``.part`` name: returns its path and the
    lock's descriptor (None where there are no locks). Stale parts of ``target`` go first."""
    remove_stale_parts(target)
    directory, name = os.path.split(target)
    for _ in range(100):
        stem = os.path.join(directory, f".{name}.{os.getpid()}-{os.urandom(4).hex()}")
        try:
            make(stem + ".new")
        except FileExistsError:  # pragma: no cover - 32 random bits, taken
            continue
        break
    else:  # pragma: no cover
        raise FileExistsError(f"no free temporary name beside {target}")
    lock = _lock(stem + ".new")
    try:
        os.rename(stem + ".new", stem + ".part")
    except BaseException:
        if lock is not None:
            os.close(lock)
        _remove(stem + ".new")
        raise
    return stem + ".part", lock


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _new_file(path: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    os.close(os.open(path, flags, 0o666))  # less the umask, as open() would give


class PartFile:
    """A Parquet file written beside its target and renamed over it once complete.

    The part is named ``.NAME.<pid>-<random>.part`` and locked while this export lives, so
    the next export to the same target removes it if this one was killed, and only then.
    ``write`` and ``finish`` run in a worker thread (pyarrow encodes and writes without the
    GIL, while the event loop fetches the next pages); ``rename`` and ``discard`` on the loop.
    """

    def __init__(self, target: str, schema: Any) -> None:
        import pyarrow.parquet as pq

        if os.path.isdir(target):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
        self.target = target
        self.writer: Any = None
        self.file: Any = None
        self.part, self.lock = _claim(target, _new_file)
        try:
            self.file = open(self.part, "wb")  # noqa: SIM115 - closed by finish() or discard()
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
        self._unlock()

    def discard(self) -> None:
        """The file in progress goes; nothing appears at the target."""
        if self.writer is not None:
            with contextlib.suppress(Exception):  # its footer goes to a file removed below
                self.writer.close()
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.part)
        self._unlock()

    def _unlock(self) -> None:
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


_PartFile = PartFile


async def off_loop(function: Callable[..., None], *args: Any) -> None:
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


def _check_group(rows_per_group: object) -> int:
    rows = _check_rows(rows_per_group, "rows_per_group")
    if rows > MAX_ROWS_PER_GROUP:
        raise ValueError(
            f"rows_per_group must be at most {MAX_ROWS_PER_GROUP:,} (pyarrow's largest row "
            f"group), got {rows:,}"
        )
    return rows


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
    _check_group(rows_per_group)
    _plan_of(walk, _check_scale(decimal_scale))
    target = export_path(path)
    _pyarrow()
    chain = WalkChain([walk], decimal_scale)
    plan = await chain.begin()
    return await _write_runs(chain, PartFile(target, plan.schema), rows_per_group, on_rows)


# --- several walks -----------------------------------------------------------------------------


class WalkChain:
    """The items of several walks of one kind, one walk at a time, in the order given.

    ``walks`` is an iterable or an async iterable of walks of items. A list or tuple is
    checked whole at once; other iterables walk by walk as they come. ``index`` and ``walk``
    name the walk the last item came from (its ``checkpoint`` is just after that item).
    """

    def __init__(self, walks: object, scale: int) -> None:
        if isinstance(walks, AsyncIterator) and hasattr(walks, "_of_items"):  # one Walk
            raise TypeError(
                "walks must be an iterable of walks, got one walk: pass [walk], or call "
                "walk.to_parquet(path)"
            )
        self._scale = scale
        self._source: Iterator[Any] | AsyncIterator[Any]
        if isinstance(walks, AsyncIterable):
            self._source = aiter(walks)
        elif isinstance(walks, Iterable) and not isinstance(walks, str | bytes):
            self._source = iter(walks)
        else:
            raise TypeError(f"walks must be an iterable of walks, got {walks!r}")
        self.plan: _Plan | None = None
        if isinstance(walks, list | tuple):
            for walk in walks:
                self._check(walk)
        self.index = -1
        self.walk: Walk[Any] | None = None
        self._start: Checkpoint | None = None
        self._next: Walk[Any] | None = None

    def _check(self, walk: object) -> Walk[Any]:
        """``walk`` itself, once it is known to be a walk of items of the chain's kind."""
        if not (isinstance(walk, AsyncIterator) and hasattr(walk, "_of_items")):
            raise TypeError(f"walks must hold walks (iter_orders, iter_leaderboard), got {walk!r}")
        plan = _plan_of(typing.cast("Walk[Any]", walk), self._scale)
        if self.plan is None:
            self.plan = plan
        elif plan.model is not self.plan.model:
            raise ValueError(
                f"the walks must be of one kind: a walk of {plan.model.__name__} items after "
                f"walks of {self.plan.model.__name__} items"
            )
        return typing.cast("Walk[Any]", walk)

    async def _pull(self) -> Walk[Any] | None:
        """The next walk from the source, checked; None after the last."""
        source = self._source
        try:
            if isinstance(source, AsyncIterator):
                walk = await anext(source)
            else:
                walk = next(source)
        except (StopIteration, StopAsyncIteration):
            return None
        return self._check(walk)

    async def begin(self) -> _Plan:
        """Take the first walk (no request is made): the plan of its kind. ValueError when
        there is none, since nothing would say what the columns are."""
        self._next = await self._pull()
        if self._next is None or self.plan is None:
            raise ValueError("walks is empty: no walk says which columns to write")
        return self.plan

    async def items(self) -> AsyncGenerator[Any, None]:
        """Every item of every walk, one walk after the other."""
        walk, self._next = self._next, None
        while walk is not None:
            self.index += 1
            self.walk, self._start = walk, walk.checkpoint
            async for item in walk:
                yield item
            walk = await self._pull()

    async def abandon(self) -> None:
        """After a failure: the walk in progress ends where it stood when it was taken (its
        rows were not written), and the source of the walks is closed."""
        if self.walk is not None and self._start is not None:
            await _abandon(self.walk, self._start)
        source: Any = self._source
        with contextlib.suppress(Exception):
            if hasattr(source, "aclose"):
                await source.aclose()
            elif hasattr(source, "close"):
                source.close()


class Sink(typing.Protocol):
    """Where an export's row groups go: ``write`` and ``finish`` run in a worker thread,
    ``rename`` (the output appears, complete) and ``discard`` (nothing appears) on the loop."""

    def write(self, table: Any, rows_per_group: int) -> None: ...

    def finish(self) -> None: ...

    def rename(self) -> None: ...

    def discard(self) -> None: ...


async def _write_runs(
    chain: WalkChain, sink: Sink, rows_per_group: int, on_rows: Callable[[int], None] | None
) -> int:
    """The chain's items, a row group at a time, into ``sink``; returns the rows written.
    On a failure or a cancellation nothing appears and the walk in progress is abandoned."""
    pa = _pyarrow()
    plan = chain.plan
    assert plan is not None
    written = 0
    try:
        async with (
            contextlib.aclosing(chain.items()) as items,
            contextlib.aclosing(item_runs(items, plan, rows_per_group, on_rows)) as runs,
        ):
            async for run in runs:
                table = pa.Table.from_batches(run, schema=plan.schema)
                del run
                await off_loop(sink.write, table, rows_per_group)
                written += table.num_rows
                del table
        await off_loop(sink.finish)
        sink.rename()  # no await since finish(): a cancellation cannot fall in between
    except BaseException:
        sink.discard()
        await chain.abandon()
        raise
    return written


#: Files a partitioned export keeps open at once (each open Parquet writer holds buffers of
#: its own): past it the least recently written is finished, and a later row of its value
#: starts another file in the same folder.
MAX_OPEN_FILES: Final = 8


def _dataset_of(directory: str, column: str) -> bool:
    """Whether ``directory`` holds only a dataset partitioned by ``column`` (folders
    ``column=value`` of ``.parquet`` files), or nothing: what may be replaced."""
    try:
        with os.scandir(directory) as entries:
            folders = list(entries)
        for folder in folders:
            if not (folder.is_dir(follow_symlinks=False) and folder.name.startswith(f"{column}=")):
                return False
            with os.scandir(folder.path) as files:
                if not all(
                    f.is_file(follow_symlinks=False) and f.name.endswith(".parquet") for f in files
                ):
                    return False
    except OSError:
        return False
    return True


class _Dataset:
    """A Hive-partitioned dataset written into a directory beside its target and renamed
    to it once complete: ``column=value/part-00000.parquet``, the column itself in the
    folder names only (as pyarrow, Spark and DuckDB write and read them).

    A value's file stays open while row groups bring rows of it, and is finished at the
    first that brings none (a walk per user: one user's file open at a time).
    """

    def __init__(self, target: str, plan: _Plan, column: str) -> None:
        import pyarrow.parquet as pq

        self._pq = pq
        self.target, self.column = target, column
        if os.path.lexists(target) and not os.path.isdir(target):
            raise FileExistsError(
                errno.EEXIST, "exists and is not a directory (a dataset is a directory)", target
            )
        if os.path.isdir(target) and not _dataset_of(target, column):
            raise FileExistsError(
                errno.EEXIST,
                f"holds files other than a dataset partitioned by {column}: write the dataset "
                "to a new or empty directory",
                target,
            )
        self.schema = plan.schema.remove(plan.schema.get_field_index(column))
        self.files: collections.OrderedDict[Any, tuple[Any, Any]] = collections.OrderedDict()
        self.counts: dict[Any, int] = {}
        self.folders: set[str] = set()
        self.staging, self.lock = _claim(target, os.mkdir)

    def write(self, table: Any, rows_per_group: int) -> None:
        import pyarrow.compute as pc

        keys = table.column(self.column)
        values = pc.unique(keys).to_pylist()
        for value in values:
            part = table if len(values) == 1 else table.filter(pc.equal(keys, value))
            part = part.drop_columns([self.column])
            self._writer(value).write_table(part, row_group_size=rows_per_group)
        for value in [v for v in self.files if v not in values]:  # walks done with it
            self._close(*self.files.pop(value))

    def _writer(self, value: Any) -> Any:
        if value in self.files:
            self.files.move_to_end(value)
            return self.files[value][0]
        if len(self.files) >= MAX_OPEN_FILES:
            self._close(*self.files.popitem(last=False)[1])
        folder = os.path.join(
            self.staging, f"{self.column}={urllib.parse.quote(str(value), safe='')}"
        )
        if folder not in self.folders:
            os.mkdir(folder)
            self.folders.add(folder)
        number = self.counts.get(value, 0)
        self.counts[value] = number + 1
        file = open(os.path.join(folder, f"part-{number:05d}.parquet"), "xb")  # noqa: SIM115
        try:
            writer = self._pq.ParquetWriter(file, self.schema)
        except BaseException:
            file.close()
            raise
        self.files[value] = (writer, file)
        return writer

    @staticmethod
    def _close(writer: Any, file: Any) -> None:
        writer.close()
        file.flush()
        os.fsync(file.fileno())
        file.close()

    def finish(self) -> None:
        """Every file's footer, and files and folders to the disk."""
        while self.files:
            self._close(*self.files.popitem(last=False)[1])
        for folder in (*self.folders, self.staging):
            fsync_directory(folder)

    def rename(self) -> None:
        """The dataset appears at the target; one that was there (of the same column) goes."""
        if os.path.isdir(self.target) and os.listdir(self.target):
            directory, name = os.path.split(self.target)
            old = os.path.join(directory, f".{name}.{os.getpid()}-{os.urandom(4).hex()}.part")
            os.rename(self.target, old)
            os.rename(self.staging, self.target)
            _remove(old)
        else:
            os.replace(self.staging, self.target)
        self._unlock()

    def discard(self) -> None:
        for writer, file in self.files.values():
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(OSError):
                file.close()
        self.files.clear()
        _remove(self.staging)
        self._unlock()

    def _unlock(self) -> None:
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


def fsync_directory(path: str) -> None:
    """A directory's entries to the disk (where directories can be opened: not Windows)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _partition_column(plan: _Plan, partition_by: object) -> str:
    """``partition_by`` checked: a column of text or whole numbers of the walks' model."""
    allowed = [
        c.name for c in plan.columns if c.build.__qualname__.startswith(("_strings", "_ints"))
    ]
    if not isinstance(partition_by, str):
        raise TypeError(f"partition_by must be a column name (str) or None, got {partition_by!r}")
    if partition_by not in allowed:
        raise ValueError(
            f"partition_by must be a text or integer column of {plan.model.__name__}: one of "
            f"{', '.join(allowed)}; got {partition_by!r}"
        )
    return partition_by


async def write_parquet(
    walks: object,
    path: str | os.PathLike[str],
    *,
    partition_by: str | None = None,
    rows_per_group: int = DEFAULT_ROWS,
    decimal_scale: int = 18,
    on_rows: Callable[[int], None] | None = None,
) -> int:
    """The items of several walks of one kind into one Parquet file at ``path``, or with
    ``partition_by`` into a Hive-partitioned dataset (a directory) at ``path``; returns the
    rows written. Everything is checked before the first request."""
    _check_group(rows_per_group)
    scale = _check_scale(decimal_scale)
    target = export_path(path)
    _pyarrow()
    chain = WalkChain(walks, scale)
    plan = await chain.begin()
    sink: Sink
    if partition_by is None:
        sink = PartFile(target, plan.schema)  # a bad target: raised before any request
    else:
        sink = _Dataset(target, plan, _partition_column(plan, partition_by))
    return await _write_runs(chain, sink, rows_per_group, on_rows)
