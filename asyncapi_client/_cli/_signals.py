"""SIGINT and SIGTERM during a command: one clean stop, and the exit status that says which.

:func:`stoppable` runs a command's coroutine with both signals turned into a cancellation of
it. Whatever the command was doing unwinds as on any failure: a walk ends the JSON array it
began (see ``WalkWriter.stop``), an export removes its partial file, the client closes its
connections. Then :class:`Interrupted` leaves ``asyncio.run`` and ``main`` exits 130
(SIGINT) or 143 (SIGTERM) with one line on stderr.

A command that serves until a signal (``serve-fake``) installs its own handlers on the loop
for that time; they replace these, and it ends normally.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

__all__ = ["SIGNALS", "Interrupted", "exit_status", "signals_saved", "stoppable"]

T = TypeVar("T")

#: The signals that stop a command cleanly.
SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The command was stopped by ``signum`` (after its cleanup ran)."""

    def __init__(self, signum: int, outcome: str = "the output is incomplete") -> None:
        self.signum = signum
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}; {outcome}")


def exit_status(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process a signal ended: 130, 143."""
    return 128 + signum


async def stoppable(command: Coroutine[Any, Any, T]) -> T:
    """Run ``command`` (in the running loop's main task); a SIGINT or SIGTERM meanwhile
    cancels it, and once it has unwound, :class:`Interrupted` is raised instead."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        task.cancel()  # a second signal cancels the cleanup too: it asked twice

    installed = []
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            try:
                loop.add_signal_handler(signum, stop, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                continue  # a platform without them: Ctrl-C is a KeyboardInterrupt there
            installed.append(signum)
    try:
        result = await command
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        if not received:
            raise
        if isinstance(exc, asyncio.CancelledError):
            task.uncancel()
            # A command may say what the stop left behind as the cancellation's message.
            outcome = str(exc)
            raise (
                Interrupted(received[0], outcome) if outcome else Interrupted(received[0])
            ) from None
        raise Interrupted(received[0]) from exc  # what the unwinding ran into (a closed pipe)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    if received:  # it finished all the same: a signal came at its very end
        raise Interrupted(received[0])
    return result


@contextmanager
def signals_saved() -> Iterator[None]:
    """Give back the process's own SIGINT and SIGTERM handlers after a command (the loop
    leaves its defaults behind, not what was there: SIG_IGN in a shell's background job).

    Before and after the loop runs, a SIGINT is Python's KeyboardInterrupt, even in a
    process started with SIGINT ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    if saved[signal.SIGINT] in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:
                signal.signal(signum, handler)
