"""The fake server: the six operations over aiohttp.web, on two loopback ports, with faults.

Routing works on the raw request target, so a path parameter is exactly one segment,
percent-decoded (``%2F`` stays inside the value). Every request is recorded, answered or not.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import enum
import hashlib
import hmac
import math
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Final, Self, TypeVar
from urllib.parse import unquote

import attrs
import orjson
from aiohttp import web
from multidict import CIMultiDict

from asyncapi_client._network import Network, parse_network

from ._activity import Activity, check_rate
from ._changes import Change
from ._data import FakeExchange, WireDict
from ._faults import Decision, Fault, FaultSchedule
from ._gate import DEFAULT_WAIT, Gate, check_timeout
from ._quota import HeaderMode, Quota, QuotaWindows, Verdict, check_header_mode
from ._records import RecordedRequest
from ._script import Reply, Scripts, ScriptStep, check_operation
from ._thread import LoopThread

__all__ = ["FakeServer", "Quota", "RecordedRequest"]

T = TypeVar("T")

DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
_STATUSES: Final = frozenset({"OPEN", "FILLED", "PARTIALLY_FILLED", "CANCELLED", "EXPIRED"})
_SIDES: Final = frozenset({"BUY", "SELL"})
_DIGITS: Final = re.compile(r"[0-9]+", re.ASCII).fullmatch
# the age of the place (orders older than it come next), filter digest, signature
_CURSOR: Final = struct.Struct(">I8s8s")
#: Headers every answer of one request carries (rate limits, poll interval).
_EXTRA: Final = web.RequestKey[dict[str, str]]("asyncapi_client.testing.headers")


class _Reject(Exception):
    """An answer other than 200, raised from deep inside an operation."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _State(enum.Enum):
    UNOPENED = "unopened"
    STARTED = "started"
    CLOSED = "closed"


def _find(mapping: Mapping[str, T], key: str) -> tuple[str, T] | None:
    """The entry for ``key``, matched exactly or else case-insensitively (hex addresses)."""
    value = mapping.get(key)
    if value is not None:
        return key, value
    folded = key.casefold()
    for name, candidate in mapping.items():
        if name.casefold() == folded:
            return name, candidate
    return None


_NO_DECISION: Final = Decision()


def _wake(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)


def _reset(request: web.Request) -> None:
    """Reset the connection (a TCP RST, not an orderly close) without an answer."""
    transport = request.transport
    if transport is None:  # pragma: no cover - the client is gone already
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _cut_short(
    request: web.Request, status: int, headers: Mapping[str, str], body: bytes
) -> web.StreamResponse:
    """Promise all of ``body`` in Content-Length, send its first half, then close."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(payload), content_type="application/json", headers=headers
    )


def _etag(body: bytes) -> str:
    """A strong entity tag of ``body``: a digest of its bytes, quoted (SHA-1: the fastest
    digest here, and no security rests on it)."""
    return f'"{hashlib.sha1(body, usedforsecurity=False).hexdigest()}"'


def _none_match(header: str | None, etag: str) -> bool:
    """Whether ``If-None-Match: header`` names ``etag`` (weak comparison, RFC 9110 13.1.2)."""
    if not header:
        return False
    for candidate in header.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


def _seconds_text(value: float) -> str:
    """Seconds as a header value: ``5`` for 5.0, ``2.5`` for 2.5."""
    return str(int(value)) if value.is_integer() else repr(value)


def _check_poll_interval(value: object) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= 86_400
    ):
        raise ValueError(f"poll_interval must be seconds in (0, 86400] or None, got {value!r}")
    return float(value)


def _check_quota(value: object) -> Quota | None:
    if value is not None and not isinstance(value, Quota):
        raise TypeError(f"quota must be a Quota(limit, window) or None, got {value!r}")
    return value


async def _add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Put the request's server-wide headers on its answer (those it does not set itself)."""
    extra = request.get(_EXTRA)
    if extra:
        headers = response.headers
        for name, value in extra.items():
            if name not in headers:
                headers[name] = value


@attrs.define(slots=True)
class _Outcome:
    """How one request was answered, for its record."""

    status: int | None = None
    decision: Decision = _NO_DECISION
    reply: Reply | None = None


def _positive_param(query: Mapping[str, str], name: str, default: int, maximum: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    digits = text.lstrip("0")
    if _DIGITS(text) is None or not digits:
        raise _Reject(400, f"{name} must be a positive integer, got {text[:40]!r}")
    value = int(digits) if len(digits) <= 12 else maximum + 1
    if value > maximum:
        raise _Reject(400, f"{name} must be at most {maximum}, got {value}")
    return value


def _choice_param(query: Mapping[str, str], name: str, allowed: frozenset[str]) -> str | None:
    text = query.get(name)
    if not text:
        return None
    if text.upper() not in allowed:
        raise _Reject(400, f"unknown {name} {text!r}: expected one of {', '.join(sorted(allowed))}")
    return text.upper()


def route(raw_path: str, prefix: str = "") -> tuple[str | None, str]:
    """(operation, decoded path parameter) for a raw request target; None: no route.

    The parameter is exactly one raw segment, percent-decoded (``%2F`` stays inside it).
    """
    path = raw_path.partition("?")[0]
    api = prefix + "/api/"
    if not path.startswith(api):
        return None, ""
    match path[len(api) :].split("/"):
        case ["tokens"]:
            return "tokens", ""
        case ["aggregated", "tokens", token, "markets"] if token:
            return "token_markets", unquote(token)
        case ["clob", "pools", pool_id] if pool_id:
            return "pool", unquote(pool_id)
        case ["clob", "users", address] if address:
            return "user", unquote(address)
        case ["clob", "users", address, "orders"] if address:
            return "orders", unquote(address)
        case ["dash", "leaderboard"]:
            return "leaderboard", ""
    return None, ""


class _Closing:
    """Closes a server served ``in_thread()`` and ends its thread, once: when its block is
    left, or at the interpreter's exit (atexit runs while daemon threads still do; a
    generator finalised later would wait for a thread that no longer runs)."""

    __slots__ = ("done", "pid", "runner", "server")

    def __init__(self, server: FakeServer, runner: LoopThread) -> None:
        self.server = server
        self.runner = runner
        self.pid = os.getpid()
        self.done = False

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        if os.getpid() != self.pid:  # a forked child: the thread is the parent's
            return
        try:
            self.runner.call(self.server.close())
        finally:
            self.runner.stop()


class FakeServer:
    """The fake exchange served over loopback: one port per network, all six operations.

    ``async with FakeServer(FakeExchange.generate(seed=7)) as server:`` then point a Client at
    ``server.base_url`` and ``server.testnet_base_url``. ``start()``/``close()`` do the same
    without a block. ``prefix`` puts every path under a base path (``"/gw"`` -> ``/gw/api/...``).
    ``seed`` drives the fault schedule and signs the cursors. ``exchange`` is the data
    served (edit it to set up a scenario), ``host`` the loopback address the two ports are
    bound on.

    ``activity``: changes a second applied to the exchange while the server runs (see
    :meth:`FakeExchange.advance`), on the server's event loop. ``quota``: at most
    ``Quota.limit`` requests of one network answered per fixed window, then 429 with
    ``Retry-After``; ``rate_limit_headers`` (``"ietf"``, ``"split"``, ``"x"`` or None) says how
    every answer advertises it. ``poll_interval``: seconds sent as ``X-Poll-Interval`` on every
    answer. Every 200 of normal service carries a strong ``ETag``, and a request whose
    ``If-None-Match`` names it gets a 304.
    """

    def __init__(
        self,
        exchange: FakeExchange,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        testnet_port: int = 0,
        seed: int = 0,
        prefix: str = "",
        activity: float | None = None,
        quota: Quota | None = None,
        rate_limit_headers: HeaderMode | None = None,
        poll_interval: float | None = None,
    ) -> None:
        if not isinstance(exchange, FakeExchange):
            raise TypeError(f"exchange must be a FakeExchange, got {exchange!r}")
        ports: dict[str, object] = {"port": port, "testnet_port": testnet_port}
        for name, value in ports.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
                raise ValueError(f"{name} must be an int in 0..65535, got {value!r}")
        if not _is_int(seed):
            raise ValueError(f"seed must be an int, got {seed!r}")
        given: object = prefix
        if not isinstance(given, str) or any(c in given for c in "?#"):
            raise ValueError(f"prefix must be a path such as '/gw', got {prefix!r}")
        self._activity_rate = check_rate(activity)
        self._quota = QuotaWindows(_check_quota(quota))
        self._header_mode = check_header_mode(rate_limit_headers)
        poll = _check_poll_interval(poll_interval)
        self._poll_interval = poll
        self._poll_header = None if poll is None else _seconds_text(poll)
        self._activity: Activity | None = None
        self.exchange = exchange
        self.host = host
        self.seed = seed
        self.prefix = ("/" + prefix.strip("/")) if prefix.strip("/") else ""
        self._wanted_ports = {Network.MAINNET: port, Network.TESTNET: testnet_port}
        self._ports: dict[Network, int] = {}
        self._runners: list[web.AppRunner] = []
        self._faults = FaultSchedule(seed)
        self._scripts = Scripts()
        self._gates: dict[str, Gate] = {}
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._sleepers: set[asyncio.Future[None]] = set()
        self._watchers: list[Callable[[], None]] = []
        self._watchers_lock = threading.Lock()
        self._cursor_key = hashlib.sha256(f"asyncapi-fake-cursor/{seed}".encode()).digest()
        self._state = _State.UNOPENED

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> Self:
        """Bind both ports and start answering. Returns the server."""
        if self._state is _State.CLOSED:
            raise RuntimeError("this FakeServer is closed; create a new one")
        if self._state is _State.STARTED:
            return self
        self._quota.start(time.monotonic())
        try:
            for network in Network:
                runner = web.AppRunner(
                    self._make_app(network),
                    access_log=None,
                    shutdown_timeout=2.0,
                    handler_cancellation=True,  # a client that goes away stops its request
                )
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, self.host, self._wanted_ports[network])
                await site.start()
                self._ports[network] = runner.addresses[0][1]
        except BaseException:
            await self.close()
            raise
        self._state = _State.STARTED
        if self._activity_rate is not None:
            self._activity = Activity(self._activity_rate, self._apply_changes)
            self._activity.start()
        return self

    def _apply_changes(self, n: int) -> None:
        """The activity's turn: ``n`` changes, then every ``wait_until`` looks again."""
        if self.exchange._advance(n):
            self._changed()

    async def close(self) -> None:
        """Stop answering and release both ports. Calling it twice is fine."""
        self._state = _State.CLOSED
        activity, self._activity = self._activity, None
        if activity is not None:
            activity.stop()
        for sleeper in self._sleepers:  # injected latencies end now
            _wake(sleeper)
        for gate in list(self._gates.values()):  # held requests go now
            gate.close()
        runners, self._runners = self._runners, []
        if runners:
            # Python 3.11 leaks a connection accepted on the turn its server closes (the
            # half-made transport is dropped unclosed): take in those already waiting first.
            for _ in range(5):
                await asyncio.sleep(0)
        for runner in runners:
            await runner.cleanup()

    async def serve_forever(self) -> None:
        """Serve until the task running this is cancelled, then close."""
        await self.start()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            await self.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- addresses --------------------------------------------------------------------

    def port_of(self, network: Network | str) -> int:
        """The port bound for ``network`` (started servers only)."""
        port = self._ports.get(parse_network(network))
        if port is None or self._state is not _State.STARTED:
            raise RuntimeError("the FakeServer is not running: use `async with` or start()")
        return port

    def url_of(self, network: Network | str) -> str:
        """The base URL of ``network``: what to pass to Client as its host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port_of(network)}{self.prefix}"

    @property
    def base_url(self) -> str:
        """The main network's base URL, ``http://127.0.0.1:<port>`` (plus the prefix)."""
        return self.url_of(Network.MAINNET)

    @property
    def testnet_base_url(self) -> str:
        """The test network's base URL, on its own port."""
        return self.url_of(Network.TESTNET)

    @property
    def port(self) -> int:
        """The main network's port (started servers only)."""
        return self.port_of(Network.MAINNET)

    @property
    def testnet_port(self) -> int:
        """The test network's port (started servers only)."""
        return self.port_of(Network.TESTNET)

    # --- activity, quota and headers ---------------------------------------------------

    @property
    def journal(self) -> list[Change]:
        """Every change of the exchange so far, in order (``exchange.journal``)."""
        return self.exchange.journal

    @property
    def activity(self) -> float | None:
        """Changes a second applied while the server runs (None: none)."""
        return self._activity_rate

    @property
    def quota(self) -> Quota | None:
        """The quota of each network (None: none); set it to change it at once."""
        return self._quota.quota

    @quota.setter
    def quota(self, value: Quota | None) -> None:
        self._quota.set(_check_quota(value), time.monotonic())

    @property
    def started_at(self) -> float | None:
        """``time.monotonic()`` when the server started (its quota windows count from
        then); None before it started."""
        return None if self._state is _State.UNOPENED else self._quota.started

    def quota_window(self, at: float) -> int | None:
        """The number of the quota window that holds ``at`` (a ``time.monotonic()`` value,
        such as a recorded request's ``time``): windows are counted from 0 when the server
        started, at the current quota's window length. None without a quota.

        For counting where a client's requests landed: ``Counter(server.quota_window(r.time)
        for r in server.requests if r.status == 200)``.
        """
        return self._quota.index(float(at))

    @property
    def rate_limit_headers(self) -> HeaderMode | None:
        """How every answer advertises the quota: ``"ietf"``, ``"split"``, ``"x"`` or None."""
        return self._header_mode

    @property
    def poll_interval(self) -> float | None:
        """Seconds sent as ``X-Poll-Interval`` on every answer (None: not sent)."""
        return self._poll_interval

    # --- faults and records -----------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request seen so far, in the order they arrived (a live list).

        A request in flight has ``status`` and ``answered_at`` None; its entry is replaced by
        the final record once it has been answered.
        """
        return self._requests

    @property
    def in_flight(self) -> int:
        """How many requests have arrived and not yet been answered (held at a gate included)."""
        return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests in flight at once since the server started."""
        return self._max_in_flight

    @property
    def faults(self) -> Mapping[str, Fault]:
        """The faults set, by operation name or ``"*"``."""
        return self._faults.faults

    def set_fault(self, operation: str, fault: Fault | None) -> None:
        """Inject ``fault`` on ``operation`` (or ``"*"``: those without their own); None clears.

        The schedule restarts: the same requests after the same ``set_fault`` on a server
        with the same seed meet the same faults.
        """
        self._faults.set(operation, fault)

    def clear_faults(self) -> None:
        """Remove every fault: answers are right and immediate again."""
        self._faults.clear()

    def script(self, operation: str, *replies: ScriptStep, repeat: bool = False) -> None:
        """Answer the next requests of ``operation`` (or ``"*"``: any operation) with ``replies``.

        Each reply answers one request, in order, then normal service resumes; an
        operation's own script goes before the ``"*"`` one. A reply may be a function of the
        :class:`RecordedRequest` that returns the :class:`Reply`. ``repeat=True`` makes
        ``replies`` answer every request, over and over, once queued ones are used (it replaces
        the previous repeating script of ``operation``). A scripted reply takes the place of
        any :class:`Fault` for that request.
        """
        self._scripts.add(operation, replies, repeat=repeat)

    def pending_replies(self, operation: str) -> int:
        """How many one-off scripted replies of ``operation`` are still waiting to be used."""
        return self._scripts.pending(operation)

    def clear_scripts(self, operation: str | None = None) -> None:
        """Drop the scripts of ``operation``, or of every operation (None)."""
        self._scripts.clear(operation)

    # A default bound, so that a test whose condition never comes fails instead of hanging.
    async def wait_until(
        self,
        condition: Callable[[], bool],
        *,
        timeout: float = DEFAULT_WAIT,  # noqa: ASYNC109
    ) -> None:
        """Wait until ``condition()`` is true: checked now, then each time a request arrives
        or is finished with (answered, dropped or cancelled), and each time the activity
        has applied changes.

        ``await server.wait_until(lambda: server.in_flight == 0)``. Works from any event loop,
        also while the server runs ``in_thread()``. Raises TimeoutError if the condition does
        not hold within ``timeout`` seconds.
        """
        if not callable(condition):
            raise TypeError(f"condition must be a function of no arguments, got {condition!r}")
        timeout = check_timeout(timeout)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(changed.set)

        with self._watchers_lock:
            self._watchers.append(wake)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    changed.clear()
                    if condition():
                        return
                    await changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"the condition did not hold within {timeout:g} s "
                f"({len(self._requests)} requests seen, {self._in_flight} in flight)"
            ) from None
        finally:
            with self._watchers_lock:
                self._watchers.remove(wake)

    def _changed(self) -> None:
        """Tell every ``wait_until`` to look at its condition again."""
        if self._watchers:
            with self._watchers_lock:
                watchers = list(self._watchers)
            for wake in watchers:
                wake()

    def gate(self, operation: str = "*") -> Gate:
        """Hold the requests of ``operation`` (``"*"``: any operation without its own gate).

        ``async with server.gate("pool") as gate:`` ... ``await gate.arrived(3)``,
        ``gate.release()``. Leaving the block (or ``gate.close()``) lets every held request
        go. One gate per operation at a time.
        """
        check_operation(operation)
        if self._state is _State.CLOSED:
            raise RuntimeError("this FakeServer is closed")
        if operation in self._gates:
            raise ValueError(f"{operation!r} already has a gate; close it first")
        gate = Gate(operation, self._remove_gate)
        self._gates[operation] = gate
        return gate

    def _remove_gate(self, gate: Gate) -> None:
        if self._gates.get(gate.operation) is gate:
            del self._gates[gate.operation]

    @contextmanager
    def in_thread(self) -> Iterator[Self]:
        """Serve on an event loop of its own in a background thread, for code that is not async.

        ``with FakeServer(exchange).in_thread() as server:`` starts it, and leaving the block
        closes it and ends the thread. Everything but ``start``/``close`` may be used from the
        calling thread meanwhile (use ``gate.wait_arrived()`` there rather than ``arrived()``).
        A block never left never keeps the interpreter from exiting: the server is closed at
        exit (``atexit``), while its thread still runs; in a forked child, the server and its
        thread are the parent's and are left alone.
        """
        if self._state is not _State.UNOPENED:
            raise RuntimeError("in_thread() needs a FakeServer that was never started")
        runner = LoopThread(f"{self!r}")
        closing = _Closing(self, runner)
        atexit.register(closing)
        try:
            runner.call(self.start())
            yield self
        finally:
            if not closing.done:  # (done: closed at exit already, or by the parent)
                atexit.unregister(closing)
                closing()

    def __repr__(self) -> str:
        ports = ", ".join(f"{n.value}={p}" for n, p in self._ports.items())
        return f"<FakeServer {self._state.value} seed={self.seed} {ports}>"

    # --- serving ----------------------------------------------------------------------

    def _make_app(self, network: Network) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(network, request)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        if self._header_mode is not None or self._poll_header is not None:
            app.on_response_prepare.append(_add_headers)
        return app

    async def _handle(self, network: Network, request: web.Request) -> web.StreamResponse:
        operation, param = route(request.raw_path, self.prefix)
        query: dict[str, str] = {}
        for name, value in request.query.items():
            query.setdefault(name, value)
        record = RecordedRequest(
            network=network,
            method=request.method,
            path=request.path,
            raw_path=request.raw_path,
            query=query,
            operation=operation,
            time=time.monotonic(),
            status=None,
            headers=CIMultiDict(request.headers),
            param=None if operation in (None, "tokens", "leaderboard") else param,
        )
        index = len(self._requests)
        self._requests.append(record)
        self._in_flight += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)
        self._changed()
        outcome = _Outcome(decision=_NO_DECISION)
        cancelled = False
        try:
            return await self._serve(network, request, record, param, outcome)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            self._in_flight -= 1
            final = attrs.evolve(
                record,
                status=outcome.status,
                fault=outcome.decision.kind,
                answered_at=time.monotonic(),
                reply=outcome.reply,
                cancelled=cancelled,
            )
            self._replace(index, record, final)
            self._changed()

    def _admit(self, network: Network, request: web.Request, now: float) -> Verdict | None:
        """Count the request against the quota and note the headers its answer carries."""
        verdict = self._quota.take(network, now)
        extra = {} if verdict is None else verdict.headers(self._header_mode)
        if self._poll_header is not None:
            extra["X-Poll-Interval"] = self._poll_header
        if extra:
            request[_EXTRA] = extra
        return verdict

    async def _serve(
        self,
        network: Network,
        request: web.Request,
        record: RecordedRequest,
        param: str,
        outcome: _Outcome,
    ) -> web.StreamResponse:
        """The answer to one recorded request; ``outcome`` says how it was answered."""
        operation, query = record.operation, record.query
        verdict = self._admit(network, request, record.time)
        if verdict is not None and not verdict.allowed:
            outcome.status = 429
            message = f"rate limited: over the quota of {verdict.limit} requests a window"
            return _json(429, {"error": message}, {"Retry-After": verdict.retry_after()})
        gate: Gate | None = None
        if operation is not None and request.method == "GET":
            step = self._scripts.take(operation)
            if step is not None:
                outcome.reply = step if isinstance(step, Reply) else self._respond(step, record)
            else:
                outcome.decision = self._faults.decide(operation, request.raw_path)
            gate = self._gates.get(operation) or self._gates.get("*")
        if gate is not None:
            await gate.pass_through()
        response: web.StreamResponse
        reply, decision = outcome.reply, outcome.decision
        if reply is not None:
            response = await self._reply(reply, request, operation, param, query)
            outcome.status = None if reply.drop or reply.reset else response.status
            return response
        if decision.latency > 0:
            await self._pause(decision.latency)
        if request.method != "GET":
            response = _json(405, {"error": "only GET is served"}, {"Allow": "GET"})
        elif decision.kind is None:
            response = self._answer(operation, param, query, request.raw_path)
            response = self._not_modified(request, response)
        else:
            response = await self._inject(decision, request, operation, param, query)
        outcome.status = None if decision.kind == "drop" else response.status
        return response

    @staticmethod
    def _not_modified(request: web.Request, response: web.Response) -> web.Response:
        """A 304 in place of a 200 whose ETag the request's ``If-None-Match`` names."""
        etag = response.headers.get("ETag")
        if response.status != 200 or etag is None:
            return response
        if not _none_match(request.headers.get("If-None-Match"), etag):
            return response
        return web.Response(status=304, headers={"ETag": etag})

    def _replace(self, index: int, record: RecordedRequest, final: RecordedRequest) -> None:
        """Put ``final`` where ``record`` is; not at all if the test has removed it meanwhile."""
        requests = self._requests
        if index < len(requests) and requests[index] is record:
            requests[index] = final
            return
        for position, candidate in enumerate(requests):
            if candidate is record:
                requests[position] = final
                return

    @staticmethod
    def _respond(step: ScriptStep, record: RecordedRequest) -> Reply:
        """The Reply a scripted function picks; a broken one answers 500 saying why."""
        try:
            made = step(record)  # type: ignore[operator]
        except Exception as exc:
            return Reply(500, json={"error": f"the scripted function raised {exc!r}"})
        if not isinstance(made, Reply):
            return Reply(500, json={"error": f"the scripted function returned {made!r}"})
        return made

    async def _reply(
        self,
        reply: Reply,
        request: web.Request,
        operation: str | None,
        param: str,
        query: Mapping[str, str],
    ) -> web.StreamResponse:
        """Answer with a scripted Reply."""
        if reply.delay > 0:
            await self._pause(reply.delay)
        if reply.drop:
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=200)
        if reply.reset:
            _reset(request)
            return web.Response(status=200)
        headers = CIMultiDict(reply.headers)
        if reply.body is not None:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
        elif reply.json is not None:
            body = orjson.dumps(reply.json)
        elif reply.status == 200:
            normal = self._answer(operation, param, query, request.raw_path)
            normal.headers.update(headers)
            if not reply.truncate:
                return normal
            body = normal.body if isinstance(normal.body, bytes) else b"{}"
        else:
            body = orjson.dumps({"error": f"scripted reply: HTTP {reply.status}"})
        headers.setdefault("Content-Type", "application/json")
        if reply.truncate:
            return await _cut_short(request, reply.status, headers, body)
        return web.Response(status=reply.status, body=body, headers=headers)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less if the server is closing.

        A timer and a future, not ``asyncio.timeout``: nothing here relies on cancellation.
        """
        if self._state is _State.CLOSED:
            return
        loop = asyncio.get_running_loop()
        sleeper: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _wake, sleeper)
        self._sleepers.add(sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)

    async def _inject(
        self,
        decision: Decision,
        request: web.Request,
        operation: str | None,
        param: str,
        query: Mapping[str, str],
    ) -> web.StreamResponse:
        fault = decision.fault
        assert fault is not None
        kind = decision.kind
        if kind == "rate_limit":
            header = fault.retry_after_header()
            headers = {} if header is None else {"Retry-After": header}
            return _json(429, {"error": "rate limited: slow down"}, headers)
        if kind == "error":
            status = fault.error_status
            return _json(status, {"error": f"injected fault: HTTP {status}"})
        if kind == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=200)
        # truncate and malformed send (part of) what the right answer would have been
        body = self._answer(operation, param, query, request.raw_path).body
        full = body if isinstance(body, bytes) else b"{}"
        if kind == "truncate":
            return await _cut_short(request, 200, {"Content-Type": "application/json"}, full)
        # malformed: an HTML error page, an empty body, or the JSON cut off mid-document
        if decision.variant < 0.25:
            page = b"<html><body><h1>502 Bad Gateway</h1><p>upstream error</p></body></html>"
            return web.Response(status=200, body=page, content_type="text/html")
        if decision.variant < 0.5:
            return web.Response(status=200, body=b"", content_type="application/json")
        share = (decision.variant - 0.5) * 2.0  # in [0, 1)
        cut = max(1, min(len(full) - 1, int(len(full) * (0.1 + 0.8 * share))))
        return web.Response(status=200, body=full[:cut], content_type="application/json")

    def _answer(
        self, operation: str | None, param: str, query: Mapping[str, str], raw_path: str
    ) -> web.Response:
        """The right answer to one request; a 200 carries the strong ETag of its body."""
        try:
            body = orjson.dumps(self._payload(operation, param, query, raw_path))
        except _Reject as exc:
            return _json(exc.status, {"error": exc.message})
        return web.Response(
            status=200, body=body, content_type="application/json", headers={"ETag": _etag(body)}
        )

    def _payload(
        self, operation: str | None, param: str, query: Mapping[str, str], raw_path: str
    ) -> Any:
        """What a 200 to one request holds; raises _Reject for any other answer."""
        if operation == "tokens":
            return {"tokens": self._tokens(query.get("search"))}
        if operation == "token_markets":
            return {"markets": self._markets(param)}
        if operation == "pool":
            return self._lookup(self.exchange.pools, param, "pool")[1]
        if operation == "user":
            return self._lookup(self.exchange.users, param, "user")[1]
        if operation == "orders":
            return self._orders(param, query)
        if operation == "leaderboard":
            return self._leaderboard(query)
        raise _Reject(404, f"no such path: {raw_path.partition('?')[0]}")

    # --- the six operations -----------------------------------------------------------

    def _lookup(self, mapping: Mapping[str, T], key: str, what: str) -> tuple[str, T]:
        found = _find(mapping, key)
        if found is None:
            raise _Reject(404, f"unknown {what}: {key!r}")
        return found

    def _tokens(self, search: str | None) -> Sequence[WireDict]:
        tokens = self.exchange.tokens
        if not search:
            return tokens
        q = search.casefold()
        return [
            t
            for t in tokens
            if q in t["symbol"].casefold()
            or q in t["name"].casefold()
            or q in t["address"].casefold()
        ]

    def _markets(self, token: str) -> Sequence[WireDict]:
        """By token address (any case) or by symbol (any case)."""
        found = _find(self.exchange.markets, token)
        if found is not None:
            return found[1]
        folded = token.casefold()
        for t in self.exchange.tokens:
            if folded in (t["address"].casefold(), t["symbol"].casefold()):
                return self.exchange.markets.get(t["address"], [])
        raise _Reject(404, f"unknown token: {token!r}")

    def _orders(self, address: str, query: Mapping[str, str]) -> WireDict:
        """A page of a user's orders, newest first.

        A cursor names a place by the age of the last order served (how many of the user's
        orders are older): new orders at the front do not move it, so a walk sees each
        order that existed when it started exactly once (each that kept matching its
        filters).
        """
        exchange = self.exchange
        found = _find(exchange.orders, address)
        if found is None:
            key = self._lookup(exchange.users, address, "user")[0]
            orders: list[WireDict] = []
        else:
            key, orders = found
        market = query.get("market") or None
        status = _choice_param(query, "status", _STATUSES)
        side = _choice_param(query, "side", _SIDES)
        limit = _positive_param(query, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        digest = hashlib.sha256(f"{key}\0{market}\0{status}\0{side}".encode()).digest()[:8]
        cursor = query.get("cursor")
        size = len(orders)
        below = min(self._read_cursor(cursor, digest), size) if cursor else size
        page: list[WireDict] = []
        last = below
        # Orders counted from the oldest (``orders[-1 - age]``): an order added at the front,
        # here or by the activity on another thread, moves none of them.
        for age in range(below - 1, -1, -1):
            order = orders[-1 - age]
            if (
                (market is None or order["poolId"] == market)
                and (status is None or order["status"] == status)
                and (side is None or order["side"] == side)
            ):
                if len(page) == limit:  # one more matches: there is a next page
                    return {"orders": page, "cursor": self._make_cursor(last, digest)}
                page.append(order)
                last = age
        return {"orders": page, "cursor": None}

    def _sign(self, age: int, digest: bytes) -> bytes:
        message = struct.pack(">I", age) + digest
        return hmac.new(self._cursor_key, message, hashlib.sha256).digest()[:8]

    def _make_cursor(self, age: int, digest: bytes) -> str:
        raw = _CURSOR.pack(age, digest, self._sign(age, digest))
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def _read_cursor(self, cursor: str, digest: bytes) -> int:
        """The age a cursor names: the orders younger than it come next."""
        try:
            raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
            age, seen, signature = _CURSOR.unpack(raw)
        except (binascii.Error, struct.error, ValueError):
            raise _Reject(400, f"invalid cursor {cursor!r}") from None
        if not hmac.compare_digest(signature, self._sign(age, seen)):
            raise _Reject(400, f"invalid cursor {cursor!r}")
        if seen != digest:
            raise _Reject(400, "this cursor belongs to another user or another set of filters")
        return int(age)

    def _leaderboard(self, query: Mapping[str, str]) -> WireDict:
        board = self.exchange.leaderboard
        page = _positive_param(query, "page", 1, 10**9)
        limit = _positive_param(query, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        start = (page - 1) * limit
        return {
            "leaderboard": board[start : start + limit],
            "page": page,
            "limit": limit,
            "total": len(board),
            "totalPages": math.ceil(len(board) / limit),
        }
