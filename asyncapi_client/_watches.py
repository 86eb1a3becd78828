"""Watches: polling turned into a stream of typed changes that misses no final state.

A watch is three parts: a :class:`Source` (what is polled and how two sights compare), an
:class:`Engine` (who polls and where the place is kept: :class:`Poller` alone, or a fleet's
engine), and the :class:`Watch` the user iterates.

A :class:`Watch` polls one source (a user's orders, a pool, the top of the leaderboard) at
an interval, compares what it sees with what it saw, and hands out one change per observed
difference. It is *at least once*: a change counts as handled when the consumer asks for
the next one or closes the watch; until then it stays first in the watch's queue, which a
:class:`WatchState` keeps (``FileWatchState``: one JSON file, written atomically), so a
watch started again on the same state after any exit delivers again only the change in
hand, then every change since.

Cheap while quiet: each poll is a conditional GET (``If-None-Match``) and never comes sooner
than the server asks (``X-Poll-Interval``, ``Cache-Control: max-age``). A user's orders take
two requests a quiet interval: the profile (its open orders) and the newest page of orders
(new ones); only a closure looks further back, for the order's final state.

A poll that fails for a reason that heals (a connection, a timeout, 5xx, 429, the limiter)
is tried again at the next interval, for ever, logged and counted in ``Watch.failures``;
any other error ends the watch with it.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Self, TypeAlias, TypeVar

import attrs

from ._cache import cache_control, validators
from ._decode import from_wire, to_wire
from ._errors import (
    ApiError,
    LimiterError,
    NotFoundError,
    ResponseTooLargeError,
    StatusError,
    TransportError,
)
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    UserProfile,
)

if TYPE_CHECKING:
    from ._request import Outcome, Request
    from ._telemetry import Telemetry

__all__ = [
    "FINAL_STATUSES",
    "Engine",
    "FileWatchState",
    "LeaderboardChange",
    "OrderChange",
    "Poller",
    "PoolChange",
    "Watch",
    "WatchState",
    "wait_for_order",
]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: The states an order never leaves.
FINAL_STATUSES: Final = frozenset({OrderStatus.FILLED, OrderStatus.CANCELLED, OrderStatus.EXPIRED})
#: A server's poll interval longer than this (s) is not believed.
_MAX_HINT: Final = 86_400.0
#: The version of what a state holds.
_STATE_VERSION: Final = 1

OrderChangeKind: TypeAlias = Literal["new", "updated", "closed"]


# --- the changes ------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class OrderChange:
    """One observed change of an order: ``kind`` is ``"new"`` (first seen open or partly
    filled), ``"updated"`` (its status or filled size moved while not final) or ``"closed"``
    (seen FILLED, CANCELLED or EXPIRED); ``order`` as now seen, ``previous`` as last seen
    before (None if first seen). ``key`` is the same for a change delivered again, and
    different for different changes."""

    kind: OrderChangeKind
    order: Order
    previous: Order | None

    @property
    def key(self) -> str:
        """``transactionId``, status and filled size of the state reached."""
        order = self.order
        return f"{order.transaction_id}|{order.status.value}|{order.filled_size}"


@attrs.frozen(slots=True)
class PoolChange:
    """One observed change of a pool: ``pool`` as now seen, ``previous`` as seen before,
    ``changed`` the names of the fields that differ (``"price"``, ``"volume_24h"``...)."""

    pool: Pool
    previous: Pool
    changed: frozenset[str]


@attrs.frozen(slots=True)
class LeaderboardChange:
    """One observed change of the top of the leaderboard: ``entries`` as now seen (rank
    order), ``previous`` as seen before; ``entered`` and ``left`` the addresses that came
    into or went out of the top, ``moved`` those in it before and after with another rank
    or score."""

    entries: tuple[LeaderboardEntry, ...]
    previous: tuple[LeaderboardEntry, ...]
    entered: frozenset[str]
    left: frozenset[str]
    moved: frozenset[str]


# --- where a watch keeps its state ---------------------------------------------------------------


class WatchState(abc.ABC):
    """Where a watch keeps its baseline, its positions and the changes not yet handled.

    ``identity`` names the watch (operation, key, filters, network): a state holds one
    watch, and a watch of another identity on it raises ValueError when it starts.
    :meth:`engine` makes what runs the watch: by default a :class:`Poller` that keeps its
    place here with ``load`` and ``save``; a fleet's state makes one of its own.
    """

    def engine(
        self,
        source: Source[Any],
        *,
        interval: float,
        initial: bool,
        telemetry: Telemetry | None,
    ) -> Engine:
        """What runs a watch of ``source`` on this state."""
        return Poller(source, interval=interval, state=self, initial=initial, telemetry=telemetry)

    @abc.abstractmethod
    async def load(self, identity: Mapping[str, Any]) -> dict[str, Any] | None:
        """What was saved for ``identity`` (None: nothing yet)."""

    @abc.abstractmethod
    async def save(self, identity: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """Keep ``data`` for ``identity``, whole or not at all."""

    def save_now(self, identity: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        """Keep ``data`` without awaiting, when the state can (a watch dropped without
        ``aclose()``); False when it cannot."""
        return False


class FileWatchState(WatchState):
    """A watch's state in one JSON file at ``path``, replaced atomically at each change
    (written beside it, flushed to disk, then renamed over it): a watcher killed at any
    point, SIGKILL included, finds either the state before or the state after."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.fspath(path):
            raise ValueError(f"path must be a non-empty file path, got {path!r}")
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileWatchState({str(self.path)!r})"

    async def load(self, identity: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the file holds for ``identity`` (None: no file yet); ValueError when it holds
        another watch, or is not a watch state."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            held = json.loads(text)
            version, watch, data = held["version"], held["watch"], held["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{self.path} is not a watch state: {exc}") from None
        if version != _STATE_VERSION or not isinstance(data, dict):
            raise ValueError(f"{self.path} is not a watch state of this version")
        if watch != dict(identity):
            raise ValueError(
                f"{self.path} holds the state of another watch ({watch}), not of {dict(identity)}:"
                f" use one state per watch"
            )
        return data

    async def save(self, identity: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """Replace the file with ``data``, atomically (see the class)."""
        self.save_now(identity, data)

    def save_now(self, identity: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        """Replace the file with ``data`` now, atomically; True."""
        text = json.dumps({"version": _STATE_VERSION, "watch": dict(identity), "data": data})
        folder = self.path.parent
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=folder)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        with contextlib.suppress(OSError):  # the rename itself made durable, where it can be
            directory = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        return True


# --- fetching: conditional GETs, and how long the server asks us to wait -----------------------


#: Runs one request with ``If-None-Match: etag`` (None: unconditional): the Outcome, or None
#: for a 304, and the answer's headers either way.
Conditional: TypeAlias = Callable[
    ["Request[Any]", "str | None"],
    Awaitable["tuple[Outcome[Any] | None, Mapping[str, str]]"],
]


def poll_hint(headers: Mapping[str, str]) -> float:
    """Seconds the server asks between polls: ``X-Poll-Interval`` or ``Cache-Control:
    max-age``, the longer (0: it says nothing usable)."""
    hint = 0.0
    given = headers.get("X-Poll-Interval")
    if given is not None:
        try:
            seconds = float(given.strip())
        except ValueError:
            seconds = 0.0
        if math.isfinite(seconds) and 0 < seconds <= _MAX_HINT:
            hint = seconds
    directives = cache_control(headers)
    max_age = None if directives is None else directives.get("max-age")
    if max_age is not None and max_age.isdigit() and 0 < int(max_age) <= _MAX_HINT:
        hint = max(hint, float(max_age))
    return hint


def transient(error: ApiError) -> bool:
    """A failure a later poll may not meet: a connection, a timeout, 5xx, 429, the limiter."""
    if isinstance(error, StatusError):
        return error.status >= 500 or error.status == 429
    if isinstance(error, LimiterError):
        return True
    return isinstance(error, TransportError) and not isinstance(error, ResponseTooLargeError)


class Fetch:
    """The conditional GETs of one source, each remembering its ETag and the server's
    poll interval."""

    __slots__ = ("_conditional", "etags", "hint", "moved")

    def __init__(self, conditional: Conditional) -> None:
        self._conditional = conditional
        self.etags: dict[str, str] = {}
        self.hint = 0.0
        #: An answer (not a 304) came since this was last cleared: the position may move.
        self.moved = False

    async def get(self, name: str, request: Request[T]) -> T | None:
        """The value of ``request`` (None: unchanged since the answer ``name`` remembers)."""
        outcome, headers = await self._conditional(request, self.etags.get(name))
        self.hint = max(self.hint, poll_hint(headers))
        if outcome is None:
            return None
        self.moved = True
        etag = validators(outcome.headers)[0]
        if etag is None:
            self.etags.pop(name, None)
        else:
            self.etags[name] = etag
        return outcome.value  # type: ignore[no-any-return]

    async def fresh(self, request: Request[T]) -> T:
        """The value of ``request``, unconditionally (a look further back)."""
        outcome, headers = await self._conditional(request, None)
        assert outcome is not None
        self.hint = max(self.hint, poll_hint(headers))
        return outcome.value  # type: ignore[no-any-return]


# --- sources: what a watch polls and how it compares -------------------------------------------


class Source(abc.ABC, Generic[T]):
    """What one watch polls: its baseline, each poll's changes (as records a state can
    keep), and its own position (``dump`` / ``restore``)."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """What names this watch (a state holds one)."""

    @abc.abstractmethod
    async def baseline(self, initial: bool) -> list[dict[str, Any]]:
        """Take the baseline; the changes to deliver at once (``initial``)."""

    @abc.abstractmethod
    async def poll(self) -> list[dict[str, Any]]:
        """One poll: the changes observed since the last, oldest first."""

    @abc.abstractmethod
    def dump(self) -> dict[str, Any]:
        """The position (baseline and what was seen since), JSON-shaped."""

    @abc.abstractmethod
    def restore(self, data: Mapping[str, Any]) -> None:
        """Go on from a position :meth:`dump` made."""

    @abc.abstractmethod
    def decode(self, record: Mapping[str, Any]) -> T:
        """The change a record holds."""

    def snapshot(self) -> object:
        """The position as it is, to :meth:`rollback` to when a poll fails half way."""
        return self.dump()

    def rollback(self, snapshot: object) -> None:
        self.restore(snapshot)  # type: ignore[arg-type]


def _order(wire: Any) -> Order:
    return from_wire(wire, Order)


def _final(order: Order) -> bool:
    return order.status in FINAL_STATUSES


def _record(kind: OrderChangeKind, order: Order, previous: Order | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "order": to_wire(order),
        "previous": None if previous is None else to_wire(previous),
    }


class OrderSource(Source[OrderChange]):
    """A user's orders (with filters): the profile lists the open ones, the newest page of
    orders shows new ones; an open order that left the profile is looked up further back
    for its final state.

    ``known``: the orders seen open, by transaction id (as last seen); ``front``: the ids
    of the newest page as last seen (new orders come before them)."""

    def __init__(
        self,
        fetch: Fetch,
        identity: dict[str, Any],
        profile: Callable[[], Request[UserProfile]],
        page: Callable[[str | None], Request[OrdersPage]],
        matches: Callable[[Order], bool],
    ) -> None:
        super().__init__(fetch)
        self._identity = identity
        self._profile = profile
        self._page = page
        self._matches = matches
        self.known: dict[str, Order] = {}
        self.front: list[str] = []

    def identity(self) -> dict[str, Any]:
        return self._identity

    async def baseline(self, initial: bool) -> list[dict[str, Any]]:
        self.fetch.etags.clear()  # a baseline is taken whole
        profile = await self.fetch.get("profile", self._profile())
        page = await self.fetch.get("page", self._page(None))
        assert profile is not None
        self.known = {o.transaction_id: o for o in profile.orders if self._open_match(o)}
        self.front = [] if page is None else [o.transaction_id for o in page.orders]
        if not initial:
            return []
        return [_record("new", o, None) for o in reversed(list(self.known.values()))]

    def _open_match(self, order: Order) -> bool:
        return not _final(order) and self._matches(order)

    async def poll(self) -> list[dict[str, Any]]:
        profile = await self.fetch.get("profile", self._profile())
        fresh = await self._new_orders()
        opened = (
            None
            if profile is None
            else {o.transaction_id: o for o in profile.orders if self._open_match(o)}
        )
        changes: list[dict[str, Any]] = []
        for order in fresh:  # new to us, oldest first
            seen = order if opened is None else opened.get(order.transaction_id, order)
            changes.append(self._first_seen(seen))
        if any(
            tx not in (opened or ()) for tx in self.known.keys() & {o.transaction_id for o in fresh}
        ):
            # An open order the profile we hold does not list (made between the two
            # requests): that profile's ETag no longer stands for what we know, so the next
            # poll reads the profile whole (it may come back as it was once the order closes).
            self.fetch.etags.pop("profile", None)
        if opened is not None:
            changes += await self._compare(opened, {o.transaction_id for o in fresh})
        return changes

    def _first_seen(self, order: Order) -> dict[str, Any]:
        if _final(order):
            return _record("closed", order, None)
        self.known[order.transaction_id] = order
        return _record("new", order, None)

    async def _compare(self, opened: dict[str, Order], fresh: set[str]) -> list[dict[str, Any]]:
        """Changes of the orders seen open before (and open ones first seen in the profile)."""
        changes: list[dict[str, Any]] = []
        gone = [tx for tx in self.known if tx not in opened and tx not in fresh]
        for tx, order in opened.items():
            before = self.known.get(tx)
            if before is None:
                if tx not in fresh:
                    changes.append(self._first_seen(order))
            elif (before.status, before.filled_size) != (order.status, order.filled_size):
                self.known[tx] = order
                changes.append(_record("updated", order, before))
        if gone:
            changes.extend(
                _record("closed", order, self.known.pop(order.transaction_id))
                for order in await self._final_states(gone)
            )
        return changes

    async def _new_orders(self) -> list[Order]:
        """Orders listed before the newest page last seen, oldest first ([] if unchanged)."""
        page = await self.fetch.get("page", self._page(None))
        if page is None:
            return []
        front, found = set(self.front), list[Order]()
        self.front = [o.transaction_id for o in page.orders]
        while True:
            for order in page.orders:
                if order.transaction_id in front:
                    return list(reversed(found))
                found.append(order)
            if page.cursor is None:
                return list(reversed(found))
            page = await self.fetch.fresh(self._page(page.cursor))

    async def _final_states(self, gone: list[str]) -> list[Order]:
        """The orders ``gone`` from the profile as the list now has them (final), found by
        walking it from the newest; one not found yet is looked for again next poll."""
        wanted, found, cursor = set(gone), {}, None
        while wanted:
            page = await self.fetch.fresh(self._page(cursor))
            for order in page.orders:
                if order.transaction_id in wanted and _final(order):
                    found[order.transaction_id] = order
                    wanted.discard(order.transaction_id)
            cursor = page.cursor
            if cursor is None or not page.orders:
                break
        if wanted:
            log.warning("watch: %d closed order(s) not found in the list yet", len(wanted))
        return [found[tx] for tx in gone if tx in found]

    def snapshot(self) -> object:
        return dict(self.known), list(self.front), dict(self.fetch.etags)

    def rollback(self, snapshot: object) -> None:
        self.known, self.front, self.fetch.etags = snapshot  # type: ignore[misc]

    def dump(self) -> dict[str, Any]:
        return {
            "known": [to_wire(o) for o in self.known.values()],
            "front": list(self.front),
            "etags": dict(self.fetch.etags),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.known = {o.transaction_id: o for o in map(_order, data["known"])}
        self.front = [str(tx) for tx in data["front"]]
        self.fetch.etags = {str(k): str(v) for k, v in data.get("etags", {}).items()}

    def decode(self, record: Mapping[str, Any]) -> OrderChange:
        previous = record["previous"]
        return OrderChange(
            record["kind"], _order(record["order"]), None if previous is None else _order(previous)
        )


def _pool(wire: Any) -> Pool:
    return from_wire(wire, Pool)


class PoolSource(Source[PoolChange]):
    """One pool: a change whenever any of its fields differs from the last seen."""

    def __init__(
        self, fetch: Fetch, identity: dict[str, Any], request: Callable[[], Request[Pool]]
    ):
        super().__init__(fetch)
        self._identity = identity
        self._request = request
        self.pool: Pool | None = None

    def identity(self) -> dict[str, Any]:
        return self._identity

    async def baseline(self, initial: bool) -> list[dict[str, Any]]:
        self.pool = await self.fetch.get("pool", self._request())
        return []

    async def poll(self) -> list[dict[str, Any]]:
        pool = await self.fetch.get("pool", self._request())
        previous = self.pool
        if pool is None or previous is None:
            self.pool = pool or previous
            return []
        changed = [
            f.name for f in attrs.fields(Pool) if getattr(pool, f.name) != getattr(previous, f.name)
        ]
        self.pool = pool
        if not changed:
            return []
        return [{"pool": to_wire(pool), "previous": to_wire(previous), "changed": sorted(changed)}]

    def dump(self) -> dict[str, Any]:
        return {
            "pool": None if self.pool is None else to_wire(self.pool),
            "etags": dict(self.fetch.etags),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.pool = None if data["pool"] is None else _pool(data["pool"])
        self.fetch.etags = {str(k): str(v) for k, v in data.get("etags", {}).items()}

    def decode(self, record: Mapping[str, Any]) -> PoolChange:
        return PoolChange(
            _pool(record["pool"]), _pool(record["previous"]), frozenset(record["changed"])
        )


def _entry(wire: Any) -> LeaderboardEntry:
    return from_wire(wire, LeaderboardEntry)


class BoardSource(Source[LeaderboardChange]):
    """The first ``top`` ranks of the leaderboard, read page by page."""

    def __init__(
        self,
        fetch: Fetch,
        identity: dict[str, Any],
        top: int,
        page: Callable[[int, int], Request[LeaderboardPage]],
    ) -> None:
        super().__init__(fetch)
        self._identity = identity
        self._top = top
        self._page = page
        self.entries: tuple[LeaderboardEntry, ...] = ()

    def identity(self) -> dict[str, Any]:
        return self._identity

    async def _read(self) -> tuple[LeaderboardEntry, ...] | None:
        """The top entries (None: no page changed)."""
        size = min(self._top, 100)
        pages = math.ceil(self._top / size)
        changed = False
        entries: list[LeaderboardEntry] = []
        for number in range(1, pages + 1):
            page = await self.fetch.get(f"page{number}", self._page(number, size))
            if page is None:
                held = self.entries[(number - 1) * size : number * size]
                entries += held
                continue
            changed = True
            entries += page.leaderboard
            if len(page.leaderboard) < size:
                break
        return tuple(entries[: self._top]) if changed else None

    async def baseline(self, initial: bool) -> list[dict[str, Any]]:
        self.entries = await self._read() or ()
        return []

    async def poll(self) -> list[dict[str, Any]]:
        entries = await self._read()
        if entries is None:
            return []
        previous, self.entries = self.entries, entries
        before = {e.address: e for e in previous}
        after = {e.address: e for e in entries}
        moved = {
            a
            for a in before.keys() & after.keys()
            if (before[a].rank, before[a].score) != (after[a].rank, after[a].score)
        }
        entered, left = after.keys() - before.keys(), before.keys() - after.keys()
        if not (entered or left or moved):
            return []
        return [
            {
                "entries": [to_wire(e) for e in entries],
                "previous": [to_wire(e) for e in previous],
                "entered": sorted(entered),
                "left": sorted(left),
                "moved": sorted(moved),
            }
        ]

    def dump(self) -> dict[str, Any]:
        return {"entries": [to_wire(e) for e in self.entries], "etags": dict(self.fetch.etags)}

    def restore(self, data: Mapping[str, Any]) -> None:
        self.entries = tuple(map(_entry, data["entries"]))
        self.fetch.etags = {str(k): str(v) for k, v in data.get("etags", {}).items()}

    def decode(self, record: Mapping[str, Any]) -> LeaderboardChange:
        return LeaderboardChange(
            tuple(map(_entry, record["entries"])),
            tuple(map(_entry, record["previous"])),
            frozenset(record["entered"]),
            frozenset(record["left"]),
            frozenset(record["moved"]),
        )


# --- the watch ------------------------------------------------------------------------------------


class Engine(abc.ABC):
    """How a watch gets its changes and keeps its place: polling on its own (:class:`Poller`,
    with or without a state to keep), or as one process of a fleet (``RedisWatchState``).

    Changes travel as records (JSON-shaped dicts the source decodes). ``next`` waits for the
    next record and holds it "in hand"; ``handled`` says the one in hand was handled;
    ``handled_now`` does the same without awaiting, where the engine can (a watch dropped
    without ``aclose()``); ``close`` ends whatever the engine runs.
    """

    #: Polls that failed (after their retries) and were tried again at the next interval.
    failures: int = 0

    @abc.abstractmethod
    async def next(self) -> dict[str, Any]:
        """The next record (after the one in hand, once that is handled)."""

    @abc.abstractmethod
    async def handled(self) -> None:
        """The record in hand was handled."""

    def handled_now(self) -> None:  # noqa: B027 - an engine that cannot does nothing
        """The record in hand was handled, without awaiting (best effort)."""

    async def close(self) -> None:  # noqa: B027 - nothing to end by default
        """End what the engine runs."""


class Poller(Engine):
    """A watch that polls on its own: its source's changes queue in ``pending`` (the first
    one is the one in hand), and ``state`` (when given) keeps the queue and the source's
    position after every change of either."""

    def __init__(
        self,
        source: Source[Any],
        *,
        interval: float,
        state: WatchState | None,
        initial: bool = False,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.source = source
        self.interval = interval
        self.state = state
        self.initial = initial
        self.telemetry = telemetry
        self.pending: list[dict[str, Any]] = []
        self.failures = 0
        self._started = False

    async def next(self) -> dict[str, Any]:
        if not self._started:
            await self._start()
        while not self.pending:
            await self.poll_once()
        return self.pending[0]

    async def handled(self) -> None:
        if self.pending:
            self.pending.pop(0)
        await self._save()

    def handled_now(self) -> None:
        if self.pending and self.state is not None:
            self.pending.pop(0)
            self.state.save_now(self.source.identity(), self.data())

    async def _start(self) -> None:
        self._started = True
        state, source = self.state, self.source
        held = None if state is None else await state.load(source.identity())
        if held is not None:
            source.restore(held["source"])
            self.pending = list(held["pending"])
            return
        while True:
            try:
                self.pending = await source.baseline(self.initial)
                break
            except ApiError as exc:
                await self._failed(exc)
        await self._save()

    async def poll_once(self) -> list[dict[str, Any]]:
        """Wait for the interval (or what the server asks), poll once; the changes seen
        (queued in ``pending``), [] for a quiet or failed poll."""
        source = self.source
        fetch = source.fetch
        await asyncio.sleep(max(self.interval, fetch.hint))
        fetch.hint = 0.0
        fetch.moved = False
        before = source.snapshot()
        try:
            changes = await self._poll()
        except ApiError as exc:
            source.rollback(before)  # nothing of a poll that failed half way is kept
            await self._failed(exc)
            return []
        if changes:
            self.pending += changes
        if changes or fetch.moved:  # a quiet poll (every answer a 304) writes nothing
            await self._save()
        return changes

    async def _poll(self) -> list[dict[str, Any]]:
        """One poll of the source, in its span when telemetry is on."""
        telemetry = self.telemetry
        if telemetry is None:
            return await self.source.poll()
        with telemetry.poll(self.source.identity()["watch"]) as saw:
            changes = await self.source.poll()
            saw(len(changes))
        return changes

    async def _failed(self, exc: ApiError) -> None:
        if not transient(exc):
            raise exc
        self.failures += 1
        log.warning(
            "watch %s: a poll failed, tried again at the next interval: %s",
            self.source.identity(),
            exc,
        )
        await asyncio.sleep(self.interval)

    def data(self) -> dict[str, Any]:
        """What a state keeps: the source's position and the records not yet handled."""
        return {"source": self.source.dump(), "pending": self.pending}

    async def _save(self) -> None:
        if self.state is not None:
            await self.state.save(self.source.identity(), self.data())


class Watch(Generic[T]):
    """An async iterator of changes (``async for``, ``anext()``, ``aclose()``, ``async with``).

    One task at a time steps it. A change handed out counts as handled when the next one is
    asked for or the watch is closed (``break`` out of ``async for`` included); ``failures``
    counts the polls that failed and were tried again at the next interval.
    """

    __slots__ = ("_busy", "_closed", "_engine", "_in_hand", "_source")

    def __init__(self, source: Source[T], engine: Engine) -> None:
        self._source = source
        self._engine = engine
        self._in_hand = False
        self._closed = False
        self._busy = False

    @property
    def failures(self) -> int:
        """Polls that failed (after their retries) and were tried again at the next interval."""
        return self._engine.failures

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Watch {self._source.identity()} {state}>"

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        if self._busy:
            raise RuntimeError("anext(): the watch is already running in another task")
        self._busy = True
        try:
            if self._in_hand:
                self._in_hand = False
                await self._engine.handled()
            record = await self._engine.next()
            self._in_hand = True
            return self._source.decode(record)
        except ApiError:
            self._closed = True  # an error that does not heal ends the watch
            await self._engine.close()
            raise
        finally:
            self._busy = False

    async def aclose(self) -> None:
        """Stop watching; the change in hand counts as handled. Calling it twice is fine."""
        if self._closed:
            return
        if self._busy:
            raise RuntimeError("aclose(): the watch is running in another task; cancel that task")
        self._closed = True
        try:
            if self._in_hand:
                self._in_hand = False
                await self._engine.handled()
        finally:
            await self._engine.close()

    async def _abandon(self) -> None:
        """Stop watching and leave the change in hand unhandled (the command line, stopped
        before that change's line was written): a watch started again on the same state
        delivers it again."""
        if self._closed:
            return
        self._closed = True
        self._in_hand = False
        await self._engine.close()

    def __del__(self) -> None:
        # Dropped without aclose() (a ``break`` out of ``async for``): the change in hand is
        # handled, where the engine can say so without awaiting.
        if not self._closed and self._in_hand:
            with contextlib.suppress(Exception):
                self._engine.handled_now()


def order_filter(market: str | None, side: str | None) -> Callable[[Order], bool]:
    """Whether an order of the profile matches a watch's ``market`` and ``side``."""

    def matches(order: Order) -> bool:
        return (market is None or order.pool_id == market) and (
            side is None or order.side.value == side
        )

    return matches


async def wait_for_order(
    fetch: Fetch,
    profile: Callable[[], Request[UserProfile]],
    page: Callable[[str | None], Request[OrdersPage]],
    transaction_id: str,
    statuses: frozenset[OrderStatus],
    interval: float,
) -> Order:
    """Poll until order ``transaction_id`` has a status in ``statuses``: the profile while
    it is open, the list (one full look) once it is not; see ``Client.wait_for_order``."""
    while True:
        try:
            order = await _look_up(fetch, profile, page, transaction_id)
        except ApiError as exc:
            if not transient(exc):
                raise
            log.warning("wait_for_order %s: a poll failed, tried again: %s", transaction_id, exc)
        else:
            if order.status in statuses:
                return order
            if _final(order):
                wanted = ", ".join(sorted(s.value for s in statuses))
                raise ValueError(
                    f"order {transaction_id} is {order.status.value}, a final state: it will "
                    f"never be {wanted}"
                )
        await asyncio.sleep(max(interval, fetch.hint))
        fetch.hint = 0.0


async def _look_up(
    fetch: Fetch,
    profile: Callable[[], Request[UserProfile]],
    page: Callable[[str | None], Request[OrdersPage]],
    transaction_id: str,
) -> Order:
    """The order as now seen: in the profile (open), else in the list (a full look)."""
    request = profile()
    for order in (await fetch.fresh(request)).orders:
        if order.transaction_id == transaction_id:
            return order
    cursor = None
    while True:
        listed = await fetch.fresh(page(cursor))
        for order in listed.orders:
            if order.transaction_id == transaction_id:
                return order
        cursor = listed.cursor
        if cursor is None or not listed.orders:
            break
    raise NotFoundError(
        f"the address has no order {transaction_id!r} (looked through all of its orders)",
        status=404,
        url=request.url,
        network=request.network.value,
    )
