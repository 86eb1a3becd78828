"""SyncClient: the async :class:`Client` behind blocking calls, for scripts, notebooks and threads.

One design for every blocking call. Each SyncClient runs an event loop of its own on one
background thread, and the async Client lives there (made on that loop). A call hands its
coroutine to the loop and waits for the task's outcome; a stream pulls one item or page at a
time the same way, while its walk fetches ahead on the loop as the async walks do.

- Many threads may call at once: each call is its own task on the loop.
- A thread whose own event loop is running may call too: it blocks, as any blocking call does.
- Whatever interrupts the waiting thread (``KeyboardInterrupt``, an exception a signal
  handler raises) cancels the call's task, waits a bounded time for the cancellation to finish
  (the request is abandoned, its connection closed), then propagates: nothing keeps running.
- ``close()`` cancels what is still running, closes the connections and ends the thread. A
  SyncClient dropped unclosed warns with a :class:`ResourceWarning` and stops its thread
  then: the thread holds no reference to the SyncClient, so it can be collected.
- In a child process forked after the SyncClient was made (``os.fork()``, multiprocessing's
  ``fork`` start method, a pre-forking server), only the forking thread exists: the first use
  there gives the SyncClient a thread, loop and client of the child's own, made with the
  same arguments, as redis-py's pools do after a fork. The parent's thread, loop and
  connections are left alone in the child (never closed, never collected there: they are
  the parent's sockets), and ``close()`` there closes the child's.

The methods between the ``generated`` markers are written by ``python tools/sync_gen.py``
(a development tool of the repository, not installed) from :class:`Client`'s own definitions
(same names, parameters, types, defaults and docstrings); ``make test`` regenerates them and
fails when they drift.
``with_response`` is made from those methods, as the async client's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import ssl as ssl_module
import sys
import threading
import warnings
import weakref
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, Self, TypeVar

import aiohttp

from ._cache import CacheBackend
from ._checkpoint import Checkpoint
from ._client import Client, WithResponse
from ._limiters import Limiter
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
)
from ._network import Network
from ._operations import SyncResponseOf
from ._request import Response as Response  # with_response's hints name it here
from ._retry import RetryEvent
from ._types import USE_CLIENT_DEFAULT, NetworkName, OrderStatusName, SideName, UseClientDefault
from ._walks import Walk
from ._watches import LeaderboardChange, OrderChange, PoolChange, Watch, WatchState

if TYPE_CHECKING:
    import pyarrow

__all__ = ["SyncClient", "SyncWalk", "SyncWithResponse"]

T = TypeVar("T")
R = TypeVar("R")

#: How long an interrupted call waits for its task's cancellation to finish (seconds): a
#: bound, not a pace; cancelling a request ends at once unless something swallows it.
CANCEL_WAIT: Final = 5.0
#: The caller waits for its call in slices of this many seconds. A signal (Ctrl-C) interrupts
#: the wait at once on POSIX, except one that lands just before the wait begins (it is seen
#: when the slice ends), and on Windows, where a lock's wait is not interruptible at all.
WAIT_SLICE: Final = 0.1
#: How long a SyncClient collected unclosed waits for its thread to end (seconds).
ABANDON_WAIT: Final = 5.0

_names = itertools.count(1)

#: The process the module runs in, renewed in a forked child: a SyncClient (its runner) made
#: in another process is renewed at its first use here.
_pid = os.getpid()
#: Held while a SyncClient renews itself in a forked child (made anew in every child: the
#: parent's may have been held by another thread at the fork).
_fork_lock = threading.Lock()
#: The runners a forked child inherited and replaced: kept here, never closed nor collected,
#: so that nothing in the child closes or unregisters the parent's sockets (a closed
#: transport leaves the epoll instance the two processes share).
_inherited: list[_Runner] = []


def _after_fork_in_child() -> None:
    global _pid, _fork_lock
    _pid = os.getpid()
    _fork_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _closed_error() -> RuntimeError:
    return RuntimeError("this SyncClient is closed; create a new one")


class _Call:
    """One blocking call: the coroutine handed to the loop, its task, its outcome, and the
    latch the caller waits on."""

    __slots__ = ("coro", "done", "error", "finished", "result", "task")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.task: asyncio.Task[None] | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        #: held until the call has ended (or could not start); the caller waits on it
        self.done = threading.Lock()
        self.done.acquire()
        self.finished = False


async def _drive(call: _Call) -> None:
    """The call's task: hands the coroutine's outcome to the caller and lets it go at once
    (a done callback would only run a turn of the loop later)."""
    try:
        call.result = await call.coro
    except asyncio.CancelledError as exc:
        call.error = exc
        raise  # the task ends cancelled
    except BaseException as exc:  # the caller raises it: the task itself ends quietly
        call.error = exc
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
    finally:
        call.finished = True
        call.done.release()


#: The call's first step runs at once, not a turn of the loop later (``eager_start``: public
#: API since Python 3.12; before, a task starts on the loop's next turn).
_EAGER: Final[dict[str, Any]] = {"eager_start": True} if sys.version_info >= (3, 12) else {}


def _refuse_in_running_loop(coro: Coroutine[Any, Any, Any], runner: _Runner) -> None:
    """A call that would block this thread's running event loop is refused, before any
    request (with the fake on that loop it would hang until its timeout). On the client's
    own loop thread the runner says why not."""
    if threading.get_ident() == runner.ident:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    coro.close()
    raise RuntimeError(
        "a SyncClient call would block this thread's running event loop (inside "
        "asyncio.run(), a notebook cell, an async framework): use the async Client "
        "here and await its calls"
    )


class _Runner:
    """The private event loop on its daemon thread, and the async Client it owns.

    Holds no reference to the SyncClient: a SyncClient dropped unclosed can be collected,
    and its finaliser stops this loop.
    """

    __slots__ = ("_lock", "_stopping", "client", "ident", "loop", "pid", "thread")

    def __init__(self) -> None:
        self.pid = _pid
        self.loop = asyncio.new_event_loop()
        self.client: Client | None = None
        # reentrant: a SyncWalk's batches collected unfinished (their generator's finally
        # hands a close to the loop) may be finalised by the cycle collector in a thread
        # that holds it
        self._lock = threading.RLock()
        self._stopping = False
        self.thread = threading.Thread(
            target=_serve, args=(self,), name=f"asyncapi-client-sync-{next(_names)}", daemon=True
        )
        self.thread.start()
        ident = self.thread.ident
        assert ident is not None
        self.ident = ident

    @property
    def stopping(self) -> bool:
        return self._stopping

    # --- the caller's side --------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` as a task on the loop and block until its outcome.

        Whatever interrupts the wait cancels the task and waits (at most ``CANCEL_WAIT``
        seconds) until it has finished before it propagates.
        """
        if threading.get_ident() == self.ident:
            coro.close()
            raise RuntimeError(
                "a SyncClient cannot be called from its own event loop thread (an on_retry "
                "callback, say): the call would wait for itself"
            )
        call = _Call(coro)
        scheduled = False
        try:
            with self._lock:  # no call is scheduled once the loop is told to stop
                if self._stopping:
                    raise _closed_error()
                scheduled = True  # from here on, the loop closes the coroutine
                self.loop.call_soon_threadsafe(self._begin, call)
            wait = call.done.acquire
            while not wait(timeout=WAIT_SLICE):
                pass  # back in Python: a signal that came just before the wait is seen now
        except BaseException:
            if not scheduled:
                coro.close()
            elif not call.finished:
                self._interrupt(call)
            raise
        error = call.error
        if error is None:
            return call.result  # type: ignore[no-any-return]
        if isinstance(error, asyncio.CancelledError):  # only close() cancels a call not
            raise RuntimeError("the SyncClient was closed during this call")  # interrupted
        try:
            raise error
        finally:
            del error, call  # no cycle through the traceback

    def _interrupt(self, call: _Call) -> None:
        """Cancel ``call``'s task and wait, bounded, until it has finished."""
        with self._lock:
            if not self.loop.is_closed():
                self.loop.call_soon_threadsafe(_cancel, call)
        call.done.acquire(timeout=CANCEL_WAIT)

    def close(self) -> None:
        """Cancel what runs, close the client, end the thread. Calling it twice is fine."""
        if threading.get_ident() == self.ident:
            raise RuntimeError(
                "a SyncClient cannot be closed from its own event loop thread (an on_retry "
                "callback, say): close() waits for that thread to end"
            )
        self._stop()
        self.thread.join()

    def abandon(self) -> None:
        """The SyncClient was collected unclosed: stop, and say so with a ResourceWarning.

        A runner of the parent, collected in a forked child, is kept as it is instead.
        """
        if self.pid != _pid:
            _inherited.append(self)
            return
        self._stop()
        if threading.get_ident() != self.ident:
            self.thread.join(ABANDON_WAIT)
        warnings.warn(
            "a SyncClient was dropped without close(): its thread and connections were "
            "closed when it was collected; use `with SyncClient(...) as client:` or "
            "client.close()",
            ResourceWarning,
            stacklevel=2,
        )

    def _stop(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self.loop.call_soon_threadsafe(self.loop.stop)

    # --- the loop's side ----------------------------------------------------------------

    def _begin(self, call: _Call) -> None:
        if self._stopping:  # close() was called meanwhile: the call does not start
            call.coro.close()
            call.error = _closed_error()
            _release(call)
            return
        call.task = asyncio.Task(_drive(call), loop=self.loop, **_EAGER)


def _release(call: _Call) -> None:
    call.finished = True
    call.done.release()


def _cancel(call: _Call) -> None:
    if call.finished:
        return
    if call.task is None:  # interrupted before the call was handed over: it never starts
        call.coro.close()
        _release(call)
    else:
        call.task.cancel()


def _serve(runner: _Runner) -> None:
    """The thread: run the loop until stopped, then cancel what is left and close it all."""
    loop = runner.loop
    asyncio.set_event_loop(loop)
    try:
        while True:
            try:
                loop.run_forever()
            except (KeyboardInterrupt, SystemExit):
                # raised by a call's own code on this thread (asyncio lets these out of the
                # loop): that call's caller gets it; the others go on being served
                continue
            break
        loop.run_until_complete(_finish(runner))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def _finish(runner: _Runner) -> None:
    """Cancel every task left (calls in flight, fetches ahead), then close the client and
    what the loop started (async generators, the resolver's executor threads)."""
    loop = runner.loop
    current = asyncio.current_task()
    while pending := [t for t in asyncio.all_tasks(loop) if t is not current]:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending)
    if runner.client is not None:
        await runner.client.close()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
    for _ in range(3):  # closed transports let go of their sockets on the next turns
        await asyncio.sleep(0)


async def _make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Client:
    return Client(*args, **kwargs)


def _open(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Runner, Client]:
    """A new runner, and the async Client made on its loop with these arguments."""
    runner = _Runner()
    try:
        client = runner.run(_make(args, kwargs))
    except BaseException:
        runner.close()
        raise
    runner.client = client
    return runner, client


# --- streams ----------------------------------------------------------------------------------


class _End:
    """What a step returns at the end of a walk (a task cannot end in StopAsyncIteration
    without it looking like an error)."""

    __slots__ = ()


_END: Final = _End()


class _SyncStream(Generic[T]):
    """A blocking iterator over an async one (a walk, a watch) that runs on the client's
    loop: ``for``, ``next()``, ``close()`` (from any thread) and ``with``."""

    __slots__ = (
        "__weakref__",
        "_closing",
        "_lock",
        "_owner",
        "_pid",
        "_runner",
        "_task",
        "_walk",
    )

    def __init__(self, owner: SyncClient, walk: Any) -> None:
        self._owner = owner  # keeps the client (and its loop) alive while the walk is used
        self._runner = owner._runner  # the loop the walk lives on
        self._pid = _pid
        self._walk = walk
        self._lock = threading.Lock()  # held while a step runs: one step at a time
        self._task: asyncio.Task[Any] | None = None
        self._closing = False

    def _check_process(self) -> None:
        """Refuse a walk begun in the parent of this forked process (before its lock: a
        thread of the parent may have held that at the fork)."""
        if self._pid != _pid:
            raise RuntimeError(
                "this walk began before the process was forked: its requests belong to the "
                "parent; begin a new walk here (resume= its checkpoint to go on from there)"
            )

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run a step of the walk on its loop (not in a process forked after it began, nor
        from a thread whose own event loop runs)."""
        _refuse_in_running_loop(coro, self._runner)
        try:
            self._check_process()
        except RuntimeError:
            coro.close()
            raise
        return self._runner.run(coro)

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> T:
        self._check_process()
        with self._lock:
            if self._closing:
                raise StopIteration
            item = self._run(self._step())
        if item is _END:
            raise StopIteration
        return item  # type: ignore[no-any-return]

    async def _step(self, source: AsyncIterator[Any] | None = None) -> Any:
        """The next item of the walk (or of ``source``, made from it), or _END."""
        self._task = asyncio.current_task()
        try:
            return await (self._walk if source is None else source).__anext__()
        except StopAsyncIteration:
            return _END
        except asyncio.CancelledError:
            if self._closing:  # close() from another thread: this walk ends here
                return _END
            raise
        finally:
            self._task = None

    def close(self) -> None:
        """Stop the walk: end the request in flight and every fetch ahead. Calling it twice
        (or after the client was closed) is fine."""
        if self._closing:
            return
        self._closing = True
        if self._pid != _pid:
            return  # the parent's walk: its requests are the parent's to end
        try:
            self._run(self._close())
        except RuntimeError:
            if self._runner.stopping:
                return  # the client is closed: its loop already ended this walk's requests
            self._closing = False  # not closed (called from the client's own thread)
            raise

    async def _close(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        await self._walk.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._walk!r}>"


class SyncWalk(_SyncStream[T]):
    """A blocking iterator over a stream's items (or pages) that knows where it stands.

    The four stream methods of :class:`SyncClient` make them. Use one with ``for``,
    ``next()``, ``close()`` and ``with``; the walk fetches ahead on the client's loop while
    your code works on an item. :attr:`checkpoint` is the position just after the last item
    handed out; pass it (or its JSON text) as ``resume=`` to continue there. ``close()``
    (from any thread) ends the request in flight and the fetches ahead; a ``next()``
    waiting in another thread then ends the iteration. Several threads may pull from one
    walk: they take turns, each item handed out once.
    """

    __slots__ = ()

    _walk: Walk[T]

    @property
    def checkpoint(self) -> Checkpoint:
        """The position just after the last item handed out (before the first: the start)."""
        if self._pid != _pid:  # a walk of the parent: nothing of it runs in this process
            return self._walk.checkpoint
        if self._lock.acquire(blocking=False):
            try:
                return self._walk.checkpoint
            finally:
                self._lock.release()
        # A step runs in another thread: ask the loop, where the walk is always consistent
        # between two of its steps.
        return self._run(self._read_checkpoint())

    async def _read_checkpoint(self) -> Checkpoint:
        return self._walk.checkpoint

    # --- columnar export (asyncapi-client[arrow]): Walk's, run on the client's loop ---------

    def to_arrow(
        self: SyncWalk[Order] | SyncWalk[LeaderboardEntry], *, decimal_scale: int = 18
    ) -> pyarrow.Table:
        """The rest of the walk as a ``pyarrow.Table``, as :meth:`Walk.to_arrow` makes it.

        Args:
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        return self._whole(self._walk.to_arrow, "to_arrow", decimal_scale=decimal_scale)

    def to_parquet(
        self: SyncWalk[Order] | SyncWalk[LeaderboardEntry],
        path: str | os.PathLike[str],
        *,
        rows_per_group: int = 65_536,
        decimal_scale: int = 18,
    ) -> int:
        """Write the rest of the walk to a Parquet file, as :meth:`Walk.to_parquet` does
        (``path`` appears only whole); returns the number of rows written.

        Args:
            path: the file to write (replaced if it exists).
            rows_per_group: rows in each row group (all full but the last).
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        return self._whole(
            self._walk.to_parquet,
            "to_parquet",
            path,
            rows_per_group=rows_per_group,
            decimal_scale=decimal_scale,
        )

    def record_batches(
        self: SyncWalk[Order] | SyncWalk[LeaderboardEntry],
        *,
        rows: int = 65_536,
        decimal_scale: int = 18,
    ) -> Generator[pyarrow.RecordBatch, None, None]:
        """The rest of the walk as ``pyarrow.RecordBatch`` objects of ``rows`` rows, pulled
        one at a time as items are (see :meth:`Walk.record_batches`); after each one,
        :attr:`checkpoint` stands just after its last row. Arguments are checked now, and a
        closed walk is refused; ``close()`` on the generator (or leaving a ``for`` loop)
        ends it, and the walk goes on from where the last batch ended.

        Args:
            rows: rows in each batch.
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        self._check_process()
        if self._closing:
            raise RuntimeError("record_batches(): the walk is closed")
        batches = self._walk.record_batches(rows=rows, decimal_scale=decimal_scale)
        return self._pull(batches)

    def _pull(self, batches: AsyncIterator[Any]) -> Generator[Any, None, None]:
        try:
            while True:
                self._check_process()
                with self._lock:
                    if self._closing:
                        return
                    batch = self._run(self._step(batches))
                if batch is _END:
                    return
                yield batch
        finally:  # left early (or the walk ended): the batches' generator ends on the loop
            closer = getattr(batches, "aclose", None)
            if closer is not None and self._pid == _pid and not self._runner.stopping:
                with contextlib.suppress(RuntimeError):  # called from the client's thread
                    self._run(closer())

    def _whole(
        self, export: Callable[..., Coroutine[Any, Any, R]], name: str, *args: Any, **kwargs: Any
    ) -> R:
        self._check_process()
        with self._lock:
            if self._closing:
                raise RuntimeError(f"{name}(): the walk is closed")
            return self._run(self._exporting(export, name, *args, **kwargs))

    async def _exporting(
        self, export: Callable[..., Coroutine[Any, Any, R]], name: str, *args: Any, **kwargs: Any
    ) -> R:
        self._task = asyncio.current_task()
        try:
            if self._closing:  # close() from another thread came first: no empty export
                raise RuntimeError(f"{name}(): the walk is closed")
            return await export(*args, **kwargs)
        except asyncio.CancelledError:
            if self._closing:  # close() from another thread
                raise RuntimeError(f"{name}(): the walk was closed meanwhile") from None
            raise
        finally:
            self._task = None


# --- the client -------------------------------------------------------------------------------


class SyncWatch(_SyncStream[T]):
    """A blocking iterator of a watch's changes (``SyncClient.watch_orders`` and the
    others): ``for``, ``next()``, ``close()`` and ``with``, as :class:`Watch` is async. A
    change counts as handled when the next one is asked for or the watch is closed."""

    __slots__ = ()

    _walk: Watch[T]

    @property
    def failures(self) -> int:
        """Polls that failed and were tried again at the next interval."""
        return self._walk.failures


class SyncClient:
    """A blocking client of the read API: :class:`Client` run on an event loop of its own.

    Use it as ``with SyncClient(...) as client:`` or call :meth:`close` when done. It takes
    :class:`Client`'s arguments and offers the same operations, ``with_response`` and the
    four streams (as :class:`SyncWalk` iterators), with the same types and errors. One
    SyncClient may be used from many threads at once, and from a thread whose event loop is
    running (the call blocks that thread). ``KeyboardInterrupt`` during a call ends that
    call's requests before it propagates. ``on_retry`` callbacks run on the client's own
    thread.
    """

    __slots__ = ("__weakref__", "_args", "_client", "_finalizer", "_own_runner", "_pid")

    # --- generated: SyncClient from Client (python tools/sync_gen.py) ---
    def __init__(
        self,
        network: Network | NetworkName = Network.MAINNET,
        *,
        base_url: str | None = None,
        testnet_base_url: str | None = None,
        timeout: float | aiohttp.ClientTimeout = 10.0,
        max_retries: int = 3,
        max_connections: int = 100,
        rate_limit: float | None = None,
        deadline: float | None = None,
        max_response_bytes: int = 32 * 1024 * 1024,
        coalesce: bool = True,
        headers: Mapping[str, str] | None = None,
        session: aiohttp.ClientSession | None = None,
        trace_configs: Sequence[aiohttp.TraceConfig] | None = None,
        limiter: Limiter | None = None,
        on_retry: Callable[[RetryEvent], object] | None = None,
        retry_after_cap: float = 60.0,
        telemetry: bool = False,
        proxy: str | None = None,
        ssl: ssl_module.SSLContext | bool | None = None,
        trust_env: bool = False,
        cache: CacheBackend | None = None,
    ) -> None:
        """Set up a client and start its thread; nothing connects until the first call.

        Args:
            network: the network every operation goes to unless it says otherwise: a
                :class:`Network` or its name in any case.
            base_url: the main-network host (else ``ASYNCAPI_BASE_URL``).
            testnet_base_url: the test-network host (else ``ASYNCAPI_TESTNET_BASE_URL``).
            timeout: seconds for one attempt (connect, send, follow its redirects, read the
                body), or an ``aiohttp.ClientTimeout`` (its ``total`` bounds the attempt the
                same way, its other fields are aiohttp's); also bounds each question to the
                limiter.
            max_retries: retries after the first attempt.
            max_connections: simultaneous connections of the client's own session.
            rate_limit: requests per second, shorthand for ``LocalLimiter([Rate(x, 1.0)])``
                (a fraction x is ``Rate(1, 1 / x)``: one request every ``1 / x`` seconds).
            deadline: seconds for a whole operation, retries and waits included (None: no
                deadline); a call's own ``deadline=`` overrides it.
            max_response_bytes: a larger body is refused while it streams in.
            coalesce: identical GETs in flight at once share one request.
            headers: extra headers sent with every request.
            session: refused (``ValueError``): an aiohttp session works only on the loop it was
                made on, and a SyncClient runs a loop of its own.
            trace_configs: aiohttp trace configs for the client's own session.
            limiter: a :class:`Limiter` (``LocalLimiter``, a fleet's ``RedisLimiter``) every
                attempt asks first; never closed by the client. Not with ``rate_limit``.
            on_retry: called with a :class:`RetryEvent` before each retry's wait (default:
                one INFO log line); what it raises is logged and ignored.
            retry_after_cap: a ``Retry-After`` (or a 429 hold) longer than this many seconds
                is not waited for: the ``RateLimitError`` is raised at once, and the
                network is held for this long only.
            telemetry: emit OpenTelemetry spans and metrics through the global providers
                (needs the extra ``asyncapi-client[otel]``).
            proxy: an ``http://`` forward proxy every request goes through (credentials in
                the URL are sent to the proxy as ``Proxy-Authorization``).
            ssl: an ``ssl.SSLContext`` to verify servers with (e.g. trusting your own CA);
                None or True: the system's trust store; False: no verification at all.
            trust_env: read ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` and ``~/.netrc``
                from the environment, as aiohttp does.
            cache: a :class:`MemoryCache` or a fleet's ``RedisCache``: the operations its
                ``ttl`` names are answered from it while fresh (None: no cache). Never
                closed by the client; several clients may share one.

        ``proxy``, ``ssl`` and ``trust_env`` configure the client's own session: with a
        ``session`` of yours, configure that session instead.
        """
        self._start(
            network,
            base_url=base_url,
            testnet_base_url=testnet_base_url,
            timeout=timeout,
            max_retries=max_retries,
            max_connections=max_connections,
            rate_limit=rate_limit,
            deadline=deadline,
            max_response_bytes=max_response_bytes,
            coalesce=coalesce,
            headers=headers,
            session=session,
            trace_configs=trace_configs,
            limiter=limiter,
            on_retry=on_retry,
            retry_after_cap=retry_after_cap,
            telemetry=telemetry,
            proxy=proxy,
            ssl=ssl,
            trust_env=trust_env,
            cache=cache,
        )

    @property
    def network(self) -> Network:
        """The network every operation goes to unless it says otherwise."""
        return self._target.network

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._target.closed

    @property
    def limiter(self) -> Limiter:
        """The limiter every attempt asks: the one given as ``limiter=``, or the client's own
        ``LocalLimiter`` (``rate_limit=``'s rate, or none, keeping only the 429 hold).
        ``await client.limiter.clear_hold()`` ends a 429 hold."""
        return self._target.limiter

    def set_testing(self, testing: bool = True, *, max_retries: int | None = None) -> None:
        """Testing mode for this client only: no back-off, Retry-After waits, 429 holds or
        learned limits (the server's 429 comes back as RateLimitError).

        Attempts still happen (``max_retries`` sets how many while testing), so a bot's
        tests exercise its error handling without sleeping. ``set_testing(False)`` goes
        back to the client's own settings, which testing mode never changes.

        Args:
            testing: True to turn testing mode on, False to turn it off.
            max_retries: retries after a failed attempt while testing (default: the
                client's ``max_retries``).
        """
        self._target.set_testing(testing, max_retries=max_retries)

    def tokens(
        self,
        *,
        search: str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> Sequence[Token]:
        """The token directory (``GET /api/tokens``).

        Args:
            search: sent as the query parameter ``search`` when given.
            network: this call's network instead of the client's (a :class:`Network` or
                its name, any case).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(self._target.tokens(search=search, network=network, deadline=deadline))

    def token_markets(
        self,
        token: str,
        *,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> Sequence[Market]:
        """A token's markets across venues (``GET /api/aggregated/tokens/{token}/markets``).

        Args:
            token: the token's address.
            network: the network to ask; by default the test network, where the spec
                addresses this call (not the client's network).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(self._target.token_markets(token, network=network, deadline=deadline))

    def pool(
        self,
        pool_id: str,
        *,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> Pool:
        """One order-book pool (``GET /api/clob/pools/{poolId}``).

        Args:
            pool_id: the pool's id.
            network: this call's network instead of the client's (a :class:`Network` or
                its name, any case).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(self._target.pool(pool_id, network=network, deadline=deadline))

    def user(
        self,
        address: str,
        *,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> UserProfile:
        """A user's profile: balances, orders, positions (``GET /api/clob/users/{address}``).

        Args:
            address: the user's address.
            network: this call's network instead of the client's (a :class:`Network` or
                its name, any case).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(self._target.user(address, network=network, deadline=deadline))

    def orders(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | OrderStatusName | None = None,
        side: Side | SideName | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> OrdersPage:
        """One page of a user's orders (``GET /api/clob/users/{address}/orders``).

        Args:
            address: the user's address.
            market: only orders of this market.
            status: only orders in this state: an :class:`OrderStatus` or its name in any
                case (sent upper case).
            side: only orders of this side: a :class:`Side` or its name in any case.
            limit: at most this many orders on the page.
            cursor: the ``cursor`` of the previous page, to fetch the page after it.
            network: this call's network instead of the client's (a :class:`Network` or
                its name, any case).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(
            self._target.orders(
                address,
                market=market,
                status=status,
                side=side,
                limit=limit,
                cursor=cursor,
                network=network,
                deadline=deadline,
            )
        )

    def leaderboard(
        self,
        *,
        page: int | None = None,
        limit: int | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> LeaderboardPage:
        """One page of the referral leaderboard (``GET /api/dash/leaderboard``).

        Args:
            page: the page number, from 1.
            limit: entries per page.
            network: this call's network instead of the client's (a :class:`Network` or
                its name, any case).
            deadline: seconds for the whole call, retries and waits included; None: no
                deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's ``deadline``.
        """
        return self._run(
            self._target.leaderboard(page=page, limit=limit, network=network, deadline=deadline)
        )

    def iter_order_pages(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | OrderStatusName | None = None,
        side: Side | SideName | None = None,
        page_size: int | None = None,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> SyncWalk[OrdersPage]:
        """Each page of a user's orders, following ``cursor``, one page fetched ahead.

        Arguments (and ``resume``) are checked here, before any request. Close it early
        with ``close()`` or ``with``: the fetch ahead is cancelled. Its
        ``checkpoint`` moves at page boundaries; ``resume=`` takes the checkpoint of an
        order walk of the same user, filters, network and page size (``iter_orders`` or
        this one) and hands out what follows it, starting with the rest of its page. When
        the page at the checkpoint no longer has the recorded order where it was, the walk
        raises :class:`PaginationError` rather than skip or repeat orders.

        Args:
            address: the user's address.
            market: only orders of this market, as for :meth:`orders`.
            status: only orders in this state, as for :meth:`orders`.
            side: only orders of this side, as for :meth:`orders`.
            page_size: orders per page, sent as ``limit``.
            resume: a :class:`Checkpoint` (or its JSON text) to continue after.
            network: the walk's network instead of the client's.
            deadline: seconds for each page's request, retries and waits included; None:
                no deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's.
        """
        return SyncWalk(
            self,
            self._target.iter_order_pages(
                address,
                market=market,
                status=status,
                side=side,
                page_size=page_size,
                resume=resume,
                network=network,
                deadline=deadline,
            ),
        )

    def iter_orders(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | OrderStatusName | None = None,
        side: Side | SideName | None = None,
        page_size: int | None = None,
        max_items: int | None = None,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> SyncWalk[Order]:
        """Every order of a user, page after page; stops after ``max_items`` when given.

        ``walk.checkpoint`` is the position after the last order handed out; ``resume=``
        continues from one (``max_items`` then counts the orders of the resumed walk), and
        raises :class:`PaginationError` when the recorded order is no longer where it was.

        Args:
            address: the user's address.
            market: only orders of this market, as for :meth:`orders`.
            status: only orders in this state, as for :meth:`orders`.
            side: only orders of this side, as for :meth:`orders`.
            page_size: orders per page, sent as ``limit``.
            max_items: stop after this many orders.
            resume: a :class:`Checkpoint` (or its JSON text) to continue after.
            network: the walk's network instead of the client's.
            deadline: seconds for each page's request, retries and waits included; None:
                no deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's.
        """
        return SyncWalk(
            self,
            self._target.iter_orders(
                address,
                market=market,
                status=status,
                side=side,
                page_size=page_size,
                max_items=max_items,
                resume=resume,
                network=network,
                deadline=deadline,
            ),
        )

    def iter_leaderboard_pages(
        self,
        *,
        page_size: int | None = None,
        concurrency: int = 4,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> SyncWalk[LeaderboardPage]:
        """Each leaderboard page in order; pages after the first are fetched concurrently.

        A page holds only the entries whose address the walk had not yielded before (a tie
        split across two pages keeps both). The walk ends after the last page or the first
        empty one; a page after the first that brings no new address raises
        :class:`PaginationError` naming it. ``resume=`` works as for :meth:`iter_leaderboard`.

        Args:
            page_size: entries per page, sent as ``limit``.
            concurrency: at most this many page requests in flight, and pages held ahead.
            resume: a :class:`Checkpoint` (or its JSON text) to continue after.
            network: the walk's network instead of the client's.
            deadline: seconds for each page's request, retries and waits included; None:
                no deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's.
        """
        return SyncWalk(
            self,
            self._target.iter_leaderboard_pages(
                page_size=page_size,
                concurrency=concurrency,
                resume=resume,
                network=network,
                deadline=deadline,
            ),
        )

    def iter_leaderboard(
        self,
        *,
        page_size: int | None = None,
        max_items: int | None = None,
        concurrency: int = 4,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> SyncWalk[LeaderboardEntry]:
        """Every leaderboard entry in rank order, each address once; at most ``max_items``.

        ``resume=`` continues after a checkpoint of a leaderboard walk with the same page
        size and network, and raises :class:`PaginationError` when the recorded address is
        no longer where it was on its page.

        Args:
            page_size: entries per page, sent as ``limit``.
            max_items: stop after this many entries.
            concurrency: at most this many page requests in flight, and pages held ahead.
            resume: a :class:`Checkpoint` (or its JSON text) to continue after.
            network: the walk's network instead of the client's.
            deadline: seconds for each page's request, retries and waits included; None:
                no deadline; not given (:data:`USE_CLIENT_DEFAULT`): the client's.
        """
        return SyncWalk(
            self,
            self._target.iter_leaderboard(
                page_size=page_size,
                max_items=max_items,
                concurrency=concurrency,
                resume=resume,
                network=network,
                deadline=deadline,
            ),
        )

    def watch_orders(
        self,
        address: str,
        *,
        market: str | None = None,
        side: Side | SideName | None = None,
        interval: float = 1.0,
        state: WatchState | None = None,
        initial: bool = False,
    ) -> SyncWatch[OrderChange]:
        """Every change of a user's orders from now on: ``"new"``, ``"updated"``,
        ``"closed"`` (see :class:`OrderChange`); no final state is missed.

        The orders when iteration starts are the baseline (with ``initial``, its open orders
        come first as ``"new"``). Each change is delivered at least once: it counts as
        handled when the next is asked for or the watch is closed; with ``state`` (a
        :class:`FileWatchState`, or a fleet's ``RedisWatchState``) a watch started again goes
        on where it was. Polls every ``interval`` seconds, or as often as the server asks if
        that is less often, with conditional requests; a failed poll is tried again.

        Args:
            address: the user's address.
            market: only orders of this market.
            side: only orders of this side.
            interval: seconds between polls.
            state: where the baseline, positions and undelivered changes are kept.
            initial: first deliver the baseline's open orders as ``"new"``.
        """
        return SyncWatch(
            self,
            self._target.watch_orders(
                address, market=market, side=side, interval=interval, state=state, initial=initial
            ),
        )

    def watch_pool(
        self, pool_id: str, *, interval: float = 1.0, state: WatchState | None = None
    ) -> SyncWatch[PoolChange]:
        """Every change of a pool from now on, one :class:`PoolChange` per poll that saw one.

        Args:
            pool_id: the pool's id.
            interval: seconds between polls (longer when the server asks).
            state: where the last seen pool and undelivered changes are kept.
        """
        return SyncWatch(self, self._target.watch_pool(pool_id, interval=interval, state=state))

    def watch_leaderboard(
        self, *, top: int = 100, interval: float = 5.0, state: WatchState | None = None
    ) -> SyncWatch[LeaderboardChange]:
        """Every change of the leaderboard's first ``top`` ranks from now on, one
        :class:`LeaderboardChange` per poll that saw one.

        Args:
            top: how many ranks to watch.
            interval: seconds between polls (longer when the server asks).
            state: where the last seen entries and undelivered changes are kept.
        """
        return SyncWatch(
            self, self._target.watch_leaderboard(top=top, interval=interval, state=state)
        )

    def wait_for_order(
        self,
        address: str,
        transaction_id: str,
        *,
        statuses: Iterable[OrderStatus | OrderStatusName] | None = None,
        interval: float = 1.0,
        timeout: float | None = None,
    ) -> Order:
        """The order once its status is in ``statuses`` (default: FILLED, CANCELLED, EXPIRED).

        An id the address does not have raises :class:`NotFoundError` after one full look;
        an order that reaches another final state raises ValueError (it can never change
        again); ``timeout`` passing raises :class:`RequestTimeoutError`. Failed polls are
        tried again at the next interval.

        Args:
            address: the user's address.
            transaction_id: the order's transaction id.
            statuses: the states to wait for.
            interval: seconds between polls.
            timeout: seconds to wait in all (None: no bound).
        """
        return self._run(
            self._target.wait_for_order(
                address, transaction_id, statuses=statuses, interval=interval, timeout=timeout
            )
        )

    # --- end generated ---

    def _start(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("session") is not None:
            raise ValueError(
                "session= cannot be used with a SyncClient: it runs on an event loop of its "
                "own, and an aiohttp.ClientSession works only on the loop it was made on; "
                "use headers=, proxy=, ssl=, trust_env= and trace_configs= instead"
            )
        self._own_runner, self._client = _open(args, kwargs)
        self._args = (args, kwargs)  # a forked child makes its own client with them
        self._pid = _pid
        self._finalizer = weakref.finalize(self, self._own_runner.abandon)

    @property
    def _runner(self) -> _Runner:
        """The runner of this process (made at the first use in a forked child)."""
        if self._pid != _pid:
            self._renew()
        return self._own_runner

    @property
    def _target(self) -> Client:
        """The async client of this process (made at the first use in a forked child)."""
        if self._pid != _pid:
            self._renew()
        return self._client

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        runner = self._runner
        _refuse_in_running_loop(coro, runner)
        return runner.run(coro)

    def _renew(self) -> None:
        """In a child forked after this client was made: a thread, loop and client of the
        child's own (a client closed before the fork stays closed). The parent's runner is
        kept as it is (see ``_inherited``)."""
        with _fork_lock:
            if self._pid == _pid:  # another thread of the child renewed it meanwhile
                return
            old = self._own_runner
            if not old.stopping:
                runner, client = _open(*self._args)
                self._finalizer.detach()
                _inherited.append(old)
                self._own_runner, self._client = runner, client
                self._finalizer = weakref.finalize(self, runner.abandon)
            self._pid = _pid

    @property
    def with_response(self) -> SyncWithResponse:
        """The six operations, each returning a :class:`Response` (as ``Client.with_response``)."""
        return SyncWithResponse(self)

    def close(self) -> None:
        """Cancel the calls still running, close the connections and end the client's thread.

        When it returns, every thread and connection the client started has ended. Calling
        it twice is fine; calls made afterwards raise ``RuntimeError``.
        """
        self._runner.close()
        self._finalizer.detach()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        # the attributes themselves: in a forked child, repr() does not renew the client
        state = "closed" if self._own_runner.stopping else "open"
        return f"<SyncClient {state} {self._client.network.value}>"


class SyncWithResponse:
    """``client.with_response`` of a :class:`SyncClient`: the six operations, each returning
    a :class:`Response`. Each is SyncClient's own operation (same arguments and checks) run
    with this object's target, the async client's ``with_response``."""

    __slots__ = ("_owner", "_run")

    def __init__(self, owner: SyncClient) -> None:
        self._owner = owner  # keeps the client alive while this is used
        self._run = owner._run

    @property
    def _target(self) -> WithResponse:
        return self._owner._target.with_response

    tokens = SyncResponseOf(SyncClient.tokens)
    token_markets = SyncResponseOf(SyncClient.token_markets)
    pool = SyncResponseOf(SyncClient.pool)
    user = SyncResponseOf(SyncClient.user)
    orders = SyncResponseOf(SyncClient.orders)
    leaderboard = SyncResponseOf(SyncClient.leaderboard)
