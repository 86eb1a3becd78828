"""``--format parquet --output FILE``: ``orders --all`` (of each ADDRESS in turn) or
``leaderboard --all`` as one file.

The walks go through :func:`asyncapi_client.write_parquet`: FILE appears only complete
(written beside it, then renamed). Interrupted by SIGINT (exit 130), SIGTERM (exit 143) or
a failure mid-walk (exit 1), it leaves neither FILE nor the file in progress behind, and
says so in one line on stderr. With ``--checkpoint CKPT`` the row groups are kept as parts
beside FILE until it is complete, so a run killed at any point is continued by the next
(see ``_resume``). The walk's progress goes to stderr when that is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from asyncapi_client._errors import ApiError

from ._args import UsageError
from ._checkpoint import CheckpointWriteError
from ._commands import Context, StartWalk, board_walks, client_for, order_walks
from ._render import ENTRIES, ORDERS, Kind, OutputWriteError, Progress

__all__ = ["check_usage"]


_WALKS: Final = ("orders", "leaderboard")


def check_usage(args: argparse.Namespace) -> None:
    """Refuse what a Parquet export cannot do, and point ``args.run`` at the export.

    Raises UsageError (exit 2): an empty ``--output``; ``--output`` without ``--format
    parquet``; ``parquet`` on another command, without ``--all`` or without ``--output``.
    """
    command = args.command
    output = getattr(args, "output", None)
    if output == "":
        raise UsageError(f"{command}: --output FILE: the name is empty")
    if args.format != "parquet":
        if output is not None:
            raise UsageError(f"{command}: --output FILE is for --format parquet")
        return
    if command not in _WALKS:
        raise UsageError(
            f"{command}: --format parquet is for orders --all and leaderboard --all only"
        )
    if not args.all:
        raise UsageError(f"{command}: --format parquet needs --all (it writes a whole walk)")
    if output is None:
        raise UsageError(f"{command}: --format parquet needs --output FILE")
    args.run = _RUN[command]


async def _export_walks(ctx: Context, walks: Sequence[StartWalk], kind: Kind) -> int:
    """The walks, one after the other, into ``--output``: through parts kept beside it
    with ``--checkpoint``, else straight into the file."""
    from asyncapi_client import _export  # pyarrow and the export only when asked for

    args = ctx.args
    output: str = args.output
    progress = Progress(ctx.render.out, kind.noun)
    try:
        if args.checkpoint is not None:
            from ._resume import export_resumably

            await export_resumably(ctx, walks, kind, progress.update)
        else:
            await _export.write_parquet(
                (start(None) for start in walks),
                output,
                rows_per_group=args.rows_per_group,
                decimal_scale=args.decimal_scale,
                on_rows=progress.update,
            )
    except asyncio.CancelledError:  # SIGINT or SIGTERM (see _signals.stoppable)
        progress.finish()
        again = "; run again with the same --checkpoint to continue" if args.checkpoint else ""
        raise asyncio.CancelledError(f"{output} was not written{again}") from None
    except (ApiError, UsageError, CheckpointWriteError):
        progress.finish()
        raise
    except (OSError, ValueError) as exc:  # the file, or a value the file cannot hold
        progress.finish()
        detail = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise OutputWriteError(f"{output}: {detail}") from exc
    progress.finish()
    return 0


async def orders(ctx: Context) -> int:
    async with client_for(ctx) as client:
        return await _export_walks(ctx, order_walks(ctx, client), ORDERS)


async def leaderboard(ctx: Context) -> int:
    async with client_for(ctx) as client:
        return await _export_walks(ctx, board_walks(ctx, client), ENTRIES)


_RUN: Final[dict[str, Callable[[Context], Coroutine[Any, Any, int]]]] = {
    "orders": orders,
    "leaderboard": leaderboard,
}
