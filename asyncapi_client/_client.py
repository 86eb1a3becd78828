"""Client: the six operations and four streams, with every argument checked before a request."""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from types import TracebackType
from typing import Final, Self
from urllib.parse import quote, unquote

import aiohttp

from . import _decode
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
from ._network import Hosts, Network, parse_network
from ._streams import items, walk_leaderboard_pages, walk_order_pages
from ._transport import RetryPolicy, Transport, encode_segment

__all__ = ["Client"]


class _Unset(enum.Enum):
    UNSET = "unset"


#: Tells "not given" from None (None is a real value for ``deadline``: no deadline).
UNSET: Final = _Unset.UNSET
_DeadlineArg = float | None | _Unset
_NetworkArg = Network | str | None


def _dot_segment(value: str) -> bool:
    """Whether ``value`` becomes ``.`` or ``..`` once a server or proxy percent-decodes it,
    however many times (such a segment is resolved away: another resource answers)."""
    for _ in range(8):
        if value in (".", ".."):
            return True
        decoded = unquote(value)
        if decoded == value:
            return False
        value = decoded
    return True  # still changing after eight rounds of decoding: nobody means that


def _identifier(value: object, argument: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{argument} must be a non-empty string, got {value!r}")
    if _dot_segment(value):
        raise ValueError(
            f"{argument} {value!r} is a dot segment (. or ..) once decoded: servers and "
            f"proxies resolve it to another path, so it is never sent"
        )
    try:
        return encode_segment(value)
    except UnicodeEncodeError:
        raise ValueError(f"{argument} {value!r} is not valid text (it has no UTF-8 form)") from None


def _positive_int(value: object, argument: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{argument} must be a positive int, got {value!r}")
    return value


def _non_negative_int(value: object, argument: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{argument} must be an int >= 0, got {value!r}")
    return value


def _check_instance(value: object, cls: type, argument: str) -> None:
    if value is not None and not isinstance(value, cls):
        raise ValueError(f"{argument} must be a {cls.__name__} or None, got {value!r}")


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+").fullmatch


def _check_headers(headers: object) -> None:
    if headers is None:
        return
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValueError("headers must map header names (str) to values (str)")
    for name, value in headers.items():
        if not _HEADER_NAME(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP token")
        if any(char in value for char in "\r\n\x00"):
            raise ValueError(f"the value of header {name!r} contains CR, LF or NUL")


def _check_trace_configs(trace_configs: object) -> None:
    if trace_configs is None:
        return
    if isinstance(trace_configs, str | bytes) or not all(
        isinstance(item, aiohttp.TraceConfig)
        for item in trace_configs  # type: ignore[attr-defined]
    ):
        raise ValueError("trace_configs must be a sequence of aiohttp.TraceConfig")


def _optional_positive_int(value: object, argument: str) -> int | None:
    return None if value is None else _positive_int(value, argument)


def _positive_number(value: object, argument: str, *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < float("inf")
    ):
        raise ValueError(f"{argument} must be a positive number of seconds, got {value!r}")
    return float(value)


def _query(params: Mapping[str, object]) -> str:
    """``k=v&...`` with every value percent-encoded; None values are not sent."""
    try:
        return "&".join(
            f"{key}={quote(str(value), safe='')}"
            for key, value in params.items()
            if value is not None
        )
    except UnicodeEncodeError:
        raise ValueError(
            f"a query value is not valid text (it has no UTF-8 form): {params}"
        ) from None


class Client:
    """An async client of the read API, safe to share between the tasks of one event loop.

    Use it as ``async with Client(...) as client:`` or call :meth:`close` when done. The
    aiohttp session is created on first use inside the running loop; a ``session`` passed
    in is used as is and never closed by the client.
    """

    def __init__(
        self,
        network: Network | str = Network.MAINNET,
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
    ) -> None:
        self._network = parse_network(network)
        hosts = Hosts.resolve(base_url, testnet_base_url)
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = _positive_number(timeout, "timeout", optional=False)  # type: ignore[assignment]
        _non_negative_int(max_retries, "max_retries")
        _check_headers(headers)
        _check_instance(session, aiohttp.ClientSession, "session")
        _check_trace_configs(trace_configs)
        self._transport = Transport(
            hosts=hosts,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries),
            max_connections=_positive_int(max_connections, "max_connections"),
            rate_limit=_positive_number(rate_limit, "rate_limit", optional=True),
            deadline=_positive_number(deadline, "deadline", optional=True),
            max_response_bytes=_positive_int(max_response_bytes, "max_response_bytes"),
            coalesce=bool(coalesce),
            headers=headers,
            session=session,
            trace_configs=trace_configs,
        )

    # --- lifecycle --------------------------------------------------------------------

    @property
    def network(self) -> Network:
        """The network every operation goes to unless it says otherwise."""
        return self._network

    @property
    def closed(self) -> bool:
        return self._transport.closed

    async def close(self) -> None:
        """Close what the client owns (not a caller's session). Calling it twice is fine."""
        await self._transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def set_testing(self, testing: bool = True, *, max_retries: int | None = None) -> None:
        """Testing mode for this client only: no back-off or Retry-After waits.

        Attempts still happen (``max_retries`` can lower them), so a bot's tests exercise
        its error handling without sleeping. ``set_testing(False)`` restores the waits.
        """
        policy = self._transport.retry
        policy.wait = not testing
        if max_retries is not None:
            policy.max_retries = _non_negative_int(max_retries, "max_retries")

    # --- helpers ----------------------------------------------------------------------

    def _network_for(self, network: _NetworkArg, default: Network | None = None) -> Network:
        if network is None:
            return default or self._network
        return parse_network(network)

    def _deadline(self, deadline: _DeadlineArg) -> float | None:
        if deadline is UNSET:
            return self._transport.deadline
        return _positive_number(deadline, "deadline", optional=True)

    # --- operations -------------------------------------------------------------------

    async def tokens(
        self,
        *,
        search: str | None = None,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> Sequence[Token]:
        """The token directory, filtered by ``search`` when given (``GET /api/tokens``)."""
        _check_instance(search, str, "search")
        net, dl = self._network_for(network), self._deadline(deadline)
        query = _query({"search": search})
        url = self._transport.url(net, "/tokens", query)
        return await self._transport.get("tokens", net, url, _decode.TOKENS, dl)

    async def token_markets(
        self, token: str, *, network: _NetworkArg = None, deadline: _DeadlineArg = UNSET
    ) -> Sequence[Market]:
        """A token's markets across venues; on the test-network host unless ``network`` says."""
        segment = _identifier(token, "token")
        net, dl = self._network_for(network, Network.TESTNET), self._deadline(deadline)
        url = self._transport.url(net, f"/aggregated/tokens/{segment}/markets", "")
        return await self._transport.get("token_markets", net, url, _decode.MARKETS, dl)

    async def pool(
        self, pool_id: str, *, network: _NetworkArg = None, deadline: _DeadlineArg = UNSET
    ) -> Pool:
        """One order-book pool (``GET /api/clob/pools/{poolId}``)."""
        segment = _identifier(pool_id, "pool_id")
        net, dl = self._network_for(network), self._deadline(deadline)
        url = self._transport.url(net, f"/clob/pools/{segment}", "")
        return await self._transport.get("pool", net, url, _decode.POOL, dl)

    async def user(
        self, address: str, *, network: _NetworkArg = None, deadline: _DeadlineArg = UNSET
    ) -> UserProfile:
        """A user's profile: balances, orders, positions (``GET /api/clob/users/{address}``)."""
        segment = _identifier(address, "address")
        net, dl = self._network_for(network), self._deadline(deadline)
        url = self._transport.url(net, f"/clob/users/{segment}", "")
        return await self._transport.get("user", net, url, _decode.USER, dl)

    async def orders(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | str | None = None,
        side: Side | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> OrdersPage:
        """One page of a user's orders (``GET /api/clob/users/{address}/orders``)."""
        path, filters = self._orders_request(address, market, status, side, limit)
        _check_instance(cursor, str, "cursor")
        net, dl = self._network_for(network), self._deadline(deadline)
        return await self._orders_page(net, path, filters, cursor, dl)

    async def leaderboard(
        self,
        *,
        page: int | None = None,
        limit: int | None = None,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> LeaderboardPage:
        """One page of the referral leaderboard (``GET /api/dash/leaderboard``)."""
        _optional_positive_int(page, "page")
        _optional_positive_int(limit, "limit")
        net, dl = self._network_for(network), self._deadline(deadline)
        return await self._leaderboard_page(net, page, limit, dl)

    # --- streams ----------------------------------------------------------------------

    def iter_order_pages(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | str | None = None,
        side: Side | str | None = None,
        page_size: int | None = None,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> AsyncGenerator[OrdersPage, None]:
        """Each page of a user's orders, following ``cursor``, one page fetched ahead.

        Arguments are checked here, before any request. Close it early with ``break``,
        ``contextlib.aclosing`` or ``aclose()``: the fetch ahead is cancelled.
        """
        return self._order_pages(address, market, status, side, page_size, None, network, deadline)

    def iter_orders(
        self,
        address: str,
        *,
        market: str | None = None,
        status: OrderStatus | str | None = None,
        side: Side | str | None = None,
        page_size: int | None = None,
        max_items: int | None = None,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> AsyncGenerator[Order, None]:
        """Every order of a user, page after page; stops after ``max_items`` when given."""
        _optional_positive_int(max_items, "max_items")
        pages = self._order_pages(
            address, market, status, side, page_size, max_items, network, deadline
        )
        return items(pages, _orders_of, max_items)

    def iter_leaderboard_pages(
        self,
        *,
        page_size: int | None = None,
        concurrency: int = 4,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> AsyncGenerator[LeaderboardPage, None]:
        """Each leaderboard page in order; pages after the first are fetched concurrently.

        See :func:`asyncapi_client._streams.walk_leaderboard_pages` for what a live board
        that shifts during the walk means for the entries you get.
        """
        return self._leaderboard_pages(page_size, concurrency, None, network, deadline)

    def iter_leaderboard(
        self,
        *,
        page_size: int | None = None,
        max_items: int | None = None,
        concurrency: int = 4,
        network: _NetworkArg = None,
        deadline: _DeadlineArg = UNSET,
    ) -> AsyncGenerator[LeaderboardEntry, None]:
        """Every leaderboard entry in rank order, each rank once; at most ``max_items``."""
        _optional_positive_int(max_items, "max_items")
        pages = self._leaderboard_pages(page_size, concurrency, max_items, network, deadline)
        return items(pages, _entries_of, max_items)

    # --- shared by operations and streams ---------------------------------------------

    def _orders_request(
        self,
        address: str,
        market: str | None,
        status: OrderStatus | str | None,
        side: Side | str | None,
        limit: int | None,
        limit_name: str = "limit",
    ) -> tuple[str, dict[str, object]]:
        path = f"/clob/users/{_identifier(address, 'address')}/orders"
        _check_instance(market, str, "market")
        filters: dict[str, object] = {
            "market": market,
            "status": None
            if status is None
            else OrderStatus.parse_argument(status, "status").value,
            "side": None if side is None else Side.parse_argument(side, "side").value,
            "limit": _optional_positive_int(limit, limit_name),
        }
        return path, filters

    async def _orders_page(
        self,
        network: Network,
        path: str,
        filters: Mapping[str, object],
        cursor: str | None,
        deadline: float | None,
    ) -> OrdersPage:
        url = self._transport.url(network, path, _query({**filters, "cursor": cursor}))
        return await self._transport.get("orders", network, url, _decode.ORDERS_PAGE, deadline)

    async def _leaderboard_page(
        self, network: Network, page: int | None, limit: int | None, deadline: float | None
    ) -> LeaderboardPage:
        url = self._transport.url(
            network, "/dash/leaderboard", _query({"page": page, "limit": limit})
        )
        return await self._transport.get(
            "leaderboard", network, url, _decode.LEADERBOARD_PAGE, deadline
        )

    def _order_pages(
        self,
        address: str,
        market: str | None,
        status: OrderStatus | str | None,
        side: Side | str | None,
        page_size: int | None,
        max_items: int | None,
        network: _NetworkArg,
        deadline: _DeadlineArg,
    ) -> AsyncGenerator[OrdersPage, None]:
        path, filters = self._orders_request(address, market, status, side, page_size, "page_size")
        net, dl = self._network_for(network), self._deadline(deadline)

        def fetch(cursor: str | None) -> Awaitable[OrdersPage]:
            return self._orders_page(net, path, filters, cursor, dl)

        return walk_order_pages(fetch, max_items=max_items)

    def _leaderboard_pages(
        self,
        page_size: int | None,
        concurrency: int,
        max_items: int | None,
        network: _NetworkArg,
        deadline: _DeadlineArg,
    ) -> AsyncGenerator[LeaderboardPage, None]:
        _optional_positive_int(page_size, "page_size")
        _positive_int(concurrency, "concurrency")
        net, dl = self._network_for(network), self._deadline(deadline)

        def fetch(page: int) -> Awaitable[LeaderboardPage]:
            return self._leaderboard_page(net, page, page_size, dl)

        return walk_leaderboard_pages(fetch, concurrency=concurrency, max_items=max_items)


def _orders_of(page: OrdersPage) -> Sequence[Order]:
    return page.orders


def _entries_of(page: LeaderboardPage) -> Sequence[LeaderboardEntry]:
    return page.leaderboard
