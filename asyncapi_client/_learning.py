"""What a limiter learns from the server: its rate-limit headers read, and the pacing they imply.

:func:`read_limits` reads one answer's headers in the contract's order: the IETF
``RateLimit-Policy`` and ``RateLimit`` structured fields, else ``RateLimit-Limit``,
``-Remaining`` and ``-Reset`` (seconds), else ``X-RateLimit-Limit``, ``-Remaining`` and
``-Reset`` (a Unix time above 10**9, else seconds). A family is read when its remaining is
there (three lookups for an answer without any). A header that does not parse, is negative or
resets more than a day ahead is ignored and logged at DEBUG; when the remaining or the reset is
unusable, nothing of the answer is.

:class:`Learned` is what one network's answers taught a limiter, and the schedule it implies:
the requests that remain (less those reserved since the answer's request left) are spaced so
they last until the reset, and none goes at zero remaining before it. Before anything was
heard from a network, one request goes and the others wait for its answer (at most
:data:`PROBE_LEASE`; any answer or failure for that network ends the wait). ``fleet.py``'s
script follows the same rules on the Redis clock, for a fleet.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import time
from collections.abc import Mapping
from typing import Final

import attrs
from multidict import istr

__all__ = [
    "APART",
    "LOOKAHEAD",
    "MAX_GRANTS",
    "MAX_RESET",
    "MIN_SPAN",
    "PROBE_LEASE",
    "REMAINING_NAMES",
    "SAME_RESET",
    "UNIX_TIME",
    "Advertised",
    "Learned",
    "read_limits",
]

log: Final = logging.getLogger("asyncapi_client")

#: A reset further ahead than this (s) is not believed: the header is ignored.
MAX_RESET: Final = 86_400.0
#: A reset above this is a Unix time (``X-RateLimit-Reset``), below it seconds from now.
UNIX_TIME: Final = 10**9
#: How long (s) the first request to a network may keep the others waiting for its answer
#: when that answer is never read (its attempt cancelled, its process gone). One that is
#: answered or fails ends the wait at once, so the attempt's timeout bounds it too.
PROBE_LEASE: Final = 10.0
#: Two answers whose resets are closer than this (s) speak of the same window: the headers
#: count whole seconds. The earlier of the two is kept (a reset rounded up is never early).
SAME_RESET: Final = 1.0
#: A learning limiter reserves at most this far ahead (s) while another reservation is still
#: to start: the answers that come meanwhile may change the schedule (a raised limit).
LOOKAHEAD: Final = 0.5
#: The window after the current one is reserved in only when it surely lasts this long (s)
#: past the current one's latest reset; else its first request learns it alone.
MIN_SPAN: Final = 0.1
#: Two reservations of a learning limiter are at least this far apart (s), so that each
#: answer's request is told from the others by its start.
APART: Final = 1e-6
#: At most this many characters of a header value are read (a longer one is ignored).
_MAX_VALUE: Final = 4096
#: The most reservations a learning limiter remembers per network, to count those made
#: after an answer's request left (more than a client keeps ahead).
MAX_GRANTS: Final = 4096

_IETF_POLICY: Final = istr("RateLimit-Policy")
_IETF: Final = istr("RateLimit")
_LIMIT: Final = istr("RateLimit-Limit")
_REMAINING: Final = istr("RateLimit-Remaining")
_RESET: Final = istr("RateLimit-Reset")
_X_LIMIT: Final = istr("X-RateLimit-Limit")
_X_REMAINING: Final = istr("X-RateLimit-Remaining")
_X_RESET: Final = istr("X-RateLimit-Reset")
#: The header of each family, in the contract's order, without which it is not read.
REMAINING_NAMES: Final = (_IETF, _REMAINING, _X_REMAINING)

_INTEGER: Final = re.compile(r"[0-9]{1,15}")
_NUMBER: Final = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,9})?")
#: ``RateLimit-Limit: 100`` or an early draft's ``100, 100;w=60``: the leading count.
_LEADING_COUNT: Final = re.compile(r"([0-9]{1,15})\s*(?:[,;].*)?", re.DOTALL)
_TOKEN: Final = re.compile(r"[A-Za-z*][A-Za-z0-9:/!#$%&'*+\-.^_`|~]*")
_KEY: Final = re.compile(r"[a-z*][a-z0-9_\-.*]*")
_SF_NUMBER: Final = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,3})?")


@attrs.frozen(slots=True)
class Advertised:
    """What one answer's headers say: ``remaining`` requests until ``reset`` seconds from
    when it was read, of ``limit`` per ``window`` seconds (each None when not said).

    ``whole``: the reset was given in whole seconds, so the window may end up to a second
    sooner (a server rounds it up, as ``Retry-After``). ``absolute``: it was a point in time
    (a Unix time), not seconds from when the server counted the request.
    """

    remaining: int
    reset: float
    limit: int | None = None
    window: float | None = None
    whole: bool = True
    absolute: bool = False


def _shown(value: str) -> str:
    """A header value made safe to log: at most 64 characters, control characters replaced."""
    head = "".join(c if c.isprintable() else "?" for c in value[:64])
    return head + "…" if len(value) > 64 else head


def _ignored(name: str, value: str, why: str) -> None:
    log.debug("ignored the rate-limit header %s: %r (%s)", name, _shown(value), why)


def _count(name: str, value: str | None, *, least: int = 0) -> int | None:
    """A whole count >= ``least`` from a header, or None (logged when present but unusable)."""
    if value is None:
        return None
    text = value.strip()
    if _INTEGER.fullmatch(text) is None:
        _ignored(name, value, "not a whole number >= 0")
        return None
    number = int(text)
    if number < least:
        _ignored(name, value, f"less than {least}")
        return None
    return number


def _seconds(name: str, value: str | None, *, unix: bool = False) -> Advertised | None:
    """Seconds from now to a reset (a Unix time above 10**9 when ``unix``), as an
    Advertised with nothing remaining yet, or None when it is missing, does not parse, is in
    the past or more than a day ahead (logged)."""
    if value is None:
        return None
    text = value.strip()
    if _NUMBER.fullmatch(text) is None:
        _ignored(name, value, "not a number of seconds >= 0")
        return None
    seconds = float(text)
    absolute = unix and seconds > UNIX_TIME
    if absolute:
        seconds -= time.time()
        if seconds < 0:
            _ignored(name, value, "a Unix time in the past")
            return None
    if seconds > MAX_RESET:
        _ignored(name, value, "more than a day ahead")
        return None
    return Advertised(0, seconds, whole="." not in text, absolute=absolute)


def _limit(name: str, value: str | None, remaining: int) -> int | None:
    """The limit (the leading count of an early draft's list too), or None."""
    if value is None:
        return None
    match = _LEADING_COUNT.fullmatch(value.strip())
    if match is None:
        _ignored(name, value, "not a whole number >= 1")
        return None
    limit = int(match.group(1))
    if limit < 1 or limit < remaining:
        _ignored(name, value, "less than 1 or than the remaining")
        return None
    return limit


def _family(
    headers: Mapping[str, str], names: tuple[istr, istr, istr], remaining: str, *, unix: bool
) -> Advertised | None:
    """``RateLimit-*`` or ``X-RateLimit-*``: all of it, or nothing when remaining or reset
    is unusable."""
    limit_name, remaining_name, reset_name = names
    left = _count(remaining_name, remaining)
    reset = _seconds(reset_name, headers.get(reset_name), unix=unix)
    if left is None or reset is None:
        if reset is None and reset_name not in headers:
            log.debug("ignored the rate-limit headers: %s without %s", remaining_name, reset_name)
        return None
    limit = _limit(limit_name, headers.get(limit_name), left)
    return attrs.evolve(reset, remaining=left, limit=limit)


def read_limits(headers: Mapping[str, str]) -> Advertised | None:
    """The limits one answer's headers advertise, in the contract's order (None: none
    usable). Never raises for what a server sent; the unusable is logged at DEBUG."""
    get = headers.get
    value = get(_IETF)
    if value is not None:
        return _ietf(headers, value)
    value = get(_REMAINING)
    if value is not None:
        return _family(headers, (_LIMIT, _REMAINING, _RESET), value, unix=False)
    value = get(_X_REMAINING)
    if value is not None:
        return _family(headers, (_X_LIMIT, _X_REMAINING, _X_RESET), value, unix=True)
    return None


# --- the IETF structured fields --------------------------------------------------------


def _all(headers: Mapping[str, str], name: istr, first: str) -> str:
    """Every line of a list field, joined as one (a list may be split over lines)."""
    getall = getattr(headers, "getall", None)
    if getall is None:
        return first
    return ", ".join(getall(name))


def _ietf(headers: Mapping[str, str], first: str) -> Advertised | None:
    """``RateLimit`` (``"name";r=<remaining>;t=<seconds>``, one item per policy) with
    ``RateLimit-Policy`` (``"name";q=<limit>;w=<window>``): the item that binds most."""
    value = _all(headers, _IETF, first)
    items = _sf_list(value)
    if items is None:
        _ignored("RateLimit", value, "not a structured-field list")
        return None
    best: tuple[float, str, int, int | float] | None = None
    for name, params in items:
        left = params.get("r")
        reset = params.get("t")
        if not isinstance(left, int) or left < 0 or reset is None or not 0 <= reset <= MAX_RESET:
            _ignored("RateLimit", value, "an item without r >= 0 and t within a day")
            return None
        # what binds most: the longest wait per request left (at zero: the longest reset)
        binding = math.inf if left == 0 else reset / left
        if best is None or (binding, reset) > (best[0], best[3]):
            best = (binding, name, left, reset)
    if best is None:
        _ignored("RateLimit", value, "no item")
        return None
    _, name, left, reset = best
    limit, window = _policy(headers, name, left)
    return Advertised(left, float(reset), limit, window, whole=isinstance(reset, int))


def _policy(headers: Mapping[str, str], name: str, left: int) -> tuple[int | None, float | None]:
    """The quota (``q``) and window (``w``) of the policy ``name``, when said and usable."""
    first = headers.get(_IETF_POLICY)
    if first is None:
        return None, None
    value = _all(headers, _IETF_POLICY, first)
    items = _sf_list(value)
    if items is None:
        _ignored("RateLimit-Policy", value, "not a structured-field list")
        return None, None
    named = [params for each, params in items if each == name]
    if not named and len(items) == 1:
        named = [items[0][1]]
    if not named:
        _ignored("RateLimit-Policy", value, f"no policy named {name!r}")
        return None, None
    params = named[0]
    quota, window = params.get("q"), params.get("w")
    limit = quota if isinstance(quota, int) and quota >= max(1, left) else None
    if limit is None:
        _ignored("RateLimit-Policy", value, "no q >= 1 and >= the remaining")
    seconds = float(window) if window is not None and 0 < window <= MAX_RESET else None
    return limit, seconds


def _sf_list(value: str) -> list[tuple[str, dict[str, int | float]]] | None:
    """A structured-field list of string or token items with parameters (RFC 8941), each as
    its name and its numeric parameters; None when it does not parse."""
    if len(value) > _MAX_VALUE:
        return None
    items: list[tuple[str, dict[str, int | float]]] = []
    at = _skip(value, 0)
    while at < len(value):
        parsed = _sf_item(value, at)
        if parsed is None:
            return None
        name, params, at = parsed
        items.append((name, params))
        at = _skip(value, at)
        if at == len(value):
            break
        if value[at] != ",":
            return None
        at = _skip(value, at + 1)
        if at == len(value):
            return None  # a trailing comma
    return items


def _skip(value: str, at: int) -> int:
    while at < len(value) and value[at] in " \t":
        at += 1
    return at


def _sf_item(value: str, at: int) -> tuple[str, dict[str, int | float], int] | None:
    """One item: a string or token, then ``;key=value`` parameters."""
    if value.startswith('"', at):
        end = value.find('"', at + 1)
        if end < 0 or "\\" in value[at + 1 : end]:
            return None
        name, at = value[at + 1 : end], end + 1
    else:
        token = _TOKEN.match(value, at)
        if token is None:
            return None
        name, at = token.group(), token.end()
    params: dict[str, int | float] = {}
    while value.startswith(";", at):
        at = _skip(value, at + 1)
        key = _KEY.match(value, at)
        if key is None:
            return None
        at = key.end()
        if not value.startswith("=", at):
            continue  # a boolean parameter: nothing this reads
        number = _SF_NUMBER.match(value, at + 1)
        if number is None:
            bare = _TOKEN.match(value, at + 1)
            if bare is None and not value.startswith('"', at + 1):
                return None
            end = bare.end() if bare is not None else value.find('"', at + 2) + 1
            if end <= at + 1:
                return None
            at = end
            continue  # a token or string parameter: nothing this reads
        text = number.group()
        params[key.group()] = float(text) if "." in text else int(text)
        at = number.end()
    return name, params, at


# --- the schedule one network's answers imply --------------------------------------------


class Learned:
    """What one network's answers taught a limiter, and the schedule it implies (times on
    the limiter's monotonic clock, in seconds).

    The newest answer says ``remaining`` requests may start in the current window, which
    ends at ``reset`` at the latest and at ``early`` at the soonest (headers count whole
    seconds); ``basis`` is when that answer's request left, so the reservations made after
    it (``grants``, in order) come off ``remaining``. The next window begins at ``reset``
    and lasts at least ``window`` seconds, with ``limit`` requests (when both are known;
    else the first request after the reset learns them, as the first one to a network
    does). In each window the requests that remain are spaced to last until it may end,
    and none starts from then until it surely has. Nothing is reserved further ahead: those
    requests wait for an answer from a later window. ``heard``: an answer was read;
    ``probe``: until when the answer of the first request (which left at ``probe_at``)
    is awaited. ``rated``: the limiter has rates of its own, which bound what goes before
    anything is learned: no request waits for a first one's answer. ``generation``
    counts what proved the learned wrong (a 429, a lower limit): a reservation made
    before it is not used (its caller asks again).
    """

    __slots__ = (
        "basis",
        "early",
        "generation",
        "grants",
        "heard",
        "limit",
        "probe",
        "probe_at",
        "rated",
        "remaining",
        "reset",
        "window",
    )

    def __init__(self, *, rated: bool = False, heard: bool = False) -> None:
        self.rated = rated
        self.heard = heard
        self.limit: int | None = None
        self.window: float | None = None
        self.reset = -math.inf
        self.early = -math.inf
        self.remaining = 0
        self.basis = -math.inf
        self.probe = -math.inf
        self.probe_at = -math.inf
        self.generation = 0
        #: The starts of the reservations made since ``basis``, in order.
        self.grants: list[float] = []

    @property
    def limited(self) -> bool:
        """A limit was learned (the answers carried rate-limit headers)."""
        return self.reset > -math.inf

    def _spaced(
        self, earliest: float, begin: float, end: float, capacity: int, pace: float = 0.0
    ) -> float | None:
        """The start of the next request in a window that began at ``begin``, may end at
        ``end`` and takes ``capacity`` more: what remains spaced to last until ``end``, at
        least ``pace`` apart (None: it takes no more before ``end``)."""
        if capacity <= 0:
            return None
        last = self.grants[-1] if self.grants else -math.inf
        start = max(earliest, begin, last + APART)
        if last >= begin:
            start = max(start, last + max(pace, (end - last) / (capacity + 1)))
        return start if start < end else None

    def _next_end(self) -> float | None:
        """The soonest the window after the current one may end, when its limit and its
        length are known and it surely lasts :data:`MIN_SPAN` past the latest reset (None:
        the first request after the reset learns it)."""
        if self.limit is None or not self.window:
            return None
        end = self.early + self.window
        return end if end - self.reset >= MIN_SPAN else None

    def start(self, earliest: float, now: float) -> tuple[float, bool]:
        """The earliest start at or after ``earliest`` that the learned limits allow, and
        True; or False and the soonest a start may be allowed: ask again when an answer is
        read (a first request's, or one from a later window), or :data:`LOOKAHEAD` s
        before that start (nothing is reserved further ahead while another reservation is
        still to start: a new answer may change the schedule)."""
        start, allowed = self._start(earliest, now)
        if allowed and start - now > LOOKAHEAD and self.grants and self.grants[-1] > now:
            return start, False
        return start, allowed

    def _start(self, earliest: float, now: float) -> tuple[float, bool]:
        if not self.limited:
            if self.heard or self.rated or self.probe <= now:
                return earliest, True
            return now, False
        grants = self.grants
        reset = self.reset
        if earliest < reset and (not grants or grants[-1] < reset):
            taken = len(grants) - bisect.bisect_right(grants, self.basis)
            start = self._spaced(earliest, self.basis, self.early, self.remaining - taken)
            if start is not None:
                return start, True
        begin = max(earliest, reset, (grants[-1] + APART) if grants else reset)
        end = self._next_end()
        if end is None or begin >= end:  # nothing known after the reset: one learns it
            return begin, self.rated or self.probe <= now
        # the next window at its own pace: the answers from it say the rest
        limit = self.limit or 0
        taken = len(grants) - bisect.bisect_left(grants, reset)
        pace = (self.window or 0.0) / max(1, limit)
        start = self._spaced(begin, reset, end, limit - taken, pace)
        if start is not None:
            return start, True
        return max(now, reset), False  # wait for an answer from the next window

    def book(self, start: float) -> None:
        """Record a reservation at ``start`` (one :meth:`start` allowed)."""
        if not self.limited:
            if not self.heard and not self.rated:
                self.probe, self.probe_at = start + PROBE_LEASE, start
            return
        self.grants.append(start)
        if len(self.grants) > MAX_GRANTS:
            del self.grants[: len(self.grants) - MAX_GRANTS]
        if start >= self.reset:
            end = self._next_end()
            if end is None or start >= end:  # the one that learns the next window
                self.probe, self.probe_at = start + PROBE_LEASE, start

    def observe(self, limits: Advertised | None, sent: float, read: float, heard: bool) -> bool:
        """Learn from the answer of a request that left at ``sent``, read at ``read``:
        ``limits`` its headers (None: none usable), ``heard`` False when there was no answer
        to learn from (a failure, a 429 with Retry-After). Any of them ends the wait for a
        first request (its own, or a later one's). True when ``remaining`` was learned."""
        if sent >= self.probe_at:
            self.probe = -math.inf
        if limits is None:
            if heard:
                self.heard = True
            return False
        reset = read + limits.reset
        whole = 1.0 if limits.whole else 0.0
        # the window ends no sooner than this (a reset in whole seconds was rounded up)
        early = (read if limits.absolute else sent) + limits.reset - whole
        same = abs(reset - self.reset) < SAME_RESET
        if same:  # each answer of a window bounds its end
            reset, early = min(reset, self.reset), max(early, self.early)
        if sent < self.basis:  # older than what is known: only its bounds of the window
            if same:
                self.reset, self.early = reset, min(early, reset)
            return False
        self.reset, self.early = reset, min(early, reset)
        self.remaining, self.basis, self.heard = limits.remaining, sent, True
        del self.grants[: bisect.bisect_right(self.grants, sent)]
        if limits.limit is not None:
            if self.limit is not None and limits.limit < self.limit:
                self._revoke(read)  # booked ahead for the higher limit
            self.limit = limits.limit
        if limits.window is not None:
            self.window = limits.window
        elif limits.reset - whole > (self.window or 0.0):
            # a window lasts at least as long as the time to its reset once surely was
            self.window = limits.reset - whole
        return True

    def refused(self, now: float, until: float) -> None:
        """A 429 holding until ``until``: what was learned was wrong. Nothing more starts
        in this window, which ends with the hold (the server said when to come back); the
        next one's limit is learned again (by its first request), and the reservations not
        yet started are not used (their callers ask again)."""
        self.remaining, self.limit = 0, None
        self.reset, self.early = min(self.reset, until), min(self.early, until)
        self._revoke(now)

    def _revoke(self, now: float) -> None:
        self.generation += 1
        del self.grants[bisect.bisect_right(self.grants, now) :]

    def status(self, now: float) -> tuple[int | None, int, float] | None:
        """The limit, the requests left and the seconds to the reset, as learned (None:
        nothing known now)."""
        if not self.limited:
            return None
        grants = self.grants
        if now < self.reset:
            left = self.remaining - (len(grants) - bisect.bisect_right(grants, self.basis))
            return self.limit, max(0, left), self.reset - now
        end = self._next_end()
        if end is None or now >= end or self.limit is None or self.window is None:
            return None
        left = self.limit - (len(grants) - bisect.bisect_left(grants, self.reset))
        return self.limit, max(0, left), self.reset + self.window - now
