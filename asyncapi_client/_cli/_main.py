"""``main``: parse, run one command on a fresh event loop, turn every failure into one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import IO, Any, Final

from asyncapi_client._errors import ApiError
from asyncapi_client._retry import RetryEvent

from . import _commands, _fake, _parquet, _watch
from ._args import FILE_FORMATS, PROG, ShowVersion, UsageError, build_parser
from ._checkpoint import CheckpointWriteError
from ._commands import Context, limit_lines
from ._render import Output, OutputWriteError, isatty, renderer, writing
from ._signals import Interrupted, exit_status, signals_saved, stoppable
from ._text import OutputError, visible

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_API_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

_COMMANDS: Final[dict[str, Callable[[Context], Coroutine[Any, Any, int]]]] = {
    "tokens": _commands.tokens,
    "markets": _commands.markets,
    "pool": _commands.pool,
    "user": _commands.user,
    "orders": _commands.orders,
    "leaderboard": _commands.leaderboard,
    "watch": _watch.watch,
    "demo": _fake.demo,
    "serve-fake": _fake.serve_fake,
}


def _version() -> str:
    from asyncapi_client import __version__

    return f"{PROG} {__version__}"


#: An error or retry line is cut to this many characters (head and tail kept): a server's
#: text in an error message never makes a long line.
MAX_ERROR_LINE: Final = 2000


def _line(text: str) -> str:
    """Text as one bounded line a terminal shows as text: blanks collapsed, controls escaped,
    the middle cut past :data:`MAX_ERROR_LINE` (less the prefix the line gets)."""
    limit = MAX_ERROR_LINE - len(f"{PROG}: error: ")
    text = visible(" ".join(text.split()))
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    return text[:head] + "…" + text[len(text) - (limit - head - 1) :]


def _one_line(exc: BaseException) -> str:
    """An error as one line (its class name when it has no message)."""
    return _line(str(exc)) or type(exc).__name__


def _first_leaf(exc: BaseException) -> BaseException:
    """The first error inside (possibly nested) exception groups, e.g. from a TaskGroup."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _terminal_width(stdout: IO[str], environ: Mapping[str, str]) -> int | None:
    """Columns of the terminal stdout writes to; else $COLUMNS; else None (no limit)."""
    if isatty(stdout):
        try:
            return os.get_terminal_size(stdout.fileno()).columns
        except (OSError, ValueError, AttributeError):
            pass
    try:
        columns = int(environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return columns if columns > 0 else None


def _retry_line(stream: IO[str], attempts: int) -> Callable[[RetryEvent], None]:
    """``Client(on_retry=...)``: each retry as one visible line on ``stream``."""

    def say(event: RetryEvent) -> None:
        text = (
            f"retry {event.attempt} of {attempts - 1}: {event.operation} [{event.network.value}] "
            f"{event.url} failed ({event.error.message}); next attempt in {event.wait:.2f} s"
        )
        try:
            stream.write(f"{PROG}: {_line(text)}\n")
            stream.flush()
        except (OSError, ValueError):  # pragma: no cover - stderr gone
            pass

    return say


def _silence(stream: IO[str]) -> None:
    """After a broken pipe: point the stream's file at /dev/null so no later flush fails."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
        pass


class _Ending:
    """How a run ends: its exit status, once stdout is flushed, and each failure as one line
    on stderr (after a usage text when there is one)."""

    def __init__(self, stdout: IO[str], stderr: IO[str]) -> None:
        self.stdout = stdout
        self.stderr = stderr

    def fail(self, message: str, status: int, usage: str = "") -> int:
        """``status``, after ``message`` (and ``usage``) on stderr."""
        try:
            self.stdout.flush()
        except BrokenPipeError:
            _silence(self.stdout)
        except (OSError, ValueError):
            pass
        lines = ([usage] if usage else []) + [f"{PROG}: error: {message}"]
        self.stderr.write("".join(line + "\n" for line in lines))
        self.stderr.flush()
        return status

    def cannot_write(self, exc: OutputWriteError) -> int:
        """Status 1 for output that could not be written."""
        _silence(self.stdout)  # what is still buffered goes nowhere, not to a failing flush
        return self.fail(f"cannot write the output: {_one_line(exc)}", EXIT_API_ERROR)

    def done(self, status: int, flush: Callable[[], None] | None = None) -> int:
        """``status``, once everything written is flushed (or failed to be, in one line)."""
        try:
            with writing():
                (self.stdout.flush if flush is None else flush)()
        except BrokenPipeError:
            _silence(self.stdout)
        except OutputWriteError as exc:
            return self.cannot_write(exc)
        return status


def _parse(arguments: list[str], ending: _Ending) -> tuple[argparse.Namespace | None, int]:
    """The parsed arguments (checked for a usage error), or None and the status the run ends
    with: after ``--version``, ``--help`` or a usage error."""
    parser = build_parser(ending.stdout, dict(_COMMANDS))
    try:
        with writing():
            args = parser.parse_args(arguments)
            _parquet.check_usage(args)  # --format parquet: its own command, or a usage error
    except ShowVersion:
        try:
            with writing():
                ending.stdout.write(_version() + "\n")
        except OutputWriteError as exc:
            return None, ending.cannot_write(exc)
        return None, ending.done(EXIT_OK)
    except UsageError as exc:
        return None, ending.fail(_one_line(exc), EXIT_USAGE, exc.usage)
    except SystemExit as exc:  # --help
        return None, ending.done(exc.code if isinstance(exc.code, int) else EXIT_OK)
    except OutputWriteError as exc:  # --help to a full disk
        return None, ending.cannot_write(exc)
    return args, EXIT_OK


def _context(
    args: argparse.Namespace, ending: _Ending, env: Mapping[str, str]
) -> tuple[Context, Output]:
    """What the command works with (the renderer of its format, the retry lines when they
    are shown), and the ``Output`` it writes stdout through."""
    out_stream, err_stream = ending.stdout, ending.stderr
    # With --checkpoint a walk's output is continued by the next run: jsonl, not one array.
    piped = "jsonl" if getattr(args, "checkpoint", None) else "json"
    fmt: str = args.format or ("table" if isatty(out_stream) else piped)
    if args.command == "watch":  # a change a line, on a terminal too
        fmt = args.format or "jsonl"
    width = _terminal_width(out_stream, env)
    out = Output(out_stream, err_stream, width=width, wide=args.wide)
    show_retries = args.verbose or isatty(err_stream)
    on_retry = _retry_line(err_stream, args.max_retries + 1) if show_retries else None
    # A file format writes nothing to stdout: its commands use only the renderer's Output.
    render = renderer("jsonl" if fmt in FILE_FORMATS else fmt, out)
    return Context(args, render, env, on_retry), out


async def _command(ctx: Context, err: IO[str]) -> int:
    """The command; with ``--verbose``, then what was learned of the rate limits."""
    try:
        status: int = await ctx.args.run(ctx)
    finally:
        if ctx.args.verbose:
            for line in await limit_lines(ctx.limiter):
                try:
                    err.write(f"{PROG}: {_line(line)}\n")
                except (OSError, ValueError):  # pragma: no cover - stderr gone
                    break
    return status


def _run(ctx: Context, out: Output, ending: _Ending) -> int:
    """Run the command on a fresh event loop; every failure it ends with becomes one line
    and its status."""
    try:
        with signals_saved():
            try:
                status: int = asyncio.run(stoppable(_command(ctx, ending.stderr)))
            except BaseExceptionGroup as group:
                raise _first_leaf(group) from None
    except Interrupted as exc:  # SIGINT or SIGTERM: the command has unwound
        return ending.fail(_one_line(exc), exit_status(exc.signum))
    except ApiError as exc:
        return ending.fail(_one_line(exc), EXIT_API_ERROR)
    except UsageError as exc:
        return ending.fail(_one_line(exc), EXIT_USAGE, exc.usage)
    except ValueError as exc:  # an argument the Client refused before any request
        return ending.fail(_one_line(exc), EXIT_USAGE)
    except OutputError as exc:
        return ending.fail(f"cannot print the answer: {_one_line(exc)}", EXIT_API_ERROR)
    except OutputWriteError as exc:
        return ending.cannot_write(exc)
    except CheckpointWriteError as exc:
        return ending.fail(f"cannot save the checkpoint: {_one_line(exc)}", EXIT_API_ERROR)
    except RecursionError:
        return ending.fail("cannot print the answer: it nests too deeply", EXIT_API_ERROR)
    except KeyboardInterrupt:  # before or after the loop ran
        return ending.fail(_one_line(Interrupted(signal.SIGINT)), EXIT_INTERRUPTED)
    except BrokenPipeError:
        _silence(ending.stdout)
        return EXIT_OK
    return ending.done(status, out.flush)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run the command line; returns the exit status.

    0 done, 1 the API answered with an error or could not be reached (or sent what cannot be
    printed), 2 bad usage or configuration, 130 interrupted (SIGINT), 143 stopped (SIGTERM):
    the command unwinds first (a JSON array is ended, a Parquet export leaves no file).
    Every failure is one line on stderr starting ``asyncapi-client: error:``. ``stdout``,
    ``stderr`` and ``environ`` default to the process's own; tests pass their own to run the
    CLI in-process.
    """
    ending = _Ending(
        sys.stdout if stdout is None else stdout, sys.stderr if stderr is None else stderr
    )
    args, status = _parse(list(sys.argv[1:] if argv is None else argv), ending)
    if args is None:
        return status
    ctx, out = _context(args, ending, os.environ if environ is None else environ)
    return _run(ctx, out, ending)
