"""The fake exchange's data: a deterministic, realistic data set generated from a seed.

Everything is kept as wire dicts (camelCase names, decimals as text), exactly what the fake
server sends, so tests can compare what a client decoded with what the exchange holds.
"""

from __future__ import annotations

import functools
import pickle
import random
import threading
from collections.abc import Sequence
from typing import Final

import attrs

from ._changes import Change, ChangeMaker
from ._wire import EPOCH_MS as _EPOCH_MS
from ._wire import WireDict
from ._wire import fraction_digits as _fraction_digits
from ._wire import hex_id as _hex
from ._wire import round_sig as _round_sig
from ._wire import units_text as _units

__all__ = ["FakeExchange", "WireDict"]

_STATUSES: Final = ("OPEN", "FILLED", "PARTIALLY_FILLED", "CANCELLED", "EXPIRED")
_STATUS_WEIGHTS: Final = (15, 35, 10, 25, 15)
_SIDES: Final = ("BUY", "SELL")
# advance() may be called from a test's thread while the activity runs on the server's
_ADVANCING: Final = threading.Lock()

# symbol, name, decimals, rough USD price
_CATALOGUE: Final[tuple[tuple[str, str, int, float], ...]] = (
    ("USDC", "USD Coin", 6, 1.0),
    ("WETH", "Wrapped Ether", 18, 3150.0),
    ("USDT", "Tether USD", 6, 1.0),
    ("DAI", "Dai Stablecoin", 18, 1.0),
    ("WBTC", "Wrapped BTC", 8, 64200.0),
    ("stETH", "Liquid staked Ether 2.0", 18, 3140.0),
    ("rETH", "Rocket Pool ETH", 18, 3480.0),
    ("cbETH", "Coinbase Wrapped Staked ETH", 18, 3390.0),
    ("LINK", "ChainLink Token", 18, 14.2),
    ("UNI", "Uniswap", 18, 7.9),
    ("AAVE", "Aave Token", 18, 151.0),
    ("MKR", "Maker", 18, 2230.0),
    ("CRV", "Curve DAO Token", 18, 0.31),
    ("SNX", "Synthetix Network Token", 18, 1.65),
    ("COMP", "Compound", 18, 48.5),
    ("LDO", "Lido DAO Token", 18, 1.21),
    ("ARB", "Arbitrum", 18, 0.62),
    ("OP", "Optimism", 18, 1.48),
    ("MATIC", "Matic Token", 18, 0.41),
    ("GRT", "Graph Token", 18, 0.16),
    ("BAL", "Balancer", 18, 2.1),
    ("SUSHI", "SushiToken", 18, 0.68),
    ("YFI", "yearn.finance", 18, 5420.0),
    ("1INCH", "1INCH Token", 18, 0.26),
    ("ENS", "Ethereum Name Service", 18, 18.7),
    ("DYDX", "dYdX", 18, 1.05),
    ("GMX", "GMX", 18, 21.4),
    ("BLUR", "Blur", 18, 0.19),
    ("RNDR", "Render Token", 18, 5.2),
    ("IMX", "Immutable X", 18, 1.32),
    ("FET", "Fetch", 18, 1.27),
    ("PEPE", "Pepe", 18, 0.0000087),
    ("SHIB", "SHIBA INU", 18, 0.0000171),
    ("APE", "ApeCoin", 18, 0.71),
    ("SAND", "SAND", 18, 0.27),
    ("MANA", "Decentraland MANA", 18, 0.29),
    ("AXS", "Axie Infinity Shard", 18, 4.6),
    ("CHZ", "chiliZ", 18, 0.064),
    ("RPL", "Rocket Pool Protocol", 18, 9.8),
    ("FXS", "Frax Share", 18, 1.9),
    ("PENDLE", "Pendle", 18, 3.7),
    ("ENA", "ENA", 18, 0.34),
    ("ONDO", "Ondo", 18, 0.92),
    ("FRAX", "Frax", 18, 1.0),
    ("LUSD", "LUSD Stablecoin", 18, 1.0),
    ("GUSD", "Gemini dollar", 2, 1.0),
    ("EURS", "STASIS EURS Token", 2, 1.08),
    ("AMPL", "Ampleforth", 9, 1.19),
    ("HEX", "HEX", 8, 0.0029),
    ("PYUSD", "PayPal USD", 6, 1.0),
)
_STABLES: Final = frozenset({"USDC", "USDT", "DAI", "FRAX", "LUSD", "GUSD", "PYUSD"})
_QUOTES: Final = ("USDC", "USDT", "WETH", "DAI")


def _money(rng: random.Random, median: float, sigma: float = 1.0) -> float:
    return round(median * rng.lognormvariate(0.0, sigma), 2)


def _seed(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"seed must be an int, got {value!r}")
    return value


def _positive(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


@attrs.define(kw_only=True)
class FakeExchange:
    """All the data the fake server serves, as wire dicts; the server reads it live.

    Build one with :meth:`generate`; the containers may be edited afterwards (add an order,
    change a price) to set up a scenario, and a running :class:`FakeServer` serves the edit.
    """

    #: The seed the data was generated from (the same seed, the same data).
    seed: int = 0
    #: Token wire dicts, in directory order.
    tokens: list[WireDict] = attrs.Factory(list)
    #: token address -> the Market wire dicts that trade it (as token0 or token1).
    markets: dict[str, list[WireDict]] = attrs.Factory(dict)
    #: poolId -> Pool wire dict.
    pools: dict[str, WireDict] = attrs.Factory(dict)
    #: user address -> profile wire dict (balances, the user's OPEN and PARTIALLY_FILLED
    #: orders newest first, positions).
    users: dict[str, WireDict] = attrs.Factory(dict)
    #: user address -> every Order wire dict of that user, newest first.
    orders: dict[str, list[WireDict]] = attrs.Factory(dict)
    #: LeaderboardEntry wire dicts, rank 1..N.
    leaderboard: list[WireDict] = attrs.Factory(list)
    #: Every change :meth:`advance` (or a server's activity) applied, in order.
    journal: list[Change] = attrs.field(init=False, factory=list)
    _maker: ChangeMaker | None = attrs.field(init=False, default=None, eq=False, repr=False)

    def advance(self, n: int = 1) -> list[Change]:
        """Apply ``n`` changes drawn from this exchange's own seeded stream, and return them.

        The same seed and the same calls give the same changes: new orders at the front of
        a user's list, orders moving only forward (OPEN, PARTIALLY_FILLED, then FILLED,
        CANCELLED or EXPIRED), pool prices, volumes and TVL moving, leaderboard scores
        changing with the ranks recomputed. Each is also appended to :attr:`journal`.
        """
        given: object = n
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise ValueError(f"n must be an int >= 0 (changes to apply), got {n!r}")
        made = self._advance(n)
        if len(made) < n:
            raise ValueError(
                "nothing left to change: the exchange has no pool, no user and no leaderboard "
                f"entry to change ({len(made)} of {n} changes applied)"
            )
        return made

    def _advance(self, n: int) -> list[Change]:
        """Up to ``n`` changes; fewer (none) when there is nothing to change."""
        with _ADVANCING:
            if self._maker is None:
                self._maker = ChangeMaker(self.seed)
            return self._maker.make(self, n)

    @classmethod
    def generate(
        cls,
        seed: int = 0,
        *,
        tokens: int = 40,
        users: int = 8,
        orders_per_user: int = 300,
        leaderboard_size: int = 250,
        pools: int = 12,
    ) -> FakeExchange:
        """A realistic data set; the same seed and sizes always give the same data.

        With ``orders_per_user >= 10`` every user has orders of all five statuses on both
        sides. Needs at least 2 tokens and 1 pool.

        Args:
            seed: the seed the data is drawn from.
            tokens: tokens in the directory.
            users: users with a profile and orders.
            orders_per_user: orders of each user.
            leaderboard_size: entries on the leaderboard.
            pools: order-book pools.
        """
        pickled = _generated(
            _seed(seed),
            tokens=_positive("tokens", tokens, 2),
            pools=_positive("pools", pools, 1),
            users=_positive("users", users, 0),
            orders_per_user=_positive("orders_per_user", orders_per_user, 0),
            leaderboard_size=_positive("leaderboard_size", leaderboard_size, 0),
        )
        directory, markets, by_pool, profiles, orders, board = pickle.loads(pickled)
        return FakeExchange(
            seed=seed,
            tokens=directory,
            markets=markets,
            pools=by_pool,
            users=profiles,
            orders=orders,
            leaderboard=board,
        )


@functools.lru_cache(maxsize=4)
def _generated(
    seed: int, *, tokens: int, pools: int, users: int, orders_per_user: int, leaderboard_size: int
) -> bytes:
    """The data set of these arguments, pickled: each :meth:`FakeExchange.generate` call gets
    its own copy (with the same dicts shared where the data set shares them) in 2 ms, where
    generating takes 20 (60 under coverage's tracer), and tests generate the same few seeds
    over and over. Only this module pickles what it loads."""
    made = _Generator(
        random.Random(seed),
        tokens=tokens,
        pools=pools,
        users=users,
        orders_per_user=orders_per_user,
        leaderboard_size=leaderboard_size,
    ).build(seed)
    parts = (made.tokens, made.markets, made.pools, made.users, made.orders, made.leaderboard)
    return pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)


@attrs.define
class _Token:
    wire: WireDict
    price: float  # the "true" USD price, also when the wire's priceUsd is null


class _Generator:
    """One generation run: a single seeded Random, consumed in a fixed order."""

    def __init__(
        self,
        rng: random.Random,
        *,
        tokens: int,
        pools: int,
        users: int,
        orders_per_user: int,
        leaderboard_size: int,
    ) -> None:
        self.rng = rng
        self.n_tokens = tokens
        self.n_pools = pools
        self.n_users = users
        self.orders_per_user = orders_per_user
        self.leaderboard_size = leaderboard_size

    def build(self, seed: int) -> FakeExchange:
        tokens = self.tokens()
        pools = self.pools(tokens)
        markets = self.markets(tokens, pools)
        orders = {}
        users = {}
        by_address = {t.wire["address"]: t for t in tokens}
        for _ in range(self.n_users):
            address = _hex(self.rng, 20)
            orders[address] = self.orders(address, pools, by_address)
            users[address] = self.profile(address, orders[address], tokens, pools)
        return FakeExchange(
            seed=seed,
            tokens=[t.wire for t in tokens],
            markets=markets,
            pools={p["poolId"]: p for p in pools},
            users=users,
            orders=orders,
            leaderboard=self.leaderboard(list(users)),
        )

    # --- tokens, pools, markets -------------------------------------------------------

    def tokens(self) -> list[_Token]:
        rng = self.rng
        head, rest = list(_CATALOGUE[:2]), list(_CATALOGUE[2:])
        chosen = head + rng.sample(rest, min(len(rest), self.n_tokens - 2))
        for n in range(len(chosen), self.n_tokens):  # past the catalogue: made-up tokens
            chosen.append((f"TKN{n}", f"Test Token {n}", rng.choice((6, 8, 9, 18)), 0.5))
        out = []
        for symbol, name, decimals, price in chosen:
            address = _hex(rng, 20)
            true_price = price if symbol in _STABLES else price * rng.lognormvariate(0.0, 0.08)
            supply = _units(rng.randrange(10 ** (decimals + 5), 10 ** (decimals + 11)), decimals)
            wire: WireDict = {
                "address": address,
                "name": name,
                "symbol": symbol,
                "decimals": decimals,
                "totalSupply": supply,
                "logoUri": None
                if rng.random() < 0.15
                else f"https://assets.fake-exchange.invalid/tokens/{address}/logo.png",
                "priceUsd": None if rng.random() < 0.1 else _round_sig(true_price, 6),
            }
            out.append(_Token(wire, true_price))
        # Small directories still show both kinds of null.
        if len(out) >= 5:
            if all(t.wire["logoUri"] is not None for t in out):
                out[-1].wire["logoUri"] = None
            if all(t.wire["priceUsd"] is not None for t in out):
                out[-2].wire["priceUsd"] = None
        return out

    def pools(self, tokens: Sequence[_Token]) -> list[WireDict]:
        rng = self.rng
        quotes = [t for t in tokens if t.wire["symbol"] in _QUOTES]
        out = []
        for _ in range(self.n_pools):
            quote = rng.choice(quotes)
            base = rng.choice([t for t in tokens if t is not quote])
            out.append(
                {
                    "poolId": _hex(rng, 32),
                    "baseToken": base.wire,
                    "quoteToken": quote.wire,
                    "price": _round_sig(base.price / quote.price, 6),
                    "priceChange24h": round(rng.gauss(0.0, 4.0), 2),
                    "volume24h": _money(rng, 2_500_000.0, 1.2),
                    "tvl": _money(rng, 8_000_000.0, 1.0),
                }
            )
        return out

    def markets(
        self, tokens: Sequence[_Token], pools: Sequence[WireDict]
    ) -> dict[str, list[WireDict]]:
        rng = self.rng
        all_markets: list[WireDict] = [
            {
                "address": pool["poolId"],
                "token0": pool["baseToken"],
                "token1": pool["quoteToken"],
                "type": "clob",
                "tvl": pool["tvl"],
                "volume24h": pool["volume24h"],
                "fee": rng.choice((0.0005, 0.001)),
            }
            for pool in pools
        ]
        quotes = [t for t in tokens if t.wire["symbol"] in _QUOTES]
        for token in tokens:
            partners = [q for q in quotes if q is not token]
            others = [t for t in tokens if t is not token]
            partners += rng.sample(others, min(len(others), rng.randint(0, 2)))
            for partner in partners[: 1 + rng.randint(0, 2)]:
                stable_pair = {token.wire["symbol"], partner.wire["symbol"]} <= _STABLES
                kind = "stableswap" if stable_pair and rng.random() < 0.5 else "amm"
                all_markets.append(
                    {
                        "address": _hex(rng, 20),
                        "token0": token.wire,
                        "token1": partner.wire,
                        "type": kind,
                        "tvl": _money(rng, 3_000_000.0, 1.5),
                        "volume24h": _money(rng, 900_000.0, 1.5),
                        "fee": 0.0004
                        if kind == "stableswap"
                        else rng.choice((0.0001, 0.0005, 0.003, 0.01)),
                    }
                )
        markets: dict[str, list[WireDict]] = {t.wire["address"]: [] for t in tokens}
        for market in all_markets:
            markets[market["token0"]["address"]].append(market)
            markets[market["token1"]["address"]].append(market)
        for listed in markets.values():
            listed.sort(key=lambda m: (-m["tvl"], m["address"]))
        return markets

    # --- users and their orders -------------------------------------------------------

    def orders(
        self, address: str, pools: Sequence[WireDict], tokens: dict[str, _Token]
    ) -> list[WireDict]:
        rng = self.rng
        n = self.orders_per_user
        favourites = rng.sample(list(pools), min(len(pools), rng.randint(2, 6)))
        weights = [rng.random() + 0.2 for _ in favourites]
        # Every status on both sides first (when there is room), then the usual mix.
        kinds = [(s, side) for s in _STATUSES for side in _SIDES][:n]
        statuses = rng.choices(_STATUSES, _STATUS_WEIGHTS, k=n - len(kinds))
        kinds += [(s, rng.choice(_SIDES)) for s in statuses]
        rng.shuffle(kinds)
        timestamp = _EPOCH_MS - rng.randrange(86_400_000)
        out = []
        for status, side in kinds:
            pool = rng.choices(favourites, weights)[0]
            base = tokens[pool["baseToken"]["address"]]
            price = pool["price"] * (1.0 + rng.gauss(0.0, 0.02))
            price_digits = _fraction_digits(price, rng.randint(3, 8))
            notional = 40.0 * rng.lognormvariate(1.5, 1.3)  # USD
            size = notional / base.price
            # At least two significant digits, sometimes many more; never past the token's.
            size_digits = min(
                base.wire["decimals"], max(_fraction_digits(size, 2), rng.randint(0, 6))
            )
            size_units = max(2, round(size * 10**size_digits))
            if status == "FILLED":
                filled = size_units
            elif status == "PARTIALLY_FILLED" or (status != "OPEN" and rng.random() < 0.4):
                filled = rng.randint(1, size_units - 1)
            else:
                filled = 0
            out.append(
                {
                    "transactionId": _hex(rng, 32),
                    "poolId": pool["poolId"],
                    "user": address,
                    "side": side,
                    "price": f"{price:.{price_digits}f}",
                    "size": _units(size_units, size_digits),
                    "filledSize": _units(filled, size_digits),
                    "status": status,
                    "timestamp": timestamp,
                }
            )
            timestamp -= rng.randrange(1_000, 7_200_000)
        return out

    def profile(
        self,
        address: str,
        orders: Sequence[WireDict],
        tokens: Sequence[_Token],
        pools: Sequence[WireDict],
    ) -> WireDict:
        rng = self.rng
        balances = []
        for token in rng.sample(list(tokens), min(len(tokens), rng.randint(2, 6))):
            decimals = token.wire["decimals"]
            shown = rng.randint(0, decimals)
            amount = rng.randrange(10**shown, 10 ** (shown + 5))
            balances.append(
                {
                    "token": token.wire["address"],
                    "symbol": token.wire["symbol"],
                    "available": _units(amount, shown),
                    "locked": _units(rng.randrange(amount // 4 + 1), shown),
                }
            )
        positions = []
        for pool in rng.sample(list(pools), min(len(pools), rng.randint(0, 3))):
            size_digits = rng.randint(0, 6)
            positions.append(
                {
                    "poolId": pool["poolId"],
                    "side": rng.choice(("LONG", "SHORT")),
                    "size": _units(rng.randrange(1, 10 ** (size_digits + 4)), size_digits),
                    "entryPrice": f"{pool['price'] * (1 + rng.gauss(0, 0.05)):.6g}",
                    "unrealizedPnl": f"{rng.gauss(0, 250):.2f}",
                }
            )
        working = [o for o in orders if o["status"] in ("OPEN", "PARTIALLY_FILLED")]
        return {
            "address": address,
            "balances": balances,
            "orders": working,
            "positions": positions,
        }

    # --- the leaderboard --------------------------------------------------------------

    def leaderboard(self, users: Sequence[str]) -> list[WireDict]:
        rng = self.rng
        size = self.leaderboard_size
        addresses = list(users[:size])
        addresses += [_hex(rng, 20) for _ in range(size - len(addresses))]
        rng.shuffle(addresses)
        score = 1_000.0 * rng.lognormvariate(3.0, 0.3)
        out = []
        for rank, address in enumerate(addresses, start=1):
            out.append({"rank": rank, "address": address, "score": round(score, 2)})
            # about a fifth of the top score is left at the bottom of the board
            score = max(0.01, score - rng.expovariate((size / 1.5 + 10.0) / score))
        return out
