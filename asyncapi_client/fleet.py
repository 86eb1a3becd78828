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

Learning (``learn=True``): what an answer's rate-limit headers said is kept by the process
that read it and handed to Redis with its next acquisition, in the same script call; the
script applies it to the fleet's learned state (a hash) and schedules by it as
:class:`~asyncapi_client._learning.Learned` does, on the Redis clock, so one process's
answer paces the whole fleet without another round trip.
Needs the extra: ``pip install 'asyncapi-client[redis]'``.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, NamedTuple, Self

from ._errors import LimiterError
from ._learning import (
    APART,
    LOOKAHEAD,
    MAX_GRANTS,
    MIN_SPAN,
    PROBE_LEASE,
    SAME_RESET,
    Advertised,
)
from ._limiters import (
    DEFAULT_MARGIN,
    MAX_HOLD,
    PROBE_RECHECK,
    Admission,
    LimitStatus,
    OperationName,
    Rate,
    check_learn,
    check_margin,
    check_max_wait,
    check_rates,
    check_weights,
    pacing,
    shown_retry_after,
    tighter,
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
#: What a fleet learned from the server is kept this long (ms) past its reset, or past the
#: last request when no limit was learned: a fleet idle longer learns it again.
LEARNED_KEEP_MS: Final = 600_000
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
#: How long (s) the calls of one process waiting for an answer to learn from share one
#: answer of Redis (one script call per process this often, not one per waiting call). A
#: process that reads an answer itself asks again at once.
LEARNING_SEEN: Final = PROBE_RECHECK
#: The most answers one process hands Redis in one call (the newest; each bounds the
#: window's end, the newest says what remains).
MAX_ANSWERS: Final = 16
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

#: What the script knows of the learning: the same rules as _learning.Learned, in µs.
_LEARNED = (
    f"local LEASE, APART = {round(PROBE_LEASE * 1e6)}, {max(1, round(APART * 1e6))}\n"
    f"local SAME, MIN_SPAN = {round(SAME_RESET * 1e6)}, {round(MIN_SPAN * 1e6)}\n"
    f"local MAX_GRANTS, LOOKAHEAD = {MAX_GRANTS}, {round(LOOKAHEAD * 1e6)}\n"
    f"local KEEP = {LEARNED_KEEP_MS}\n"
    + """
local FIELDS = {'heard', 'limit', 'window', 'reset', 'early', 'remaining', 'basis', 'probe',
  'probe_at', 'generation'}
local DEFAULTS = {0, 0, 0, -1, -1, 0, -1, -1, -1, 0}
-- the learned state of the network (reset -1: no limit learned; limit, window 0: not known)
local function load(key, grants_key, rated)
  local L = {key = key, gkey = grants_key, rated = rated}
  local got = redis.call('HMGET', key, unpack(FIELDS))
  for i, field in ipairs(FIELDS) do L[field] = tonumber(got[i]) or DEFAULTS[i] end
  L.grants = redis.call('LRANGE', grants_key, 0, -1)  -- starts, newest first
  for i = 1, #L.grants do L.grants[i] = tonumber(L.grants[i]) end
  return L
end
local function newest(L) return L.grants[1] or -1e300 end
-- how many reservations start after x (at or after x when inclusive)
local function above(L, x, inclusive)
  local n = 0
  for i = 1, #L.grants do
    local v = L.grants[i]
    if v > x or (inclusive and v == x) then n = n + 1 else break end
  end
  return n
end
local function save(L, now, expiry)
  if not L.dirty then return end
  local values = {}
  for _, field in ipairs(FIELDS) do
    values[#values + 1] = field
    values[#values + 1] = int(L[field])
  end
  redis.call('HSET', L.key, unpack(values))
  local lasts = math.ceil(math.max(0, L.reset - now) / 1000) + KEEP
  redis.call('PEXPIRE', L.key, lasts)
  if #L.grants > 0 then redis.call('PEXPIRE', L.gkey, lasts) end
end
-- what proved the learned wrong: the reservations not yet started are not used
local function revoke(L, now)
  L.dirty = true
  L.generation = L.generation + 1
  local ahead = above(L, now, false)
  if ahead > 0 then
    redis.call('LTRIM', L.gkey, ahead, -1)
    for _ = 1, ahead do table.remove(L.grants, 1) end
  end
end
-- an answer: kind 'l' (its limits), 'h' (none usable), 'f' (no answer to learn from)
local function observe(L, kind, sent, read, remaining, reset_in, limit, window, whole, absolute)
  L.dirty = true
  if sent >= L.probe_at then L.probe = -1 end
  if kind ~= 'l' then
    if kind == 'h' then L.heard = 1 end
    return
  end
  local reset = read + reset_in
  local early = (absolute and read or sent) + reset_in - whole
  local limited = L.reset > 0
  local same = limited and math.abs(reset - L.reset) < SAME
  if same then
    reset = math.min(reset, L.reset)
    early = math.max(early, L.early)
  end
  if limited and sent < L.basis then
    if same then
      L.reset, L.early = reset, math.min(early, reset)
    end
    return
  end
  L.reset, L.early = reset, math.min(early, reset)
  L.remaining, L.basis, L.heard = remaining, sent, 1
  local kept = above(L, sent, false)
  if kept == 0 then redis.call('DEL', L.gkey) else redis.call('LTRIM', L.gkey, 0, kept - 1) end
  for i = #L.grants, kept + 1, -1 do L.grants[i] = nil end
  if limit > 0 then
    if L.limit > 0 and limit < L.limit then revoke(L, read) end
    L.limit = limit
  end
  if window > 0 then
    L.window = window
  elseif reset_in - whole > L.window then
    L.window = reset_in - whole
  end
end
local function spaced(L, earliest, begin, finish, capacity, pace)
  if capacity <= 0 then return nil end
  local last = newest(L)
  local start = math.max(earliest, begin, last + APART)
  if last >= begin then
    start = math.max(start, last + math.max(pace, (finish - last) / (capacity + 1)))
  end
  if start < finish then return start end
  return nil
end
local function next_end(L)
  if L.limit <= 0 or L.window <= 0 then return nil end
  local finish = L.early + L.window
  if finish - L.reset >= MIN_SPAN then return finish end
  return nil
end
-- the earliest start at or after earliest, and true; or the soonest one may be, and false
local function schedule(L, earliest, now)
  if L.reset <= 0 then
    if L.heard == 1 or L.rated or L.probe <= now then return earliest, true end
    return now, false
  end
  local last = newest(L)
  if earliest < L.reset and last < L.reset then
    local taken = above(L, L.basis, false)
    local start = spaced(L, earliest, L.basis, L.early, L.remaining - taken, 0)
    if start then return start, true end
  end
  local begin = math.max(earliest, L.reset, last + APART)
  local finish = next_end(L)
  if (not finish) or begin >= finish then return begin, L.rated or L.probe <= now end
  local taken = above(L, L.reset, true)
  local start = spaced(L, begin, L.reset, finish, L.limit - taken, L.window / math.max(1, L.limit))
  if start then return start, true end
  return math.max(now, L.reset), false
end
-- ... and not further ahead than LOOKAHEAD while another reservation is still to start
local function learned_start(L, earliest, now)
  local start, allowed = schedule(L, earliest, now)
  if allowed and start - now > LOOKAHEAD and newest(L) > now then return start, false end
  return start, allowed
end
local function book(L, start)
  if L.reset <= 0 then
    if L.heard ~= 1 and not L.rated then
      L.probe, L.probe_at, L.dirty = start + LEASE, start, true
    end
    return
  end
  L.dirty = true
  redis.call('LPUSH', L.gkey, int(start))
  redis.call('LTRIM', L.gkey, 0, MAX_GRANTS - 1)
  table.insert(L.grants, 1, start)
  if start >= L.reset then
    local finish = next_end(L)
    if (not finish) or start >= finish then L.probe, L.probe_at = start + LEASE, start end
  end
end
"""
)

#: KEYS: hold, the hold's Retry-After, last, then one list per rate (start times in µs,
#: newest first, at most count), then the epoch, the learned state and its reservations.
#: ARGV: weight, expiry margin (ms), now ('' for TIME), the jitter margin (µs), the pacing
#: (µs per slot), then count and window (µs) per rate, then the epoch the caller's own
#: recent reservations were made in ('' for none), then the learning: '1' to learn, the
#: longest wait (µs, '' for none), and how many answers to learn from follow, each as its
#: kind, its request's ticket (µs), its age (µs since it was read), remaining, reset (µs
#: from its reading), limit, window (µs), the reset's precision (µs), '1' when it was a
#: point in time. Returns {µs until the reservation, µs the hold still runs, 1 if
#: reserved, Retry-After, the epoch, 1 when an answer is awaited to learn, the
#: reservation's start (µs), the learning's generation}. Inside a hold nothing is
#: reserved: the caller asks again when it ends.
#:
#: The epoch is Redis's memory of the fleet's starts: when it was born (µs), at the first
#: reservation after the keys were lost (a restart, empty) or had expired; it expires with
#: the lists. A caller whose recent reservations were made in another epoch shows that
#: Redis lost them, and the starts of the window before with them: nothing starts before
#: the widest window has passed since the new epoch was born (``last`` keeps that point).
ACQUIRE: Final = (
    _NOW
    + _LEARNED
    + """
local now = clock(ARGV[3])
local weight = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
local margin = tonumber(ARGV[4])
local rates = #KEYS - 6
local epoch_key = KEYS[#KEYS - 2]
local at = 5 + 2 * rates  -- the last rate's argument
local L = nil
if ARGV[at + 2] == '1' then
  L = load(KEYS[#KEYS - 1], KEYS[#KEYS], rates > 0)
  for i = 1, tonumber(ARGV[at + 4]) do  -- the answers read since, oldest first
    local a = at + 4 + 9 * (i - 1)
    observe(L, ARGV[a + 1], tonumber(ARGV[a + 2]), now - tonumber(ARGV[a + 3]),
      tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]),
      tonumber(ARGV[a + 7]), tonumber(ARGV[a + 8]), ARGV[a + 9] == '1')
  end
end
local hold = redis.call('GET', KEYS[1])
if hold and tonumber(hold) > now then
  if L then save(L, now, expiry) end
  local held = tonumber(hold) - now
  return {held, held, 0, redis.call('GET', KEYS[2]) or '', '', 0, 0, 0}
end
local widest = 0
for i = 1, rates do
  local window = tonumber(ARGV[5 + 2 * i]) + margin
  if window > widest then widest = window end
end
local epoch = redis.call('GET', epoch_key) or int(now)
local known = ARGV[at + 1]
local resume = now
if known ~= '' and known ~= epoch then resume = tonumber(epoch) + widest end
local last = rates > 0 and tonumber(redis.call('GET', KEYS[3]) or '0') or 0
-- the earliest start at or after t that the rates allow
local function ruled(t)
  local start = math.max(t, resume, last)
  for i = 1, rates do
    local room = tonumber(ARGV[4 + 2 * i]) - weight
    if redis.call('LLEN', KEYS[3 + i]) > room then
      -- the (room + 1)-th newest start must have left the window (s - seconds - margin, s]
      local free = tonumber(redis.call('LINDEX', KEYS[3 + i], room)) + tonumber(ARGV[5 + 2 * i])
      free = free + margin
      if free > start then start = free end
    end
  end
  return start
end
local start, allowed = now, true
for _ = 1, 4 do  -- each only moves it later; it settles in a step or two
  if L then
    start, allowed = learned_start(L, start, now)
    if not allowed then break end
  end
  local found = ruled(start)
  if found == start or not L then
    start = found
    break
  end
  start = found
end
local ahead = start - now
if (not allowed) or (ARGV[at + 3] ~= '' and ahead > tonumber(ARGV[at + 3])) then
  if L then save(L, now, expiry) end  -- nothing reserved: an answer awaited, or too far
  return {ahead, 0, 0, '', '', allowed and 0 or 1, 0, 0}
end
local pace = start + weight * tonumber(ARGV[5])
redis.call('SET', KEYS[3], int(pace), 'PX', math.ceil((pace - now) / 1000) + expiry)
for i = 1, rates do
  local key, window = KEYS[3 + i], tonumber(ARGV[5 + 2 * i]) + margin
  for _ = 1, weight do redis.call('LPUSH', key, int(start)) end
  redis.call('LTRIM', key, 0, tonumber(ARGV[4 + 2 * i]) - 1)
  redis.call('PEXPIRE', key, math.ceil((ahead + window) / 1000) + expiry)
end
local lasts = math.ceil((ahead + widest) / 1000) + expiry
if redis.call('PTTL', epoch_key) < lasts then  -- never shortened by a narrower member
  redis.call('SET', epoch_key, epoch, 'PX', lasts)
end
local generation = 0
if L then
  book(L, start)
  save(L, now, expiry)
  generation = L.generation
end
return {ahead, 0, 1, '', epoch, 0, int(start), generation}
"""
)

#: KEYS: the learned state and its reservations, then one list per rate. ARGV: now, the
#: margin (µs), then count and window (µs) per rate. Returns {the learned limit, remaining
#: and µs to the reset (-1 each: nothing known)}, then per rate {the starts in the window
#: that ends now, µs until the newest of them leaves it}.
STATUS: Final = (
    _NOW
    + _LEARNED
    + """
local now = clock(ARGV[1])
local margin = tonumber(ARGV[2])
local L = load(KEYS[1], KEYS[2], false)
local out = {-1, -1, -1}
if L.reset > 0 then
  if now < L.reset then
    out = {L.limit, math.max(0, L.remaining - above(L, L.basis, false)), L.reset - now}
  else
    local finish = next_end(L)
    if finish and now < finish then
      local left = math.max(0, L.limit - above(L, L.reset, true))
      out = {L.limit, left, L.reset + L.window - now}
    end
  end
end
for i = 3, #KEYS do
  local window = tonumber(ARGV[2 + 2 * (i - 2)]) + margin
  local starts = redis.call('LRANGE', KEYS[i], 0, -1)
  local inside, newest = 0, 0
  for j = 1, #starts do
    local t = tonumber(starts[j])
    if t > now - window then
      inside = inside + 1
      if t + window - now > newest then newest = t + window - now end
    end
  end
  out[#out + 1] = inside
  out[#out + 1] = newest
end
return out
"""
)

#: KEYS: hold, its Retry-After, the learned state and its reservations. ARGV: seconds
#: (µs), expiry margin (ms), now, the server's Retry-After ('' for none), '1' to learn.
#: Never shortens a hold; never holds longer than MAX_HOLD, whatever it is handed. What
#: was learned let a 429 through: nothing more starts in this window, the next one's
#: limit is learned again, and reservations not yet started are not used.
HOLD: Final = (
    _NOW
    + _LEARNED
    + f"local max_hold = {round(MAX_HOLD * 1e6)}\n"
    + """
local now = clock(ARGV[3])
local seconds = math.min(tonumber(ARGV[1]), max_hold)
local hold_until = now + seconds
if ARGV[5] == '1' then
  local L = load(KEYS[3], KEYS[4], false)
  if L.reset > 0 then
    L.remaining, L.limit = 0, 0
    L.reset, L.early = math.min(L.reset, hold_until), math.min(L.early, hold_until)
    revoke(L, now)
    save(L, now, tonumber(ARGV[2]))
  end
end
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

#: KEYS: hold, the epoch, the learned state. ARGV: now. Returns {the µs the hold still
#: runs, the epoch, the learning's generation}.
HELD: Final = (
    _NOW
    + """
local now = clock(ARGV[1])
local epoch = redis.call('GET', KEYS[2]) or ''
local generation = tonumber(redis.call('HGET', KEYS[3], 'generation') or '0')
local hold = redis.call('GET', KEYS[1])
if hold and tonumber(hold) > now then return {tonumber(hold) - now, epoch, generation} end
return {0, epoch, generation}
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
        rates: the :class:`~asyncapi_client.Rate` values the whole fleet counts against
            (``[]``: none; with ``learn`` the fleet follows what the server advertises).
        name: the fleet's name: processes with the same Redis and name share one quota.
        weights: slots one request of an operation takes (default 1).
        margin: seconds of jitter between the limiter's answer and the request's arrival
            that the rates leave room for, as for ``LocalLimiter`` (on the Redis clock).
        learn: follow the limits the server's rate-limit headers advertise, as
            ``LocalLimiter`` does, for the whole fleet (what one process reads paces all).
        max_wait: seconds; a request that would wait longer for a slot or a hold raises
            ``RateLimitError`` at once instead (None: it waits).
    """

    def __init__(
        self,
        url_or_client: str | aredis.Redis,
        rates: Iterable[Rate],
        *,
        name: str,
        weights: Mapping[OperationName, int] | None = None,
        margin: float = DEFAULT_MARGIN,
        learn: bool = True,
        max_wait: float | None = None,
    ) -> None:
        self.name: str = check_name(name)
        # A rate named twice is one quota: one list, not two that both count every start.
        self.rates: tuple[Rate, ...] = tuple(dict.fromkeys(check_rates(rates)))
        self.weights: Mapping[str, int] = check_weights(weights, self.rates)
        self.margin: float = check_margin(margin)
        self.learn: bool = check_learn(learn)
        self.max_wait: float | None = check_max_wait(max_wait)
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
        self._status = self._loops.script(STATUS)
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
        self._widest = max((rate.seconds for rate in self.rates), default=0.0) + self.margin
        #: Per network, the answers to hand Redis with the next acquisition (the newest
        #: MAX_ANSWERS): see :meth:`observe`.
        self._pending: dict[Network, list[_Answer]] = {}
        #: Per network, when this process was last told to wait for an answer to learn
        #: from (``time.monotonic()``) and the soonest a slot may open then.
        self._learning: dict[Network, tuple[float, float]] = {}
        #: Per task waiting for its reservation: the network, epoch and learning it was
        #: made in.
        self._granted: weakref.WeakKeyDictionary[asyncio.Task[Any], tuple[Network, bytes, int]] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        extra = "" if self.margin == DEFAULT_MARGIN else f", margin={self.margin!r}"
        if not self.learn:
            extra += ", learn=False"
        if self.max_wait is not None:
            extra += f", max_wait={self.max_wait!r}"
        return (
            f"RedisLimiter({self._address!r}, rates={list(self.rates)!r}, "
            f"name={self.name!r}{extra})"
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
        memory of Redis the reservations were made in), what the fleet learned from the
        server's headers and the reservations made since.

        All share one hash tag, ``{name:network}``, so they live in one Redis Cluster slot.
        """
        return list(self._keys_of(parse_network(network)))

    def _keys_of(self, network: Network) -> list[str]:
        keys = self._keys.get(network)
        if keys is None:
            prefix = f"asyncapi_client:{{{self.name}:{network.value}}}"
            keys = [f"{prefix}:hold", f"{prefix}:hold:retry_after", f"{prefix}:last"]
            keys += [f"{prefix}:rate:{count}:{window}" for count, window in self._windows()]
            keys += [f"{prefix}:epoch", f"{prefix}:learned", f"{prefix}:learned:starts"]
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
        reply = await self._ask(weight, network, now)
        return reply.ahead, reply.held, reply.reserved, reply.retry_after

    async def _ask(self, weight: int, network: Network, now: int | None = None) -> _Reply:
        """Run the acquisition script, with the answer this process has to learn from."""
        known = self._known.get(network)
        args = (
            weight,
            EXPIRY_MARGIN_MS,
            "" if now is None else now,
            *self._margin_args,
            *self._rate_args,
            known[0] if known is not None and time.monotonic() < known[1] else "",
            *self._learning_args(network),
        )
        reply = await self._call(self._acquire, self._keys_of(network), args, network)
        ahead, reserved, epoch, generation = int(reply[0]), bool(reply[2]), reply[4], reply[7]
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
                    self._granted[task] = (network, epoch, int(generation))
        why = reply[3].decode("utf-8", "replace") if isinstance(reply[3], bytes) else reply[3]
        return _Reply(
            ahead, int(reply[1]), reserved, shown_retry_after(why), bool(reply[5]), int(reply[6])
        )

    def _learning_args(self, network: Network) -> tuple[str | int, ...]:
        """The script's learning arguments: whether to learn, the longest wait, and the
        answer this process read since it last asked (handed over once)."""
        if not self.learn:
            return ("0", "", 0)
        longest = "" if self.max_wait is None else math.ceil(self.max_wait * 1e6)
        answers = self._pending.pop(network, ())
        now = time.monotonic()
        return ("1", longest, len(answers), *(n for answer in answers for n in answer.args(now)))

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``, fleet-wide.

        Inside a hold this process was told of less than :data:`HOLD_SEEN` s ago, nothing is
        reserved (as Redis would answer) and Redis is not asked; when that answer is older,
        one call asks again for all the calls waiting in the hold."""
        learning = self._learning.get(network)
        if learning is not None:
            now = time.monotonic()
            if now - learning[0] < LEARNING_SEEN:
                self._check_open()
                return Admission(wait=max(0.0, learning[1] - now), reserved=False, learning=True)
            del self._learning[network]
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
            reply = await self._ask(self.weights.get(operation, 1), network)
        finally:
            if asking is not None:
                del self._asking[network, asyncio.get_running_loop()]
                asking.set_result(None)
        return self._admission(network, reply, cleared)

    def _admission(self, network: Network, reply: _Reply, cleared: int) -> Admission:
        """Remember what Redis said for the calls that ask next, and answer this one."""
        ahead, held, why = reply.ahead / 1e6, reply.held / 1e6, reply.retry_after
        now = time.monotonic()
        if reply.learning:
            self._learning[network] = (now, now + ahead)
            return Admission(wait=ahead, reserved=False, learning=True)
        if cleared != self._cleared:  # clear_hold() ran meanwhile: this answer may predate it
            self._seen.pop(network, None)
        elif held > 0 and not reply.reserved:
            self._seen[network] = (now, now + ahead, now + held, why)
        else:
            self._seen.pop(network, None)
        return Admission(
            wait=ahead,
            held=held,
            reserved=reply.reserved,
            retry_after=why,
            ticket=float(reply.start) if reply.reserved and self.learn else None,
        )

    def observe(
        self, network: Network, limits: Advertised | None, sent: float, heard: bool = True
    ) -> None:
        """Keep what an answer to ``network`` said, for Redis with the next acquisition
        (the fleet learns it then, in the same script call): ``limits``, its rate-limit
        headers as read (None: none usable); ``sent``, the ticket of the reservation it was
        sent on; ``heard`` False when there was no answer to learn from."""
        if not self.learn:
            return
        answer = _Answer(
            "l" if limits is not None else "h" if heard else "f",
            sent,
            time.monotonic(),
            limits,
        )
        kept = self._pending.setdefault(network, [])
        kept.append(answer)
        if len(kept) > MAX_ANSWERS:
            del kept[0]
        self._learning.pop(network, None)  # the next call asks Redis, with this answer

    async def status(self, network: Network | NetworkName) -> LimitStatus:
        """What the fleet knows of ``network``'s limit now (a Network or its name): learned
        from the server's answers, or its rates' reservations, the tighter."""
        network = parse_network(network)
        keys = self._keys_of(network)
        args = ("", round(self.margin * 1e6), *self._rate_args)
        reply = await self._call(self._status, [*keys[-2:], *keys[3:-3]], args, network)
        limit, left, reset = (int(n) for n in reply[:3])
        shown = LimitStatus()
        for index, rate in enumerate(self.rates):
            inside, newest = int(reply[3 + 2 * index]), int(reply[4 + 2 * index])
            rated = LimitStatus(rate.count, max(0, rate.count - inside), newest / 1e6, "rates")
            shown = tighter(shown, rated)
        if left >= 0:
            learned = LimitStatus(limit or None, left, reset / 1e6, "headers")
            shown = tighter(shown, learned)
        return shown

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
        left_us, epoch, generation = await self._call(
            self._held, (keys[0], keys[-3], keys[-2]), ("",), network
        )
        if task is not None:
            self._granted.pop(task, None)  # asked once, before the slot is used
        left = int(left_us) / 1e6
        if left <= 0:
            self._seen.pop(network, None)
            if granted is not None and granted != (network, epoch, int(generation)):
                # Redis lost the reservation this task waited for (a restart, empty), or
                # what it was booked on proved wrong (a 429, a lower limit): it is not
                # used, the caller asks again
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
        args = (
            micros,
            EXPIRY_MARGIN_MS,
            "",
            shown_retry_after(retry_after) or "",
            "1" if self.learn else "0",
        )
        keys = self._keys_of(network)
        await self._call(self._hold, [*keys[:2], *keys[-2:]], args, network)
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


class _Reply(NamedTuple):
    """The acquisition script's answer: µs until the start, µs of hold left, whether a slot
    was reserved, the hold's Retry-After, whether an answer is awaited to learn from, and
    the reservation's start (µs on the Redis clock: its ticket)."""

    ahead: int
    held: int
    reserved: bool
    retry_after: str | None
    learning: bool
    start: int


class _Answer(NamedTuple):
    """An answer one process read, until it is handed to Redis: its kind (``"l"``: limits,
    ``"h"``: none usable, ``"f"``: nothing to learn from), the ticket of its request, when
    it was read (``time.monotonic()``) and its limits."""

    kind: str
    sent: float
    read: float
    limits: Advertised | None

    def args(self, now: float) -> tuple[str | int, ...]:
        """The script's arguments for it, its age measured at ``now``."""
        limits = self.limits
        age = max(0, round((now - self.read) * 1e6))
        sent = round(self.sent) if self.sent > _TICKETS else 0  # not a ticket: the oldest
        if limits is None:
            return (self.kind, sent, age, 0, 0, 0, 0, 0, "0")
        return (
            self.kind,
            sent,
            age,
            limits.remaining,
            round(limits.reset * 1e6),
            limits.limit or 0,
            round((limits.window or 0.0) * 1e6),
            1_000_000 if limits.whole else 0,
            "1" if limits.absolute else "0",
        )


#: A ticket of this limiter is a start on the Redis clock, in µs since 1970: larger than
#: any other clock's reading a caller could hand back.
_TICKETS: Final = 10**12


from ._rediscache import RedisCache  # noqa: E402  (its own module; re-exported here)

__all__ += ["RedisCache"]
from ._fleetwatch import RedisWatchState  # noqa: E402  (its own module; re-exported here)

__all__ += ["RedisWatchState"]
