"""Old import path, kept until the tests that use it move: see ``_rawserver`` and ``_checks``."""

from __future__ import annotations

from asyncapi_client.testing._thread import LoopThread
from tests._checks import TraceRecorder, assert_clean, settled, stray_tasks
from tests._oracle import pool_json
from tests._rawserver import (
    Behaviour,
    Conn,
    RawServer,
    big_body,
    close,
    cut_short,
    drain_accepts,
    endless_chunks,
    hang,
    raw,
    reserve_port,
    reset,
    reset_mid_body,
    respond,
)

__all__ = [
    "Behaviour",
    "Conn",
    "FaultServer",
    "ServerThread",
    "TraceRecorder",
    "assert_clean",
    "big_body",
    "close",
    "cut_short",
    "endless_chunks",
    "hang",
    "pool_json",
    "raw",
    "reserve_port",
    "reset",
    "reset_mid_body",
    "respond",
    "settled",
    "stray_tasks",
]

FaultServer = RawServer


class ServerThread(LoopThread):
    """The shared server loop under its old name."""

    drain_accepts = staticmethod(drain_accepts)
