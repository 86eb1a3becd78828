"""One rate-limit quota and one 429 hold for a whole fleet of processes, kept in Redis.

limiter = RedisLimiter("redis://127.0.0.1:6379/0", [Rate(20, 1.0)], name="my-bots")
async with limiter, Client(base_url=..., limiter=limiter) as client:
    ...

Every acquisition is one atomic Lua script that reads the Redis server's clock (``TIME``,
never the caller's), applies the reservation rule of :func:`~asyncapi_client._limiters.
earliest_start` to every rate at once (each window widened by the margin, a burst paced
over it), writes the reservation and returns the wait; the client sleeps it (the limiter
never sleeps). Inside a 429 hold it reserves nothing, and the calls of one process waiting
in it share one answer for :data:`HOLD_SEEN` s (one script call a tenth of a second, not one
per waiting call). Every key it writes expires.
Needs the extra: ``pip install 'asyncapi-client[redis]'``.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

from ._errors import LimiterError
from ._limiters import (
    DEFAULT_MARGIN,
    MAX_HOLD,
    Admission,
    OperationName,
    Rate,
    check_margin,
    check_rates,
    check_weights,
    pacing,
    shown_retry_after,
)
from ._network import Network, parse_network
from ._redisclient import (
    AsyncScript,
    LoopRedis,
    RedisError,
    aredis,
    check_name,
)
from ._types import NetworkName

__all__ = ["RedisLimiter"]

#: Every key lives this much longer than the reservation or hold it records (ms).
EXPIRY_MARGIN_MS: Final = 1000
#: Connections of the pool a limiter built from a URL opens at most (calls queue beyond).
MAX_CONNECTIONS: Final = 10
#: No call to Redis lasts longer (s); the client bounds each call by the attempt's timeout too.
CALL_TIMEOUT: Final = 5.0
#: How long (s) a 429 hold this process was told of is taken as still on without asking
#: Redis again: the calls waiting in it ask every HOLD_RECHECK s each, and within this they
#: share one answer, so a hold costs Redis about ten script calls a second per process and
#: network, however many calls wait. A hold ended elsewhere (``clear_hold()``) is seen this
#: much later at most.
HOLD_SEEN: Final = 0.1
_FAILURES: Final = (RedisError, OSError)
#: What :meth:`RedisLimiter.held` answers (s) to a task whose reservation Redis lost: a
#: moment's hold, so the caller asks for a slot again.
LOST: Final = 1e-6

# The clock: the server's TIME in microseconds, or ARGV[n] when a test drives it.
_NOW = """
local function clock(given)
  if given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(x) return string.format('%.0f', x) end
"""

#: KEYS: hold, the hold's Retry-After, last, then one list per rate (start times in µs,
#: newest first, at most count), then the epoch. ARGV: weight, expiry margin (ms), now (''
#: for TIME), the jitter margin (µs), the pacing (µs per slot), then count and window (µs)
#: per rate, then the epoch the caller's own recent reservations were made in ('' for
#: none). Returns {µs until the reservation, µs the hold still runs, 1 if reserved,
#: Retry-After, the epoch}. Inside a hold nothing is reserved: the caller asks again when
#: it ends.
#:
#: The epoch is Redis's memory of the fleet's starts: when it was born (µs), at the first
#: reservation after the keys were lost (a restart, empty) or had expired; it expires with
#: the lists. A caller whose recent reservations were made in another epoch shows that
#: Redis lost them, and the starts of the window before with them: nothing starts before
#: the widest window has passed since the new epoch was born (``last`` keeps that point).
ACQUIRE: Final = (
    _NOW
    + """
local now = clock(ARGV[3])
local weight = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
local margin = tonumber(ARGV[4])
local hold = redis.call('GET', KEYS[1])
if hold and tonumber(hold) > now then
  local held = tonumber(hold) - now
  return {held, held, 0, redis.call('GET', KEYS[2]) or '', ''}
end
local rates = #KEYS - 4
local widest = 0
for i = 1, rates do
  local window = tonumber(ARGV[5 + 2 * i]) + margin
  if window > widest then widest = window end
end
local start = now
local epoch = redis.call('GET', KEYS[#KEYS]) or int(now)
local known = ARGV[#ARGV]
if known ~= '' and known ~= epoch then
  local resume = tonumber(epoch) + widest
  if resume > start then start = resume end
end
local last = redis.call('GET', KEYS[3])
if last and tonumber(last) > start then start = tonumber(last) end
for i = 1, rates do
  local room = tonumber(ARGV[4 + 2 * i]) - weight
  if redis.call('LLEN', KEYS[3 + i]) > room then
    -- the (room + 1)-th newest start must have left the window (s - seconds - margin, s]
    local free = tonumber(redis.call('LINDEX', KEYS[3 + i], room)) + tonumber(ARGV[5 + 2 * i])
    free = free + margin
    if free > start then start = free end
  end
end
local ahead = start - now
local pace = start + weight * tonumber(ARGV[5])
redis.call('SET', KEYS[3], int(pace), 'PX', math.ceil((pace - now) / 1000) + expiry)
for i = 1, rates do
  local key, window = KEYS[3 + i], tonumber(ARGV[5 + 2 * i]) + margin
  for _ = 1, weight do redis.call('LPUSH', key, int(start)) end
  redis.call('LTRIM', key, 0, tonumber(ARGV[4 + 2 * i]) - 1)
  redis.call('PEXPIRE', key, math.ceil((ahead + window) / 1000) + expiry)
end
local lasts = math.ceil((ahead + widest) / 1000) + expiry
if redis.call('PTTL', KEYS[#KEYS]) < lasts then  -- never shortened by a narrower member
  redis.call('SET', KEYS[#KEYS], epoch, 'PX', lasts)
end
return {ahead, 0, 1, '', epoch}
"""
)

#: KEYS: hold, its Retry-After. ARGV: seconds (µs), expiry margin (ms), now, the server's
#: Retry-After ('' for none). Never shortens a hold; never holds longer than MAX_HOLD,
#: whatever it is handed.
HOLD: Final = (
    _NOW
    + f"local max_hold = {round(MAX_HOLD * 1e6)}\n"
    + """
local now = clock(ARGV[3])
local seconds = math.min(tonumber(ARGV[1]), max_hold)
local hold_until = now + seconds
local hold = redis.call('GET', KEYS[1])
if (not hold) or tonumber(hold) < hold_until then
  local px = math.ceil(seconds / 1000) + tonumber(ARGV[2])
  redis.call('SET', KEYS[1], int(hold_until), 'PX', px)
  if ARGV[4] ~= '' then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', px)
  else
    redis.call('DEL', KEYS[2])
  end
end
return 0
"""
)

#: KEYS: hold, the epoch. ARGV: now. Returns {the µs the hold still runs, the epoch}.
HELD: Final = (
    _NOW
    + """
local now = clock(ARGV[1])
local epoch = redis.call('GET', KEYS[2]) or ''
local hold = redis.call('GET', KEYS[1])
if hold and tonumber(hold) > now then return {tonumber(hold) - now, epoch} end
return {0, epoch}
"""
)

#: KEYS: hold, its Retry-After. Ends the hold (for every process of the fleet).
CLEAR: Final = "return redis.call('DEL', KEYS[1], KEYS[2])"


class RedisLimiter:
    """The rates and the 429 hold for every process whose clients share a Redis and a ``name``.

    Built from a URL it owns its connection pools (close it with :meth:`aclose` or
    ``async with``); built from the caller's ``redis.asyncio.Redis`` it never closes it.
    Clients on several event loops may share one (two ``SyncClient``s, a ``SyncClient`` and
    an async ``Client``): each loop talks to Redis through a pool of its own, closed when
    that loop ends (``asyncio.run``'s end, ``SyncClient.close()``) or by :meth:`aclose` on
    it. A caller's client serves the loop running when the limiter was made (else the
    first loop to use it); other loops get a client made like it. ``rates`` and
    ``weights`` (the slots an operation takes; 1 where not named) are the ones it was made
    with.

    Args:
        url_or_client: a ``redis://``, ``rediss://`` or ``unix://`` URL, or a
            ``redis.asyncio.Redis`` of the caller's.
        rates: the :class:`~asyncapi_client.Rate` values the whole fleet counts against.
        name: the fleet's name: processes with the same Redis and name share one quota.
        weights: slots one request of an operation takes (default 1).
        margin: seconds of jitter between the limiter's answer and the request's arrival
            that the rates leave room for, as for ``LocalLimiter`` (on the Redis clock).
    """

    def __init__(
        self,
        url_or_client: str | aredis.Redis,
        rates: Iterable[Rate],
        *,
        name: str,
        weights: Mapping[OperationName, int] | None = None,
        margin: float = DEFAULT_MARGIN,
    ) -> None:
        self.name: str = check_name(name)
        checked = check_rates(rates)
        if not checked:
            raise ValueError("RedisLimiter needs at least one Rate(count, seconds)")
        # A rate named twice is one quota: one list, not two that both count every start.
        self.rates: tuple[Rate, ...] = tuple(dict.fromkeys(checked))
        self.weights: Mapping[str, int] = check_weights(weights, self.rates)
        self.margin: float = check_margin(margin)
        self._loops = LoopRedis(
            url_or_client,
            "RedisLimiter",
            max_connections=MAX_CONNECTIONS,
            connect_timeout=CALL_TIMEOUT,
        )
        self._address = self._loops.address
        self._closed = False
        self._acquire = self._loops.script(ACQUIRE)
        self._hold = self._loops.script(HOLD)
        self._held = self._loops.script(HELD)
        self._clear = self._loops.script(CLEAR)
        # per rate: its count and window (µs); the script's arguments after the first five
        self._rate_args: tuple[int, ...] = tuple(
            n for rate in self.rates for n in (rate.count, max(1, round(rate.seconds * 1e6)))
        )
        # the margin (µs) and the pacing (µs per slot, a float)
        self._margin_args: tuple[int, float] = (
            round(self.margin * 1e6),
            pacing(self.rates, self.margin) * 1e6,
        )
        self._keys: dict[Network, list[str]] = {}
        #: Per network, the hold this process was last told of: when it was told
        #: (``time.monotonic()``), when the wait and the hold end, the server's Retry-After.
        self._seen: dict[Network, tuple[float, float, float, str | None]] = {}
        #: Per network and event loop, the question to Redis one call is asking for all
        #: those of that loop in the hold (a future is awaited on its own loop only).
        self._asking: dict[tuple[Network, asyncio.AbstractEventLoop], asyncio.Future[None]] = {}
        #: How many times clear_hold() ran: an answer asked for before one is not remembered.
        self._cleared = 0
        #: Per network, the epoch of this limiter's latest reservation, and until when
        #: (``time.monotonic()``) Redis keeps it unless it loses its data.
        self._known: dict[Network, tuple[bytes, float]] = {}
        #: The widest window and the margin (s): how long a start counts.
        self._widest = max(rate.seconds for rate in self.rates) + self.margin
        #: Per task waiting for its reservation: the network and epoch it was made in.
        self._granted: weakref.WeakKeyDictionary[asyncio.Task[Any], tuple[Network, bytes]] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        margin = "" if self.margin == DEFAULT_MARGIN else f", margin={self.margin!r}"
        return (
            f"RedisLimiter({self._address!r}, rates={list(self.rates)!r}, "
            f"name={self.name!r}{margin})"
        )

    @property
    def owns_client(self) -> bool:
        """True when the limiter made its Redis client (from a URL) and closes it."""
        return self._loops.owns

    @property
    def _redis(self) -> aredis.Redis:
        """The Redis client of the running event loop."""
        return self._loops.current()

    def keys(self, network: Network | NetworkName) -> list[str]:
        """The keys this limiter writes for ``network``: the hold, the Retry-After of the 429
        that placed it, the last start's pacing point, one per rate, the epoch (which
        memory of Redis the reservations were made in).

        All share one hash tag, ``{name:network}``, so they live in one Redis Cluster slot.
        """
        return list(self._keys_of(parse_network(network)))

    def _keys_of(self, network: Network) -> list[str]:
        keys = self._keys.get(network)
        if keys is None:
            prefix = f"asyncapi_client:{{{self.name}:{network.value}}}"
            keys = [f"{prefix}:hold", f"{prefix}:hold:retry_after", f"{prefix}:last"]
            keys += [f"{prefix}:rate:{count}:{window}" for count, window in self._windows()]
            keys.append(f"{prefix}:epoch")
            self._keys[network] = keys
        return keys

    def _windows(self) -> list[tuple[int, int]]:
        args = self._rate_args
        return [(args[i], args[i + 1]) for i in range(0, len(args), 2)]

    def _failure(self, exc: BaseException, network: Network) -> LimiterError:
        return LimiterError(
            f"the fleet limiter's Redis failed: {type(exc).__name__}: {exc}",
            limiter=repr(self),
            network=network.value,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")

    async def _call(
        self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any], network: Network
    ) -> Any:
        """One script call, bounded by CALL_TIMEOUT; every failure a LimiterError."""
        self._check_open()
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0
        scope = asyncio.timeout(CALL_TIMEOUT)
        try:
            async with scope:
                client = self._loops.ready() or await self._loops.client()
                reply = await script(keys=keys, args=args, client=client)
        except TimeoutError as exc:
            if not scope.expired():
                raise self._failure(exc, network) from exc
            raise LimiterError(
                f"the fleet limiter's Redis did not answer within {CALL_TIMEOUT:g}s",
                limiter=repr(self),
                network=network.value,
            ) from exc
        except _FAILURES as exc:
            raise self._failure(exc, network) from exc
        if task is not None and task.cancelling() > cancelling:
            # The task was cancelled during the call but redis-py swallowed it (a client
            # with socket_timeout sends through asyncio.wait_for, which loses a cancel
            # on Python 3.11): honour it, so the caller's timeout or cancel still holds.
            raise asyncio.CancelledError
        return reply

    async def _reserve(
        self, weight: int, network: Network, now: int | None = None
    ) -> tuple[int, int, bool, str | None]:
        """Run the acquisition script: µs until the start, µs of hold left, whether a slot
        was reserved (not inside a hold), and the hold's Retry-After.

        ``now`` (µs) replaces the server's clock; only tests pass it.
        """
        known = self._known.get(network)
        args = (
            weight,
            EXPIRY_MARGIN_MS,
            "" if now is None else now,
            *self._margin_args,
            *self._rate_args,
            known[0] if known is not None and time.monotonic() < known[1] else "",
        )
        reply = await self._call(self._acquire, self._keys_of(network), args, network)
        ahead, reserved, epoch = int(reply[0]), bool(reply[2]), reply[4]
        if reserved:
            # Redis keeps this epoch at least this long: missing or another before then,
            # it lost this reservation (with the window's others)
            until = time.monotonic() + ahead / 1e6 + self._widest
            latest = self._known.get(network)
            if latest is not None and latest[0] == epoch:
                until = max(until, latest[1])  # an earlier reservation may start later
            self._known[network] = (epoch, until)
            if ahead > 0:  # the caller sleeps, then asks held() before it sends
                task = asyncio.current_task()
                if task is not None:
                    self._granted[task] = (network, epoch)
        why = reply[3].decode("utf-8", "replace") if isinstance(reply[3], bytes) else reply[3]
        return ahead, int(reply[1]), reserved, shown_retry_after(why)

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``, fleet-wide.

        Inside a hold this process was told of less than :data:`HOLD_SEEN` s ago, nothing is
        reserved (as Redis would answer) and Redis is not asked; when that answer is older,
        one call asks again for all the calls waiting in the hold."""
        asking: asyncio.Future[None] | None = None
        while True:
            seen = self._seen.get(network)
            now = time.monotonic()  # one reading: a hold that runs out is not answered "held 0"
            if seen is None or seen[2] <= now:
                break  # no hold known, or it has run out: every call asks for its slot
            self._check_open()
            if now - seen[0] < HOLD_SEEN:
                _, wait_until, hold_until, why = seen
                return Admission(
                    wait=max(0.0, wait_until - now),
                    held=hold_until - now,
                    reserved=False,
                    retry_after=why,
                )
            loop = asyncio.get_running_loop()
            pending = self._asking.get((network, loop))
            if pending is None:  # this call asks Redis, for every call waiting in the hold
                asking = self._asking[network, loop] = loop.create_future()
                break
            await asyncio.shield(pending)
        cleared = self._cleared
        try:
            ahead, held, reserved, why = await self._reserve(
                self.weights.get(operation, 1), network
            )
        finally:
            if asking is not None:
                del self._asking[network, asyncio.get_running_loop()]
                asking.set_result(None)
        if cleared != self._cleared:  # clear_hold() ran meanwhile: this answer may predate it
            self._seen.pop(network, None)
        elif held > 0 and not reserved:
            now = time.monotonic()
            self._seen[network] = (now, now + ahead / 1e6, now + held / 1e6, why)
        else:
            self._seen.pop(network, None)
        return Admission(wait=ahead / 1e6, held=held / 1e6, reserved=reserved, retry_after=why)

    async def held(self, network: Network) -> float:
        """Seconds the 429 hold on ``network`` still runs (0.0: none), on the server's clock
        (as told less than :data:`HOLD_SEEN` s ago, or asked now).

        Asked by the task that waited for a reservation, just before it sends: :data:`LOST`
        when Redis lost that reservation meanwhile (restarted empty), so that the task asks
        for a slot again rather than start one Redis does not count."""
        task = asyncio.current_task()
        granted = None if task is None else self._granted.get(task)
        now = time.monotonic()
        seen = self._seen_hold(network, now)
        if seen is not None:
            return seen[2] - now
        keys = self._keys_of(network)
        left_us, epoch = await self._call(self._held, (keys[0], keys[-1]), ("",), network)
        if task is not None:
            self._granted.pop(task, None)  # asked once, before the slot is used
        left = int(left_us) / 1e6
        if left <= 0:
            self._seen.pop(network, None)
            if granted is not None and granted != (network, epoch):
                # Redis lost the reservation this task waited for (a restart, empty): its
                # slot is not counted there, so it is not used: the caller asks again
                return LOST
        return left

    def _seen_hold(
        self, network: Network, now: float
    ) -> tuple[float, float, float, str | None] | None:
        """The hold on ``network`` this process was told of, if that is recent and it still
        runs at ``now`` (a closed limiter raises, as a call to Redis would)."""
        seen = self._seen.get(network)
        if seen is None:
            return None
        self._check_open()
        if now - seen[0] >= HOLD_SEEN or seen[2] <= now:
            return None
        return seen

    async def hold(self, network: Network, seconds: float, retry_after: str | None = None) -> None:
        """Hold every request of the fleet to ``network`` for ``seconds``, at most
        :data:`~asyncapi_client._limiters.MAX_HOLD` (never shortens one); ``retry_after``:
        the server's header, shown in the messages of every process it holds."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"hold seconds must be a number, got {seconds!r}")
        if not 0.0 <= seconds < math.inf:
            raise ValueError(f"hold seconds must be finite and >= 0, got {seconds!r}")
        micros = math.ceil(min(seconds, MAX_HOLD) * 1e6)
        if micros == 0:
            self._check_open()
            return
        args = (micros, EXPIRY_MARGIN_MS, "", shown_retry_after(retry_after) or "")
        await self._call(self._hold, self._keys_of(network)[:2], args, network)
        # The hold runs at least this long (the script never shortens one): the calls of this
        # process that ask now are answered without Redis, as they would be by it.
        now = time.monotonic()
        until = now + micros / 1e6
        self._seen[network] = (now, until, until, shown_retry_after(retry_after))

    async def clear_hold(self, network: Network | NetworkName | None = None) -> None:
        """End the 429 hold on ``network`` (a Network or its name; None: every network) at
        once, for every process of the fleet. Requests already waiting on it go within
        :data:`~asyncapi_client._limiters.HOLD_RECHECK` s; another process that heard of the
        hold less than :data:`HOLD_SEEN` s before answers from that until then."""
        networks = list(Network) if network is None else [parse_network(network)]
        for each in networks:  # one call per network: their keys live in different slots
            await self._call(self._clear, self._keys_of(each)[:2], (), each)
            self._seen.pop(each, None)
            self._cleared += 1

    async def aclose(self) -> None:
        """Close the connections the limiter made on this event loop (a borrowed client
        stays open); those it made on other loops close as those loops end."""
        if self._closed:
            return
        self._closed = True
        await self._loops.aclose()

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


from ._rediscache import RedisCache  # noqa: E402  (its own module; re-exported here)

__all__ += ["RedisCache"]
