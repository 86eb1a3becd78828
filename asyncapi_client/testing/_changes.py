"""The fake exchange's life: seeded changes to its orders, pools and leaderboard, journalled.

Every change is drawn from one random stream seeded by the exchange's seed, so the same seed
and the same calls give the same changes. Orders move only forward (OPEN, PARTIALLY_FILLED,
then FILLED, CANCELLED or EXPIRED), new orders go to the front of their user's list, and a
final order never changes again.
"""

from __future__ import annotations

import math
import random
import time
from decimal import Decimal, InvalidOperation
from typing import Final, Literal, Protocol, TypeAlias

import attrs

from ._wire import EPOCH_MS, WireDict, copy_wire, fraction_digits, hex_id, round_sig, units_text

__all__ = ["WORKING", "Change", "ChangeKind", "ChangeMaker"]

ChangeKind: TypeAlias = Literal["order.new", "order.update", "pool.update", "leaderboard.update"]

#: The statuses of an order that may still change; the others are final.
WORKING: Final = frozenset({"OPEN", "PARTIALLY_FILLED"})
_KINDS: Final[tuple[ChangeKind, ...]] = (
    "order.new",
    "order.update",
    "pool.update",
    "leaderboard.update",
)
_WEIGHTS: Final = (3, 4, 2, 1)
_SIDES: Final = ("BUY", "SELL")
# what happens to a working order: filled in part, filled, cancelled, expired
_PARTIAL, _FILLED, _CANCELLED = 0.45, 0.75, 0.92


@attrs.frozen
class Change:
    """One change of the fake exchange, as ``exchange.journal`` keeps it.

    ``before`` and ``after`` are full copies of the wire dict just before and just after
    (``before`` is None for a new order; a leaderboard entry's ``after`` has its new rank).
    Two changes are equal when all but their ``at`` are: two exchanges of the same seed given
    the same calls have equal journals.
    """

    #: 1, 2, ... in the order the changes were applied.
    seq: int
    #: ``time.time()`` when it was applied.
    at: float = attrs.field(eq=False)
    #: ``"order.new"``, ``"order.update"``, ``"pool.update"`` or ``"leaderboard.update"``.
    kind: ChangeKind
    #: The transaction id, pool id, or leaderboard address.
    key: str
    #: The order's user; None for a pool or a leaderboard entry.
    address: str | None
    before: WireDict | None
    after: WireDict


class ExchangeData(Protocol):
    """What the changes edit: the containers of a FakeExchange."""

    seed: int
    orders: dict[str, list[WireDict]]
    users: dict[str, WireDict]
    pools: dict[str, WireDict]
    leaderboard: list[WireDict]
    journal: list[Change]


def _number(value: object) -> float | None:
    """``value`` as a float if it is a finite JSON number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _remove_same(items: list[WireDict], item: WireDict) -> None:
    """Remove ``item`` itself (not an equal dict) from ``items``, if there."""
    for position, candidate in enumerate(items):
        if candidate is item:
            del items[position]
            return


def _amounts(order: WireDict) -> tuple[int, int, int] | None:
    """(size, filled, decimals) of an order in units of its finest decimal; None: not amounts."""
    try:
        size, filled = Decimal(order["size"]), Decimal(order["filledSize"])
    except (KeyError, TypeError, InvalidOperation):
        return None
    if not (size.is_finite() and filled.is_finite()) or not 0 <= filled <= size:
        return None
    exponents = (size.as_tuple().exponent, filled.as_tuple().exponent, 0)
    digits = -min(e for e in exponents if isinstance(e, int))
    return int(size.scaleb(digits)), int(filled.scaleb(digits)), digits


def _score(entry: WireDict) -> float:
    score = _number(entry.get("score"))
    return 0.0 if score is None else score


class ChangeMaker:
    """The seeded stream of changes of one exchange, and what it needs to draw them fast."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"asyncapi-fake-activity/{seed}")
        self.seq = 0
        # user address -> that user's working orders, newest first (the same dicts), built on
        # first use; an order closed by a test's edit is dropped when it is drawn.
        self._working: dict[str, list[WireDict]] | None = None

    def make(self, data: ExchangeData, n: int) -> list[Change]:
        """Apply up to ``n`` changes to ``data`` and journal them; fewer when nothing can change."""
        made: list[Change] = []
        for _ in range(n):
            change = self._one(data)
            if change is None:
                break
            data.journal.append(change)
            made.append(change)
        return made

    def _one(self, data: ExchangeData) -> Change | None:
        working = self._index(data)
        for _ in range(8):  # a drawn order may turn out closed by an edit: draw again
            kinds = [
                (kind, weight)
                for kind, weight, possible in zip(
                    _KINDS,
                    _WEIGHTS,
                    (
                        bool(data.pools) and bool(data.users.keys() | data.orders.keys()),
                        any(working.values()),
                        bool(data.pools),
                        bool(data.leaderboard),
                    ),
                    strict=True,
                )
                if possible
            ]
            if not kinds:
                return None
            kind = self.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
            made = self._apply(data, kind)
            if made is not None:
                return made
        return None

    def _apply(self, data: ExchangeData, kind: ChangeKind) -> Change | None:
        if kind == "order.new":
            return self._new_order(data)
        if kind == "order.update":
            return self._update_order(data)
        if kind == "pool.update":
            return self._update_pool(data)
        return self._update_leaderboard(data)

    def _change(
        self,
        kind: ChangeKind,
        key: str,
        address: str | None,
        before: WireDict | None,
        after: WireDict,
    ) -> Change:
        self.seq += 1
        return Change(
            seq=self.seq,
            at=time.time(),
            kind=kind,
            key=key,
            address=address,
            before=before,
            after=copy_wire(after),
        )

    def _index(self, data: ExchangeData) -> dict[str, list[WireDict]]:
        if self._working is None:
            self._working = {
                address: [o for o in orders if o.get("status") in WORKING]
                for address, orders in data.orders.items()
            }
        return self._working

    # --- orders -----------------------------------------------------------------------

    def _new_order(self, data: ExchangeData) -> Change:
        rng = self.rng
        address = rng.choice(list(dict.fromkeys([*data.users, *data.orders])))
        orders = data.orders.setdefault(address, [])
        recent = [o.get("poolId") for o in orders[:20]]
        known = [p for p in recent if isinstance(p, str) and p in data.pools]
        pool = data.pools[rng.choice(known)] if known else rng.choice(list(data.pools.values()))
        newest = orders[0].get("timestamp") if orders else None
        timestamp = newest if isinstance(newest, int) else EPOCH_MS
        order = {
            "transactionId": hex_id(rng, 32),
            "poolId": pool.get("poolId"),
            "user": address,
            "side": rng.choice(_SIDES),
            **self._price_and_size(pool),
            "status": "OPEN",
            "timestamp": timestamp + rng.randrange(1_000, 600_000),
        }
        orders.insert(0, order)
        self._index(data).setdefault(address, []).insert(0, order)
        listed = data.users.get(address, {}).get("orders")
        if isinstance(listed, list):
            listed.insert(0, order)
        return self._change("order.new", order["transactionId"], address, None, order)

    def _price_and_size(self, pool: WireDict) -> WireDict:
        """``price``, ``size`` and a zero ``filledSize`` of a new order in ``pool``, as text."""
        rng = self.rng
        quoted = _number(pool.get("price"))
        market = quoted if quoted is not None and quoted > 0 else 1.0
        price = market * (1.0 + rng.gauss(0.0, 0.01))
        price = price if price > 0 else market
        base = pool.get("baseToken") or {}
        decimals = base.get("decimals")
        decimals = decimals if isinstance(decimals, int) and 0 <= decimals <= 36 else 18
        listed = _number(base.get("priceUsd"))
        usd = listed if listed is not None and listed > 0 else 1.0
        size = 40.0 * rng.lognormvariate(1.5, 1.3) / usd
        digits = min(decimals, max(fraction_digits(size, 2), rng.randint(0, 6)))
        units = max(2, round(size * 10**digits))
        return {
            "price": f"{price:.{fraction_digits(price, rng.randint(3, 8))}f}",
            "size": units_text(units, digits),
            "filledSize": units_text(0, digits),
        }

    def _draw_working(self, data: ExchangeData) -> tuple[str, WireDict] | None:
        """A working order (and its list's address), dropping those an edit has closed."""
        working = self._index(data)
        addresses = [a for a, listed in working.items() if listed]
        if not addresses:
            return None
        address = self.rng.choice(addresses)
        listed = working[address]
        order = self.rng.choice(listed)
        if order.get("status") in WORKING:
            return address, order
        _remove_same(listed, order)
        return None

    def _update_order(self, data: ExchangeData) -> Change | None:
        drawn = self._draw_working(data)
        if drawn is None:
            return None
        address, order = drawn
        before = copy_wire(order)
        roll = self.rng.random()
        amounts = _amounts(order)
        if amounts is not None and roll < _PARTIAL and amounts[0] - amounts[1] >= 2:
            size, filled, digits = amounts
            filled = self.rng.randint(filled + 1, size - 1)
            order.update(filledSize=units_text(filled, digits), status="PARTIALLY_FILLED")
        elif amounts is not None and roll < _FILLED:
            order.update(filledSize=order["size"], status="FILLED")
        else:
            order["status"] = "CANCELLED" if roll < _CANCELLED else "EXPIRED"
        if order["status"] not in WORKING:
            _remove_same(self._index(data)[address], order)
            listed = data.users.get(address, {}).get("orders")
            if isinstance(listed, list):
                _remove_same(listed, order)
        user = order.get("user")
        return self._change(
            "order.update",
            str(order.get("transactionId")),
            user if isinstance(user, str) else address,
            before,
            order,
        )

    # --- pools and the leaderboard ----------------------------------------------------

    def _update_pool(self, data: ExchangeData) -> Change:
        rng = self.rng
        pool_id, pool = rng.choice(list(data.pools.items()))
        before = copy_wire(pool)
        moves: dict[str, float] = {}
        price = _number(pool.get("price"))
        if price is not None and price > 0:
            moves["price"] = round_sig(price * math.exp(rng.gauss(0.0, 0.004)), 6)
        change = _number(pool.get("priceChange24h"))
        if change is not None:
            moves["priceChange24h"] = round(change + rng.gauss(0.0, 0.2), 2)
        for name in ("volume24h", "tvl"):
            value = _number(pool.get(name))
            if value is not None:
                moves[name] = round(max(0.0, value * (1.0 + rng.gauss(0.001, 0.01))), 2)
        pool.update(moves)
        return self._change("pool.update", pool_id, None, before, pool)

    def _update_leaderboard(self, data: ExchangeData) -> Change:
        board = data.leaderboard
        entry = self.rng.choice(board)
        before = copy_wire(entry)
        score = _score(entry)
        entry["score"] = round(score + self.rng.expovariate(1.0 / (0.02 * score + 1.0)), 2)
        board.sort(key=_score, reverse=True)  # stable: ties keep their order
        for rank, ranked in enumerate(board, start=1):
            if ranked.get("rank") != rank:
                ranked["rank"] = rank
        address = entry.get("address")
        return self._change("leaderboard.update", str(address), None, before, entry)
