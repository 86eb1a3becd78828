"""``RedisWatchState``: a fleet's watches poll the server once per interval for every
process, and every change reaches every process, through Redis.

state = RedisWatchState("redis://127.0.0.1:6379/0", name="my-bots", consumer="bot-1")
async for change in client.watch_orders("0xabc", state=state):
    ...

Per watch (operation, key, filters: the source's identity) and ``name``, Redis holds:

- a **lease** (``SET NX PX``): the one process that polls, renewed at each of its polls and
  1.75 intervals long, so a dead poller is replaced within two intervals; the others ask
  for it when it would run out;
- the **state** (a hash): the source's position (baseline included), a version and an
  epoch (a token made when the state is first written): a new poller restores the position
  before polling, so it goes on without a gap or a replay;
- a **stream** (``XADD MAXLEN ~``, at most about :data:`STREAM_LENGTH` changes): the poller
  writes the changes of a poll and the new position in one atomic step (a Lua script that
  also checks the lease is still its own);
- per ``consumer``, its **position**: the stream id of the last change it handled, so a
  process started again with the same ``consumer`` goes on after it, on any host.

Every process reads the stream after its own position, so each gets every change, in order,
at least once. One blocking ``XREAD`` per event loop and state follows every stream its
watches read (:class:`_Listener`), so a process watching K addresses holds one waiting
connection, not K. Every key expires once no process watches (``ttl``, refreshed by every
read and poll).

Redis unreachable (a call fails or takes longer than :data:`REDIS_TIMEOUT`): the watch polls
on its own from the last position it knew (as a watch without a state), says so once as a
WARNING, and asks Redis again at each interval. When Redis answers, it skips to the
stream's end, polls once more alone (that poll covers what it skipped) and goes on as one
of the fleet: a change may then come twice, never not at all. A Redis that came back empty
(its watch state gone, or another epoch) is caught up with in the same way, and the next
poller restores the last position it knew rather than taking a new baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

import orjson

from ._errors import ApiError
from ._redisclient import AsyncScript, LoopRedis, RedisError, aredis, check_name
from ._watches import Engine, Source, WatchState, transient

if TYPE_CHECKING:
    from ._telemetry import Telemetry

__all__ = ["RedisWatchState"]

log: Final = logging.getLogger("asyncapi_client")

#: Connections of the pool a state built from a URL opens per event loop (calls queue beyond).
MAX_CONNECTIONS: Final = 32
#: No call to Redis lasts longer (s): past it Redis counts as unreachable for this watch.
#: (Generous: a fleet starting together on a busy machine must not take a slow answer
#: for an outage.)
REDIS_TIMEOUT: Final = 2.0
#: A watch with no news reads its stream (which keeps its keys alive) at least this often
#: (s), and at least four times per ``ttl``.
REFRESH: Final = 60.0
#: A lease lasts this many intervals (the longer of the watch's and the server's): a dead
#: poller is replaced within two intervals, and a live one has three quarters of an
#: interval to spare for a slow poll.
LEASE_INTERVALS: Final = 1.75
#: The stream of one watch keeps about this many changes (``XADD MAXLEN ~``); a consumer
#: away for longer than that many changes misses the oldest, and says so.
STREAM_LENGTH: Final = 10_000
#: Changes read from the stream in one call at most.
READ_COUNT: Final = 100
#: The follower's ``XREAD BLOCK`` (ms): a watch that starts is followed within this.
LISTEN_BLOCK_MS: Final = 250
#: After a failed ``XREAD``, the follower asks again this much later (s).
LISTEN_PAUSE: Final = 0.5
#: Alone, a look at whether Redis answers again takes at least this long before it gives up.
MIN_PROBE: Final = 0.05
_FAILURES: Final = (RedisError, OSError, TimeoutError)

_IDS = """
local function before(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am or not bm then return false end
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
"""

#: KEYS: lease, state. ARGV: token, lease ms, the version and epoch the caller holds.
#: {0, ms the lease still runs} when another process holds it; else the lease is the
#: caller's for lease ms and {1, version, epoch, position}: version nil when there is no
#: state yet, position nil when the caller holds that version already.
ACQUIRE: Final = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local state = redis.call('HMGET', KEYS[2], 'version', 'epoch')
if not state[1] then return {1, false, false, false} end
if state[1] == ARGV[3] and state[2] == ARGV[4] then return {1, state[1], state[2], false} end
return {1, state[1], state[2], redis.call('HGET', KEYS[2], 'position')}
"""

#: KEYS: lease, state, stream. ARGV: token, lease ms, ttl ms, stream length, the version
#: and epoch the poll started from ('' and '': no state), a new epoch (used when there is
#: no state), the new position, then the changes. Adds the changes to the stream and
#: replaces the position, in one step, only while the lease is the caller's and the state
#: is the one the poll started from: {1, version, epoch}; else {0}.
COMMIT: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local state = redis.call('HMGET', KEYS[2], 'version', 'epoch')
if ARGV[5] == '' then
  if state[1] then return {0} end
elseif state[1] ~= ARGV[5] or state[2] ~= ARGV[6] then
  return {0}
end
local epoch = state[2] or ARGV[7]
local version = (tonumber(state[1]) or 0) + 1
local last = false
local trimmed = false
for i = 9, #ARGV do
  local before = redis.call('XLEN', KEYS[3])
  last = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'r', ARGV[i])
  if redis.call('XLEN', KEYS[3]) <= before then trimmed = true end
end
redis.call('HSET', KEYS[2], 'position', ARGV[8], 'version', version, 'epoch', epoch)
if trimmed then redis.call('HSET', KEYS[2], 'trimmed', '1') end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, version, epoch}
"""

#: KEYS: stream, consumer. ARGV: ttl ms. The consumer's position, {id, 0}; a new consumer
#: starts at the stream's end ('0-0' for no stream), kept at once, {id, 1}.
START: Final = """
local position = redis.call('GET', KEYS[2])
if position then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
  return {position, 0}
end
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
position = '0-0'
if newest[1] then position = newest[1][1] end
redis.call('SET', KEYS[2], position, 'PX', ARGV[1])
return {position, 1}
"""

#: KEYS: stream, state, consumer. ARGV: after (a stream id), count, the version and epoch
#: of the position the caller holds ('' and '': it wants none), ttl ms. The changes after
#: ``after`` (at most count), the state's version and epoch, its position when the caller
#: has read to the stream's end and holds another one, 1 if changes after ``after`` were
#: trimmed away. Every key of the watch lives ttl ms more.
READ: Final = (
    _IDS
    + """
local count = tonumber(ARGV[2])
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', count)
local state = redis.call('HMGET', KEYS[2], 'version', 'epoch', 'trimmed')
local position = false
if #entries < count and state[1] and ARGV[3] ~= '' then
  if state[1] ~= ARGV[3] or state[2] ~= ARGV[4] then
    position = redis.call('HGET', KEYS[2], 'position')
  end
end
local lost = 0
if state[3] and ARGV[1] ~= '0-0' then
  local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  if oldest[1] and before(ARGV[1], oldest[1][1]) then lost = 1 end
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return {entries, state[1] or false, state[2] or false, position, lost}
"""
)

#: KEYS: stream, state, consumer. ARGV: the version and epoch the caller holds, ttl ms.
#: {the stream's last id, version, epoch, position (nil when the caller holds it)}. A
#: consumer Redis holds no position for starts at the stream's end.
JOIN: Final = """
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last = false
if newest[1] then last = newest[1][1] end
redis.call('SET', KEYS[3], last or '0-0', 'NX', 'PX', ARGV[3])
local state = redis.call('HMGET', KEYS[2], 'version', 'epoch')
local position = false
if state[1] and (state[1] ~= ARGV[1] or state[2] ~= ARGV[2]) then
  position = redis.call('HGET', KEYS[2], 'position')
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {last, state[1] or false, state[2] or false, position}
"""

#: KEYS: lease. ARGV: token. Gives the lease up if it is the caller's.
RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class _Down(Exception):
    """Redis did not answer as it should (the cause is chained)."""


class _Lost(Exception):
    """Redis no longer holds the watch's state this process knew (it came back empty)."""


def _text(value: object) -> str:
    """A reply's bytes as text (a caller's client may decode replies itself)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _optional(value: object) -> str | None:
    return None if value is None else _text(value)


def _check_consumer(consumer: object) -> str:
    try:
        return check_name(consumer)
    except ValueError as exc:
        raise ValueError(str(exc).replace("name", "consumer", 1)) from None


def _check_ttl(ttl: object) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise ValueError(f"ttl must be a number of seconds, got {ttl!r}")
    if not (1.0 <= ttl < math.inf):
        raise ValueError(f"ttl must be finite and at least 1 second, got {ttl!r}")
    return float(ttl)


class _Followed:
    """One stream the follower reads: after which id, and who waits for news of it."""

    __slots__ = ("after", "engines", "event", "generation")

    def __init__(self, after: str) -> None:
        self.after = after
        self.generation = 0
        self.event = asyncio.Event()
        self.engines: weakref.WeakSet[FleetEngine] = weakref.WeakSet()

    def bump(self) -> None:
        """Something happened: wake whoever waits."""
        self.generation += 1
        self.event.set()
        self.event = asyncio.Event()


class _Listener:
    """One event loop's follower of a state's streams: a task in one blocking ``XREAD`` on
    every stream a live watch of that loop reads, that wakes those watches when their
    stream grows. It runs while such a watch lives (it holds them weakly) and ends with the
    last one."""

    def __init__(self, link: _Link) -> None:
        self._link = link
        self._streams: dict[str, _Followed] = {}
        self._task: asyncio.Task[None] | None = None

    def generation(self, stream: str) -> int:
        followed = self._streams.get(stream)
        return -1 if followed is None else followed.generation

    def follow(self, stream: str, engine: FleetEngine, after: str) -> None:
        """Follow ``stream`` from ``after`` (unless it is followed already) for ``engine``."""
        followed = self._streams.get(stream)
        if followed is None:
            followed = self._streams[stream] = _Followed(after)
        followed.engines.add(engine)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(_report)

    def unfollow(self, stream: str, engine: FleetEngine) -> None:
        followed = self._streams.get(stream)
        if followed is not None:
            followed.engines.discard(engine)
            if not followed.engines:
                del self._streams[stream]
        if not self._streams and self._task is not None:
            self._task.cancel()
            self._task = None

    async def changed(self, stream: str, generation: int, seconds: float) -> None:
        """Until ``stream`` has news after ``generation``, at most ``seconds``."""
        followed = self._streams.get(stream)
        if followed is None or followed.generation != generation:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await followed.event.wait()

    async def _run(self) -> None:
        while True:
            for gone in [key for key, followed in self._streams.items() if not followed.engines]:
                del self._streams[gone]  # its watches were dropped without aclose()
            if not self._streams or self._link.closed:
                return
            streams: dict[Any, Any] = {key: f.after for key, f in self._streams.items()}
            try:
                client = await self._link.client()
                async with asyncio.timeout(LISTEN_BLOCK_MS / 1000 + REDIS_TIMEOUT):
                    reply = await client.xread(streams, count=READ_COUNT, block=LISTEN_BLOCK_MS)
            except _FAILURES:
                for followed in self._streams.values():
                    followed.bump()  # their watches find out for themselves
                await asyncio.sleep(LISTEN_PAUSE)
                continue
            items = reply.items() if isinstance(reply, dict) else (reply or ())
            for key, entries in items:
                news = self._streams.get(_text(key))
                if news is not None and entries:
                    news.after = _text(entries[-1][0])
                    news.bump()


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the fleet watches' stream follower failed", exc_info=task.exception())


#: Writes of a consumer's position started without awaiting (``handled_now``), kept
#: referenced until they end.
_BACKGROUND: set[asyncio.Task[Any]] = set()


class _Link:
    """A state's way to Redis: the clients (one per event loop), the scripts, each loop's
    follower of the streams, and the bounds every call keeps."""

    def __init__(self, url_or_redis_client: str | aredis.Redis, ttl: float) -> None:
        self.loops = LoopRedis(
            url_or_redis_client,
            "RedisWatchState",
            max_connections=MAX_CONNECTIONS,
            connect_timeout=REDIS_TIMEOUT,
        )
        self.ttl_ms = round(ttl * 1000)
        self.acquire = self.loops.script(ACQUIRE)
        self.commit = self.loops.script(COMMIT)
        self.start = self.loops.script(START)
        self.read = self.loops.script(READ)
        self.join = self.loops.script(JOIN)
        self.release = self.loops.script(RELEASE)
        self._listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Listener] = (
            weakref.WeakKeyDictionary()
        )
        self.closed = False
        self.shown = ""

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self.shown} is closed; create a new one")

    async def client(self) -> aredis.Redis:
        """The running event loop's Redis client."""
        return await self.loops.client()

    def listener(self) -> _Listener:
        """The running event loop's follower of this state's streams."""
        loop = asyncio.get_running_loop()
        listener = self._listeners.get(loop)
        if listener is None:
            listener = self._listeners[loop] = _Listener(self)
        return listener

    async def call(self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script call, bounded by :data:`REDIS_TIMEOUT`; any failure is :class:`_Down`."""
        self.check_open()
        try:
            async with asyncio.timeout(REDIS_TIMEOUT):
                client = await self.loops.client()
                return await script(keys=keys, args=args, client=client)
        except _FAILURES as exc:
            raise _Down(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc

    async def set_position(self, key: str, stream_id: str) -> None:
        """Keep a consumer's position (the id of its last handled change)."""
        self.check_open()
        try:
            async with asyncio.timeout(REDIS_TIMEOUT):
                client = await self.loops.client()
                await client.set(key, stream_id, px=self.ttl_ms)
        except _FAILURES as exc:
            raise _Down(f"{type(exc).__name__}: {exc}") from exc

    async def drop_idle(self) -> None:
        """Close the running loop's idle connections (they reconnect when next used): after
        Redis failed, one opened before may be half dead, and fail again once Redis is back."""
        with contextlib.suppress(*_FAILURES):
            async with asyncio.timeout(REDIS_TIMEOUT):
                client = await self.loops.client()
                await client.connection_pool.disconnect(inuse_connections=False)


class RedisWatchState(WatchState):
    """Watches shared by every process whose watches use the same Redis and ``name``.

    Each watch (operation, key and filters) is polled by one process of the fleet at a
    time (a lease in Redis, taken over within two intervals when its holder dies), and
    every process receives every change, in order, at least once, through a Redis stream.
    ``consumer`` names this process's own position in each stream: a process started again
    with the same ``consumer`` goes on after its last handled change; a new ``consumer``
    starts at the stream's end. Every key expires ``ttl`` seconds after the last process
    stops watching. Redis unreachable: the watch polls on its own (a WARNING says so) and
    rejoins when Redis answers.

    Built from a URL it owns its connection pools (close it with :meth:`aclose` or
    ``async with``); built from the caller's ``redis.asyncio.Redis`` it never closes it.
    Needs the extra: ``pip install 'asyncapi-client[redis]'``.

    Args:
        url_or_redis_client: a ``redis://``, ``rediss://`` or ``unix://`` URL, or a
            ``redis.asyncio.Redis`` of the caller's.
        name: the fleet's name: processes with the same Redis and name share their watches.
        consumer: this process's name for its positions (one per process of the fleet).
        ttl: seconds every key lives after the last read or poll of its watch.
    """

    def __init__(
        self,
        url_or_redis_client: str | aredis.Redis,
        *,
        name: str,
        consumer: str,
        ttl: float = 86_400.0,
    ) -> None:
        self.name: str = check_name(name)
        self.consumer: str = _check_consumer(consumer)
        self.ttl: float = _check_ttl(ttl)
        self._link = _Link(url_or_redis_client, self.ttl)
        self._link.shown = repr(self)

    def __repr__(self) -> str:
        return (
            f"RedisWatchState({self._link.loops.address!r}, name={self.name!r}, "
            f"consumer={self.consumer!r})"
        )

    @property
    def owns_client(self) -> bool:
        """True when the state made its Redis client (from a URL) and closes it."""
        return self._link.loops.owns

    def engine(
        self,
        source: Source[Any],
        *,
        interval: float,
        initial: bool,
        telemetry: Telemetry | None,
    ) -> Engine:
        """What runs a watch of ``source`` as one process of the fleet."""
        return FleetEngine(
            self, self._link, source, interval=interval, initial=initial, telemetry=telemetry
        )

    def keys(self, identity: Mapping[str, Any]) -> list[str]:
        """The keys of the watch named ``identity`` (a source's identity): its lease, state
        and stream, then this consumer's position. They share one hash tag (one Redis
        Cluster slot)."""
        canonical = orjson.dumps(dict(identity), option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(canonical).hexdigest()[:24]
        prefix = f"asyncapi_client:watch:{{{self.name}:{digest}}}"
        return [
            f"{prefix}:lease",
            f"{prefix}:state",
            f"{prefix}:stream",
            f"{prefix}:consumer:{self.consumer}",
        ]

    async def load(self, identity: Mapping[str, Any]) -> dict[str, Any] | None:
        """Not used: the fleet's engine keeps its place in Redis itself."""
        raise NotImplementedError("RedisWatchState runs its own engine; see engine()")

    async def save(self, identity: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """Not used: the fleet's engine keeps its place in Redis itself."""
        raise NotImplementedError("RedisWatchState runs its own engine; see engine()")

    async def aclose(self) -> None:
        """Close the connections the state made on this event loop (a borrowed client stays
        open); those it made on other loops close as those loops end."""
        if self._link.closed:
            return
        self._link.closed = True
        await self._link.loops.aclose()

    async def __aenter__(self) -> Self:
        self._link.check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class FleetEngine(Engine):
    """One process's part in a fleet's watch: it reads the watch's stream after its own
    position, polls when it holds the lease, and polls on its own while Redis is away.

    ``queue`` holds the records read and not yet handled, each with its stream id (None
    for one this process observed on its own); the first is the one in hand.
    """

    def __init__(
        self,
        state: RedisWatchState,
        link: _Link,
        source: Source[Any],
        *,
        interval: float,
        initial: bool,
        telemetry: Telemetry | None,
    ) -> None:
        self.state = state
        self.link = link
        self.source = source
        self.interval = interval
        self.telemetry = telemetry
        self.identity = source.identity()
        self.lease_key, self.state_key, self.stream_key, self.consumer_key = state.keys(
            self.identity
        )
        self.failures = 0
        self.queue: list[tuple[str | None, dict[str, Any]]] = []
        self._token = secrets.token_hex(12)
        self._ttl_ms = link.ttl_ms
        self._initial = initial
        self._started = False
        self._closed = False
        #: The stream id of the last change read (queued).
        self._read_id = "0-0"
        #: The fleet's epoch this process knows (None: none yet).
        self._epoch: str | None = None
        #: The fleet's last position this process read to (a source's dump), its version and
        #: epoch: where it polls from alone, and where a poller restores to when Redis lost
        #: the state.
        self._fallback: dict[str, Any] | None = None
        self._fallback_of: tuple[str, str] = ("", "")
        #: The version and epoch the source holds as the fleet's poller (None: something else).
        self._at: tuple[str, str] | None = None
        #: Polling on its own (Redis away or it lost the watch), and whether the source
        #: holds a position of its own yet.
        self._alone = False
        self._placed = False
        self._warned = False
        self._lost_warned = False
        #: When (the loop's clock) this process next polls or asks for the lease.
        self._due = 0.0
        self._hint = interval
        #: The follower's generation of the stream at the last read, and when it was.
        self._seen = (-1, -math.inf)

    def __repr__(self) -> str:
        mode = "alone" if self._alone else "fleet"
        return f"<FleetEngine {self.identity} {self.state.consumer} {mode}>"

    # --- what the Watch calls ---------------------------------------------------------------

    async def next(self) -> dict[str, Any]:
        if not self._started:
            await self._start()
        while not self.queue:
            if self._alone:
                await self._alone_round()
            else:
                try:
                    await self._fleet_round()
                except _Down as exc:
                    self._leave(f"Redis is unreachable ({exc})")
                except _Lost:
                    self._leave("Redis lost the fleet's state of this watch (restarted empty?)")
        return self.queue[0][1]

    async def handled(self) -> None:
        if not self.queue:
            return
        stream_id, _ = self.queue.pop(0)
        if stream_id is None or self._alone:
            return
        try:
            await self.link.set_position(self.consumer_key, stream_id)
        except _Down as exc:
            self._leave(f"Redis is unreachable ({exc})")

    def handled_now(self) -> None:
        if not self.queue:
            return
        stream_id, _ = self.queue.pop(0)
        if stream_id is None or self._alone:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to write on: the change may come again (at least once)
        task = loop.create_task(self._keep_quietly(stream_id))
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):  # no running loop: nothing was followed
            self.link.listener().unfollow(self.stream_key, self)
        if self._started and not self._alone:
            with contextlib.suppress(_Down, RuntimeError):
                # the lease given up: another process takes over at its next look, not when
                # the lease would have run out
                await self.link.call(self.link.release, [self.lease_key], [self._token])

    async def _keep_quietly(self, stream_id: str) -> None:
        with contextlib.suppress(_Down, RuntimeError):
            await self.link.set_position(self.consumer_key, stream_id)

    # --- starting ---------------------------------------------------------------------------

    async def _start(self) -> None:
        self._started = True
        self._due = asyncio.get_running_loop().time()
        try:
            reply = await self.link.call(
                self.link.start, [self.stream_key, self.consumer_key], [self._ttl_ms]
            )
        except _Down as exc:
            self._leave(f"Redis is unreachable ({exc})")
            return
        self._read_id = _text(reply[0])
        if not (self._initial and int(reply[1])):
            self._initial = False  # a consumer that goes on gets no initial changes

    async def _initial_look(self) -> bool:
        """A new consumer's own baseline with ``initial``: the changes it delivers first.
        False when it failed and is tried again at the next interval."""
        records = await self._look(lambda: self.source.baseline(True), telemetry=False)
        if records is None:
            return False
        self._initial = False
        self._at = None  # the source holds a look of its own now
        self.queue += [(None, record) for record in records]
        return True

    # --- one of the fleet -------------------------------------------------------------------

    async def _fleet_round(self) -> None:
        """Poll if it is time and the lease is ours, then read the stream (waiting for news
        until the next poll is due when there is none)."""
        loop = asyncio.get_running_loop()
        if self._initial and not await self._initial_look():
            self._due = loop.time() + self.interval
        if loop.time() >= self._due:
            await self._turn()
        listener = self.link.listener()
        generation = listener.generation(self.stream_key)
        if self._news(generation, loop.time()):
            now = loop.time()
            caught_up = await self._read()
            self._seen = (generation, now) if caught_up else (-1, -math.inf)
            if self.queue or not caught_up:
                return
        listener.follow(self.stream_key, self, self._read_id)
        wait = self._due - loop.time()
        if wait > 0:
            await listener.changed(self.stream_key, generation, wait)

    def _news(self, generation: int, now: float) -> bool:
        """Whether to read the stream: it may have grown since the last read (the follower
        says so, it does not follow it yet, or this process wrote to it), or that read is
        old enough that the keys need their lives prolonged."""
        seen, at = self._seen
        refresh = min(REFRESH, self.state.ttl / 4)
        return generation < 0 or generation != seen or now - at >= refresh

    async def _turn(self) -> None:
        """Ask for the lease; holding it, poll and write what the poll saw."""
        link, loop = self.link, asyncio.get_running_loop()
        lease_ms = math.ceil(LEASE_INTERVALS * self._hint * 1000)
        held = self._at or ("", "")
        reply = await link.call(
            link.acquire, [self.lease_key, self.state_key], [self._token, lease_ms, *held]
        )
        now = loop.time()
        if not int(reply[0]):
            # another process polls: ask again when its lease would run out
            self._due = now + max(int(reply[1]), 1) / 1000
            return
        self._due = now + self._hint
        version, epoch, position = (_optional(value) for value in reply[1:4])
        if version is None:
            await self._first_poll()
            return
        assert epoch is not None
        if position is not None:
            self._at = None
            self._restore(orjson.loads(position))
        self._at = (version, epoch)
        await self._poll_and_write((version, epoch))

    async def _first_poll(self) -> None:
        """No state in Redis: go on from the last position this process knew (Redis lost
        it), else take the fleet's baseline."""
        if self._fallback is not None:
            self._at = None
            self._restore(self._fallback)
            await self._poll_and_write(None)
            return
        records = await self._look(lambda: self.source.baseline(False), telemetry=False)
        if records is not None:
            await self._write(None, records)

    async def _poll_and_write(self, start: tuple[str, str] | None) -> None:
        fetch = self.source.fetch
        fetch.hint, fetch.moved = 0.0, False
        records = await self._look(self.source.poll, telemetry=True)
        self._hint = max(self.interval, fetch.hint)
        self._due = asyncio.get_running_loop().time() + self._hint
        if records is None:
            return
        if records or fetch.moved or start is None:  # a quiet poll writes nothing
            await self._write(start, records)

    async def _write(self, start: tuple[str, str] | None, records: list[dict[str, Any]]) -> None:
        """The poll's changes and the new position, in one step while the lease is ours."""
        link = self.link
        self._at = None  # until Redis says the write happened
        version, epoch = start or ("", "")
        lease_ms = math.ceil(LEASE_INTERVALS * self._hint * 1000)
        args: list[Any] = [
            self._token,
            lease_ms,
            self._ttl_ms,
            STREAM_LENGTH,
            version,
            epoch,
            secrets.token_hex(12),
            orjson.dumps(self.source.dump()),
        ]
        args += [orjson.dumps(record) for record in records]
        reply = await link.call(
            link.commit, [self.lease_key, self.state_key, self.stream_key], args
        )
        if int(reply[0]):
            self._at = (_text(reply[1]), _text(reply[2]))
            self._seen = (-1, -math.inf)  # read what was written at once

    async def _read(self) -> bool:
        """Queue the changes after the last one read; True when read to the stream's end."""
        reply = await self.link.call(
            self.link.read,
            [self.stream_key, self.state_key, self.consumer_key],
            [
                self._read_id,
                READ_COUNT,
                self._fallback_of[0] or "-",
                self._fallback_of[1],
                self._ttl_ms,
            ],
        )
        entries, version, epoch, position, lost = reply
        version, epoch = _optional(version), _optional(epoch)
        self._check_epoch(epoch)
        if int(lost) and not self._lost_warned:
            self._lost_warned = True
            log.warning(
                "fleet watch %s: changes after this consumer's position were dropped from "
                "the stream (it keeps about %d): some may be missed",
                self.identity,
                STREAM_LENGTH,
            )
        for entry in entries:
            stream_id, fields = _text(entry[0]), entry[1]
            self.queue.append((stream_id, orjson.loads(fields[1])))
            self._read_id = stream_id
        if position is not None and version is not None and epoch is not None:
            self._fallback = orjson.loads(position)
            self._fallback_of = (version, epoch)
        return len(entries) < READ_COUNT

    def _check_epoch(self, epoch: str | None) -> None:
        """Raise :class:`_Lost` when the state this process knew is gone."""
        if self._epoch is None:
            self._epoch = epoch
        elif epoch != self._epoch:
            raise _Lost

    # --- alone --------------------------------------------------------------------------------

    def _leave(self, why: str) -> None:
        """Go on alone, from the last position known (at the next round)."""
        self._alone = True
        self._placed = False
        self._at = None
        if not self._warned:
            self._warned = True
            log.warning(
                "fleet watch %s: %s; polling on its own until Redis answers", self.identity, why
            )

    async def _alone_round(self) -> None:
        """Alone: place the source, else see whether Redis answers (then poll once more and
        rejoin), else poll when due."""
        loop = asyncio.get_running_loop()
        if not self._placed:
            await self.link.drop_idle()  # opened before the failure: they may be stale
            await self._place()
            return
        joined = await self._probe(max(MIN_PROBE, min(REDIS_TIMEOUT, self._due - loop.time())))
        if joined is None and self._due > loop.time():
            await asyncio.sleep(self._due - loop.time())
        fetch = self.source.fetch
        fetch.hint, fetch.moved = 0.0, False
        records = await self._look(self.source.poll, telemetry=True)
        self._due = loop.time() + max(self.interval, fetch.hint)
        if records is None:
            return  # the poll failed: if Redis answered, it is asked again next time
        self.queue += [(None, record) for record in records]
        if joined is not None:
            self._rejoin(joined)

    async def _place(self) -> None:
        """The source alone starts from the fleet's last position this process read, else
        from a baseline of its own."""
        if self._fallback is not None:
            self._restore(self._fallback)
            self._placed = True
            return
        records = await self._look(lambda: self.source.baseline(self._initial), telemetry=False)
        if records is None:
            self._due = asyncio.get_running_loop().time() + self.interval
            await asyncio.sleep(self.interval)
            return
        self._initial = False
        self._placed = True
        self._fallback = self.source.dump()  # what a poller restores if Redis lost the state
        self._fallback_of = ("", "")
        self.queue += [(None, record) for record in records]

    async def _probe(self, seconds: float) -> list[Any] | None:
        """Whether Redis answers (within ``seconds``): what a rejoin needs, else None."""
        try:
            async with asyncio.timeout(seconds):
                reply: list[Any] = await self.link.call(
                    self.link.join,
                    [self.stream_key, self.state_key, self.consumer_key],
                    [*self._fallback_of, self._ttl_ms],
                )
        except (_Down, TimeoutError):
            return None
        return reply

    def _rejoin(self, joined: list[Any]) -> None:
        """Back in the fleet: read from the stream's end as it was before the last poll
        alone (which saw everything up to it), from the position Redis holds."""
        last, version, epoch, position = (_optional(value) for value in joined)
        if last is not None:
            self._read_id = last
        self._epoch = epoch
        if position is not None and version is not None and epoch is not None:
            self._fallback = orjson.loads(position)
            self._fallback_of = (version, epoch)
        self._alone = False
        self._at = None
        self._seen = (-1, -math.inf)
        self._warned = False
        self._due = asyncio.get_running_loop().time()
        log.info("fleet watch %s: Redis answers again; back with the fleet", self.identity)

    # --- polling ------------------------------------------------------------------------------

    async def _look(
        self, look: Callable[[], Awaitable[list[dict[str, Any]]]], *, telemetry: bool
    ) -> list[dict[str, Any]] | None:
        """Run ``look`` (a baseline or a poll) on the source; None if it failed for a reason
        that heals (counted, logged); the source is as before if it failed at all."""
        before = self.source.snapshot()
        try:
            if telemetry and self.telemetry is not None:
                with self.telemetry.poll(self.identity["watch"]) as saw:
                    records: list[dict[str, Any]] = await look()
                    saw(len(records))
            else:
                records = await look()
        except ApiError as exc:
            self.source.rollback(before)
            if not transient(exc):
                raise
            self.failures += 1
            log.warning(
                "watch %s: a poll failed, tried again at the next interval: %s", self.identity, exc
            )
            return None
        except BaseException:
            self.source.rollback(before)
            raise
        return records

    def _restore(self, data: Mapping[str, Any]) -> None:
        try:
            self.source.restore(data)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(
                f"the fleet's position of watch {self.identity} is not one this version "
                f"reads: {exc!r}"
            ) from None
