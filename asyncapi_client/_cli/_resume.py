"""``--format parquet --output FILE --checkpoint CKPT``: a Parquet export a rerun continues.

Each row group is written as a Parquet file of its own in ``.FILE.parts/`` beside FILE
(written beside its name and renamed once on disk), whose footer carries the export's state
after it; CKPT is saved after each: how many parts, which walk, and where in it. Run again
with the same arguments and CKPT after the process was killed, even by SIGKILL, and the
parts are kept and the walks go on after their last row (a part renamed into place just
before the kill, but not yet in CKPT, is taken from its footer): nothing written is fetched
again but the page the last row is on. When the last walk is done the parts are copied, row
group by row group, into FILE (written beside it and renamed: FILE appears only complete),
then CKPT and the parts are removed.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import attrs
import orjson

from asyncapi_client import _export
from asyncapi_client._network import Network

from ._args import PROG, UsageError
from ._checkpoint import CheckpointFile
from ._commands import Context, StartWalk, first_walk
from ._render import Kind

__all__ = ["export_resumably"]

#: The footer key under which a part keeps the export's state once it is written.
STATE_KEY: Final = b"asyncapi_client.export_checkpoint"
_VERSION: Final = 1


@attrs.frozen
class _State:
    """Where a resumable export stands: ``parts`` written, the rest from walk ``walk``
    resumed at ``resume`` (a walk checkpoint's text; None: from its start); ``done`` once
    every walk is in the parts."""

    identity: dict[str, Any]
    parts: int = 0
    walk: int = 0
    resume: str | None = None
    done: bool = False

    def to_json(self) -> str:
        return orjson.dumps(
            {"version": _VERSION, "export": "parquet", **attrs.asdict(self)}
        ).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> _State:
        """The state in ``text``; ValueError when it is not one this export wrote."""
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            data = None
        if not (isinstance(data, dict) and data.get("export") == "parquet"):
            raise ValueError("not the checkpoint of a Parquet export")
        values: dict[str, Any] = data
        identity, resume, done = values.get("identity"), values.get("resume"), values.get("done")
        parts, walk = _count(values.get("parts")), _count(values.get("walk"))
        if (
            values.get("version") != _VERSION
            or not isinstance(identity, dict)
            or parts is None
            or walk is None
            or not isinstance(resume, str | None)
            or not isinstance(done, bool)
        ):
            raise ValueError("a Parquet export's checkpoint, damaged or of another version")
        return cls(identity, parts, walk, resume, done)


def _count(value: object) -> int | None:
    """``value`` when it is an int >= 0 (a count in a state), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _identity(ctx: Context) -> dict[str, Any]:
    """What makes two runs the same export: the command, its users and filters, the page
    size, the network and the file's path and settings."""
    args = ctx.args

    def wire(value: Any) -> Any:
        return getattr(value, "value", value)

    return {
        "command": args.command,
        "addresses": list(getattr(args, "addresses", ())),
        "market": getattr(args, "market", None),
        "status": wire(getattr(args, "status", None)),
        "side": wire(getattr(args, "side", None)),
        "page_size": args.page_size,
        "network": wire(args.network or Network.MAINNET),
        "output": os.path.abspath(args.output),
        "rows_per_group": args.rows_per_group,
        "decimal_scale": args.decimal_scale,
    }


class _Parts:
    """The parts of one export, ``.NAME.parts/000000.parquet`` ... beside the output, in a
    directory one run at a time holds the lock of."""

    def __init__(self, output: str, store: CheckpointFile) -> None:
        directory, name = os.path.split(output)
        self.output = output
        self.dir = os.path.join(directory, f".{name}.parts")
        self.store = store
        self._lock: int | None = None

    def path(self, number: int) -> str:
        return os.path.join(self.dir, f"{number:06d}.parquet")

    def open(self) -> None:
        """The directory, made if missing and locked: a second run at once is refused.
        OSError when it cannot be made (the output's directory is missing, say), or when
        the output is a directory."""
        if os.path.isdir(self.output):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.output)
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.dir)
        try:
            self._lock = _export.lock(self.dir)
        except BlockingIOError:
            raise UsageError(
                f"--checkpoint {self.store.path}: another run is writing this export "
                f"(its parts in {self.dir} are locked)"
            ) from None

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def _keep_only(self, count: int) -> None:
        """Remove what is in the directory but the first ``count`` parts: a part left
        half-written, or parts that no checkpoint names."""
        kept = {os.path.basename(self.path(n)) for n in range(count)}
        with os.scandir(self.dir) as entries:
            others = [entry.path for entry in entries if entry.name not in kept]
        for path in others:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def fresh(self, identity: dict[str, Any]) -> _State:
        self._keep_only(0)
        return _State(identity)

    def resumed(self, saved: str, identity: dict[str, Any], walks: int) -> _State:
        """The saved state, checked against this run and the parts on disk, and taken
        further by a part written after it was saved."""
        where = f"--checkpoint {self.store.path}"
        try:
            state = _State.from_json(saved)
        except ValueError as exc:
            raise UsageError(f"{where}: {exc} (remove it to start over)") from None
        if state.identity != identity or state.walk >= walks:
            raise UsageError(
                f"{where}: it is the checkpoint of another export (other arguments or "
                "--output); run that one again, or remove it to start over"
            )
        if not all(os.path.isfile(self.path(n)) for n in range(state.parts)):
            raise UsageError(
                f"{where}: the parts it counts on are gone from {self.dir}; remove it to start over"
            )
        while True:
            after = self._footer_state(state.parts)
            if after is None or after.identity != identity or after.parts != state.parts + 1:
                break
            state = after
        self._keep_only(state.parts)
        return state

    def _footer_state(self, number: int) -> _State | None:
        """The state a complete part keeps in its footer; None for no such part."""
        import pyarrow.parquet as pq

        try:
            metadata = pq.read_schema(self.path(number)).metadata or {}
            return _State.from_json(metadata[STATE_KEY])
        except (OSError, KeyError, ValueError):
            return None

    def write(self, number: int, table: Any, state: _State) -> None:
        """Part ``number``, complete on disk under its name before this returns (a worker
        thread runs it)."""
        metadata = {STATE_KEY: state.to_json().encode()}
        part = _export.PartFile(self.path(number), table.schema.with_metadata(metadata))
        try:
            part.write(table, table.num_rows)
            part.finish()
            part.rename()
        except BaseException:
            part.discard()
            raise
        _export.fsync_directory(self.dir)

    def row_groups(self, count: int) -> Iterator[Callable[[], Any]]:
        """For each row group of the first ``count`` parts, in order, a function reading it."""
        import pyarrow.parquet as pq

        for number in range(count):
            with pq.ParquetFile(self.path(number)) as file:
                groups = file.num_row_groups
            for group in range(groups):

                def read(number: int = number, group: int = group) -> Any:
                    with pq.ParquetFile(self.path(number)) as file:
                        return file.read_row_group(group).replace_schema_metadata(None)

                yield read

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


async def _walk_into_parts(
    ctx: Context,
    walks: Sequence[StartWalk],
    parts: _Parts,
    state: _State,
    on_rows: Callable[[int], None],
) -> _State:
    """The walks from where ``state`` stands into parts, saving the state after each."""
    args, store = ctx.args, parts.store
    first = first_walk(store, walks[state.walk], state.resume)
    rest = (start(None) for start in walks[state.walk + 1 :])
    chain = _export.WalkChain(itertools.chain([first], rest), args.decimal_scale)
    plan = await chain.begin()
    import pyarrow as pa

    try:
        async with (
            contextlib.aclosing(chain.items()) as items,
            contextlib.aclosing(
                _export.item_runs(items, plan, args.rows_per_group, on_rows)
            ) as runs,
        ):
            async for run in runs:
                table = pa.Table.from_batches(run, schema=plan.schema)
                del run
                walk = chain.walk
                assert walk is not None
                after = attrs.evolve(
                    state,
                    parts=state.parts + 1,
                    walk=state.walk + chain.index,
                    resume=walk.checkpoint.to_json(),
                )
                await _export.off_loop(parts.write, state.parts, table, after)
                del table
                store.save(after.to_json())
                state = after
    except BaseException:
        await chain.abandon()
        raise
    state = attrs.evolve(state, done=True)
    store.save(state.to_json())
    return state


async def _assemble(parts: _Parts, state: _State, output: str, schema: Any, rows: int) -> None:
    """The parts' row groups, in order, into ``output``: it appears only complete."""
    target = _export.PartFile(output, schema)
    try:
        for read in parts.row_groups(state.parts):

            def copy(read: Callable[[], Any] = read) -> None:
                target.write(read(), rows)

            await _export.off_loop(copy)
        await _export.off_loop(target.finish)
        target.rename()
    except BaseException:
        target.discard()
        raise


async def export_resumably(
    ctx: Context,
    walks: Sequence[StartWalk],
    kind: Kind,
    on_rows: Callable[[int], None],
) -> None:
    """Write the walks to ``--output`` through parts kept beside it, resuming a saved run."""
    args = ctx.args
    output: str = args.output
    store = CheckpointFile(args.checkpoint)
    parts = _Parts(output, store)
    parts.open()  # first: a run of the same export still going is refused untouched
    try:
        saved = store.load()
        store.check_writable()
        identity = _identity(ctx)
        if saved is None:
            state = parts.fresh(identity)
        else:
            state = parts.resumed(saved, identity, len(walks))
        if saved is not None:
            out = ctx.render.out
            out.stderr.write(f"{PROG}: resuming the walk from the checkpoint in {store.path}\n")
            out.stderr.flush()
        if not state.done:
            state = await _walk_into_parts(ctx, walks, parts, state, on_rows)
        schema = _export.arrow_schema(kind.model, decimal_scale=args.decimal_scale)
        await _assemble(parts, state, output, schema, args.rows_per_group)
        store.remove()
        parts.remove()
    finally:
        parts.close()
