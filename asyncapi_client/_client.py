"""Client: the six operations and four streams, with every argument checked before a request."""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import os
import re
import ssl as ssl_module
import sys
import traceback
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, NoReturn, Self, TypeVar, cast

import aiohttp
from yarl import URL

from ._cache import CacheBackend, CacheStage
from ._calls import Calls
from ._checkpoint import Checkpoint, continue_from
from ._errors import RequestTimeoutError
from ._http import AiohttpSender
from ._limiters import Limiter, LocalLimiter, Rate, unlimited_until_told
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
from ._operations import (
    ENDPOINTS,
    LEADERBOARD,
    ORDERS,
    POOL,
    TOKEN_MARKETS,
    TOKENS,
    USER,
    Endpoint,
    ResponseOf,
)
from ._pipeline import Pipeline
from ._request import Request
from ._request import Response as Response  # with_response's hints name it here
from ._retry import RetryEvent, RetryPolicy
from ._types import USE_CLIENT_DEFAULT, NetworkName, OrderStatusName, SideName, UseClientDefault
from ._version import __version__
from ._walks import BoardPager, CursorPager, Walk, item_walk, page_walk
from ._watches import (
    FINAL_STATUSES,
    BoardSource,
    Fetch,
    LeaderboardChange,
    OrderChange,
    OrderSource,
    Poller,
    PoolChange,
    PoolSource,
    Source,
    Watch,
    WatchState,
    order_filter,
    wait_for_order,
)

if TYPE_CHECKING:
    from ._telemetry import Telemetry

__all__ = ["Client", "WithResponse"]

T = TypeVar("T")

#: Each operation's path, as telemetry's ``url.template`` names it (from the endpoints table).
TEMPLATES: Final = {e.name: e.template for e in ENDPOINTS}
#: Requests kept per one-identifier operation, by identifier (then forgotten all at once),
#: for identifiers at most KEPT_ID_LENGTH long.
KEPT_REQUESTS: Final = 512
KEPT_ID_LENGTH: Final = 256


# What the private helpers take (the public signatures spell the types out, so that
# help() and an IDE show public names only).
_DeadlineArg = float | None | UseClientDefault
_NetworkArg = Network | str | None


def _watch_arguments(interval: object, state: object) -> float:
    """A watch's ``interval`` (checked) after checking its ``state``."""
    if state is not None and not isinstance(state, WatchState):
        raise TypeError(
            f"state must be a FileWatchState or a fleet RedisWatchState (or None), got {state!r}"
        )
    seconds = _positive_number(interval, "interval", optional=False)
    assert seconds is not None
    return seconds


def _items(values: object) -> list[object]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        return [values]  # one status given alone
    return list(values)


def _made_at() -> str | None:
    """Where the caller's code made a Client (``file:line in function``), in dev mode or
    while tracemalloc traces; None otherwise (it costs a stack walk)."""
    if not (sys.flags.dev_mode or tracemalloc.is_tracing()):
        return None
    package = os.path.dirname(__file__)
    for frame in reversed(traceback.extract_stack(limit=16)):
        if not frame.filename.startswith(package):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return None


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
#: What a header value may not hold (RFC 9110 5.5): every C0 control but HTAB, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]").search


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
        control = _CONTROL(value)
        if control is not None:
            raise ValueError(
                f"the value of header {name!r} contains the control character "
                f"{control.group()!r}: only visible characters, spaces and tabs are sent"
            )
        try:
            value.encode("utf-8")  # what aiohttp sends; a lone surrogate has no such form
        except UnicodeEncodeError:
            raise ValueError(
                f"the value of header {name!r} is not valid text (it has no UTF-8 form)"
            ) from None


def _check_trace_configs(trace_configs: object) -> None:
    if trace_configs is None:
        return
    if isinstance(trace_configs, str | bytes) or not all(
        isinstance(item, aiohttp.TraceConfig)
        for item in trace_configs  # type: ignore[attr-defined]
    ):
        raise ValueError("trace_configs must be a sequence of aiohttp.TraceConfig")


def _check_bool(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{argument} must be True or False, got {value!r}")
    return value


def _limiter(rate_limit: object, limiter: object) -> Limiter:
    """The client's limiter: ``limiter``, or ``rate_limit`` as a LocalLimiter, or an idle one."""
    if limiter is not None:
        if rate_limit is not None:
            raise ValueError("pass rate_limit= or limiter=, not both (rate_limit is a shorthand)")
        # The methods a client calls (a limiter written before clear_hold() still works); a
        # class has them too, unbound, so it is refused as a class.
        if isinstance(limiter, type) or not all(
            callable(getattr(limiter, name, None)) for name in ("acquire", "held", "hold")
        ):
            what = "the class " if isinstance(limiter, type) else ""
            raise TypeError(
                f"limiter must be a Limiter instance (acquire, held, hold) such as "
                f"LocalLimiter(), got {what}{limiter!r}"
            )
        return limiter  # type: ignore[return-value]  # clear_hold() is the caller's affair
    rate = _positive_number(rate_limit, "rate_limit", optional=True)
    if rate is None:
        return unlimited_until_told()  # no rates: the 429 hold, and limits it is told
    if rate.is_integer():
        return LocalLimiter([Rate(int(rate), 1.0)])
    return LocalLimiter([Rate(1, 1.0 / rate)])  # a fraction: one request every 1/rate s


def _telemetry(telemetry: object) -> Telemetry | None:
    """OpenTelemetry's tracer and meter, imported only when asked for."""
    if not isinstance(telemetry, bool):
        raise ValueError(f"telemetry must be True or False, got {telemetry!r}")
    if not telemetry:
        return None
    try:
        from ._telemetry import Telemetry
    except ImportError:
        raise ValueError(
            "telemetry=True needs OpenTelemetry, which is not installed: "
            "pip install 'asyncapi-client[otel]'"
        ) from None
    return Telemetry(__version__)


def _check_session_options(session: object, proxy: object, tls: object, trust_env: object) -> None:
    if proxy is not None and (
        not isinstance(proxy, str) or not proxy.lower().startswith(("http://", "https://"))
    ):
        raise ValueError(f"proxy must be an http:// or https:// URL or None, got {proxy!r}")
    if proxy is not None:
        try:
            URL(proxy)
        except ValueError as exc:
            raise ValueError(f"proxy {proxy!r} is not a valid URL: {exc}") from None
    if tls is not None and not isinstance(tls, ssl_module.SSLContext | bool):
        raise ValueError(f"ssl must be an ssl.SSLContext, True, False or None, got {tls!r}")
    if not isinstance(trust_env, bool):
        raise ValueError(f"trust_env must be True or False, got {trust_env!r}")
    if session is not None and (proxy is not None or tls is not None or trust_env):
        raise ValueError(
            "proxy=, ssl= and trust_env= configure the client's own session: "
            "with session=, configure your session instead"
        )


def _check_on_retry(on_retry: object) -> None:
    if on_retry is None:
        return
    if not callable(on_retry) or inspect.iscoroutinefunction(on_retry):
        raise ValueError(
            f"on_retry must be a plain function taking a RetryEvent (not async), got {on_retry!r}"
        )


def _optional_positive_int(value: object, argument: str) -> int | None:
    return None if value is None else _positive_int(value, argument)


def _positive_number(value: object, argument: str, *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{argument} must be a positive number of seconds, got {value!r}")
    return float(value)


class Client:
    """An async client of the read API, safe to share between the tasks of one event loop.

    Use it as ``async with Client(...) as client:`` or call :meth:`close` when done. The
    aiohttp session is created on first use inside the running loop; a ``session`` passed
    in is used as is and never closed by the client. ``client.with_response`` offers the
    same operations returning a :class:`Response` (status, headers, body, attempts...).
    """

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
        """Set up a client; nothing connects until the first call.

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
            session: an ``aiohttp.ClientSession`` you own; never closed by the client.
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
        #: True for ``with_response``'s view, which shares this client's session.
        self._view = False
        #: Where this client was made, kept in dev mode or while tracemalloc traces (for the
        #: warning of a client never closed).
        self._made_at = _made_at()
        self._network = parse_network(network)
        hosts = Hosts.resolve(base_url, testnet_base_url)
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = _positive_number(timeout, "timeout", optional=False)  # type: ignore[assignment]
        elif timeout.total:  # None or 0: no total, as aiohttp reads it
            _positive_number(timeout.total, "timeout's total", optional=False)
        _non_negative_int(max_retries, "max_retries")
        _check_headers(headers)
        _check_instance(session, aiohttp.ClientSession, "session")
        _check_trace_configs(trace_configs)
        _check_on_retry(on_retry)
        _check_session_options(session, proxy, ssl, trust_env)
        if cache is not None and not isinstance(cache, CacheBackend):
            raise ValueError(
                f"cache must be a MemoryCache or a fleet RedisCache (or None), got {cache!r}"
            )
        cap = _positive_number(retry_after_cap, "retry_after_cap", optional=False)
        assert cap is not None
        self._wire(
            hosts=hosts,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, retry_after_cap=cap),
            max_connections=_positive_int(max_connections, "max_connections"),
            limiter=_limiter(rate_limit, limiter),
            on_retry=on_retry,
            telemetry=_telemetry(telemetry),
            proxy=proxy,
            ssl=True if ssl is None else ssl,
            trust_env=trust_env,
            deadline=_positive_number(deadline, "deadline", optional=True),
            max_response_bytes=_positive_int(max_response_bytes, "max_response_bytes"),
            coalesce=_check_bool(coalesce, "coalesce"),
            headers=headers,
            session=session,
            trace_configs=trace_configs,
            cache=cache,
        )
        #: Per one-identifier operation: the Requests of its latest identifiers, made with
        #: the client's network and deadline (a bot polls the same pools and users: each
        #: call of one skips checking, encoding and building it again).
        self._kept: dict[str, dict[str, Request[Any]]] = {
            e.name: {} for e in (TOKEN_MARKETS, POOL, USER)
        }
        self.with_response: Final = WithResponse(self)
        """The six operations again, each returning a :class:`Response` with the value."""

    def _wire(
        self,
        *,
        hosts: Hosts,
        timeout: float | aiohttp.ClientTimeout,
        retry: RetryPolicy,
        max_connections: int,
        limiter: Limiter,
        on_retry: Callable[[RetryEvent], object] | None,
        telemetry: Telemetry | None,
        proxy: str | None,
        ssl: ssl_module.SSLContext | bool,
        trust_env: bool,
        deadline: float | None,
        max_response_bytes: int,
        coalesce: bool,
        headers: Mapping[str, str] | None,
        session: aiohttp.ClientSession | None,
        trace_configs: Sequence[aiohttp.TraceConfig] | None,
        cache: CacheBackend | None,
    ) -> None:
        """The one place the request path is put together, from the checked arguments: the
        HTTP adapter, the pipeline around it, the cache stage around that, and the calls
        that choose between them (asyncapi_client/_calls.py)."""
        self._hosts = hosts
        #: Per network: the API root its requests go to (``https://host/api``), made once.
        self._bases: dict[Network, str] = {}
        self._sender = AiohttpSender(
            timeout=timeout,
            max_connections=max_connections,
            max_response_bytes=max_response_bytes,
            headers=headers,
            session=session,
            trace_configs=trace_configs,
            proxy=proxy,
            ssl=ssl,
            trust_env=trust_env,
        )
        self._pipeline = Pipeline(
            sender=self._sender,
            limiter=limiter,
            retry=retry,
            deadline=deadline,
            max_connections=max_connections,
            coalesce=coalesce,
            on_retry=on_retry,
            telemetry=telemetry,
        )
        stage = (
            None
            if cache is None
            else CacheStage(cache, self._pipeline, sent=self._sender.sent_header)
        )
        #: Every Request of this client goes here (the response view's: ``responses()``).
        self._calls = Calls(self._pipeline, stage, telemetry)

    # --- lifecycle --------------------------------------------------------------------

    @property
    def network(self) -> Network:
        """The network every operation goes to unless it says otherwise."""
        return self._network

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._pipeline.closed

    @property
    def limiter(self) -> Limiter:
        """The limiter every attempt asks: the one given as ``limiter=``, or the client's own
        ``LocalLimiter`` (``rate_limit=``'s rate, or none, keeping only the 429 hold).
        ``await client.limiter.clear_hold()`` ends a 429 hold."""
        return self._pipeline.limiter

    async def close(self) -> None:
        """Close what the client owns (not a caller's session). Calling it twice is fine."""
        await self._pipeline.close()

    async def __aenter__(self) -> Self:
        return self

    def __repr__(self) -> str:
        hosts = getattr(self, "_hosts", None)
        where = "" if hosts is None else f", base_url={hosts.mainnet!r}"
        return f"Client(network={self._network.value!r}{where})"

    def __enter__(self) -> NoReturn:
        raise TypeError(
            "Client is async: use 'async with Client(...) as client:' inside a coroutine, "
            "or SyncClient(...) with a plain 'with' in blocking code"
        )

    def __exit__(self, *exc_info: object) -> None:  # pragma: no cover - __enter__ raises
        return None

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # A client dropped with its own session open: say so, and where it was made when
        # tracemalloc traces (PYTHONTRACEMALLOC=1, python -X tracemalloc): ``source=self``.
        sender = getattr(self, "_sender", None)
        if sender is not None and sender.unclosed() and not getattr(self, "_view", False):
            made = getattr(self, "_made_at", None)
            _warn(
                f"unclosed {self!r}: close it with 'await client.close()', or use "
                f"'async with Client(...) as client:'"
                + (
                    f"; it was made at {made}"
                    if made
                    else " (python -X dev shows where it was made)"
                ),
                ResourceWarning,
                source=self,
            )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

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
        if max_retries is not None:
            _non_negative_int(max_retries, "max_retries")
        pipeline = self._pipeline
        if not testing:
            pipeline.use_testing(None)
            return
        policy = pipeline.retry
        pipeline.use_testing(
            RetryPolicy(
                max_retries=policy.max_retries if max_retries is None else max_retries,
                base=policy.base,
                cap=policy.cap,
                retry_after_cap=policy.retry_after_cap,
                wait=False,
            )
        )

    # --- helpers ----------------------------------------------------------------------

    def _network_for(self, network: _NetworkArg, default: Network | None = None) -> Network:
        if network is None:
            return default or self._network
        return parse_network(network)

    def _deadline(self, deadline: _DeadlineArg) -> float | None:
        if deadline is USE_CLIENT_DEFAULT:
            return self._pipeline.deadline
        return _positive_number(deadline, "deadline", optional=True)

    # --- operations -------------------------------------------------------------------

    async def tokens(
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
        _check_instance(search, str, "search")
        query = TOKENS.query_of((search,))
        return await self._calls.run(self._request(TOKENS, network, deadline, None, query))

    async def token_markets(
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
        return await self._calls.run(self._by_id(TOKEN_MARKETS, token, "token", network, deadline))

    async def pool(
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
        return await self._calls.run(self._by_id(POOL, pool_id, "pool_id", network, deadline))

    async def user(
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
        return await self._calls.run(self._by_id(USER, address, "address", network, deadline))

    async def orders(
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
        segment, filters = self._orders_filters(address, market, status, side, limit)
        _check_instance(cursor, str, "cursor")
        query = ORDERS.query_of((*filters, cursor))
        return await self._calls.run(self._request(ORDERS, network, deadline, segment, query))

    async def leaderboard(
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
        _optional_positive_int(page, "page")
        _optional_positive_int(limit, "limit")
        query = LEADERBOARD.query_of((page, limit))
        return await self._calls.run(self._request(LEADERBOARD, network, deadline, None, query))

    # --- one Request per call, built here and nowhere else ---------------------------------

    def _request(
        self,
        endpoint: Endpoint[T],
        network: _NetworkArg,
        deadline: _DeadlineArg,
        segment: str | None = None,
        query: str = "",
    ) -> Request[T]:
        """The Request of one call of ``endpoint``, its network and deadline resolved."""
        net = (endpoint.network or self._network) if network is None else parse_network(network)
        if deadline is USE_CLIENT_DEFAULT:
            dl = self._pipeline.deadline
        else:
            dl = _positive_number(deadline, "deadline", optional=True)
        return endpoint.request(self._base(net), net, segment, query, dl)

    def _base(self, network: Network) -> str:
        """The API root of ``network``'s host (``https://host/api``); the sender learns it
        the first time, to build its URL objects on it."""
        base = self._bases.get(network)
        if base is None:
            base = str(URL(self._hosts.base(network))).rstrip("/") + "/api"
            self._sender.learn(network, base)
            self._bases[network] = base
        return base

    def _by_id(
        self,
        endpoint: Endpoint[T],
        value: object,
        argument: str,
        network: _NetworkArg,
        deadline: _DeadlineArg,
    ) -> Request[T]:
        """The Request of a one-identifier call (``argument`` names ``value`` in errors),
        kept for the next call of the same identifier with the client's defaults."""
        if (
            network is None
            and deadline is USE_CLIENT_DEFAULT
            and type(value) is str
            and len(value) <= KEPT_ID_LENGTH
        ):
            kept = self._kept[endpoint.name]
            request = kept.get(value)
            if request is None:
                request = self._request(endpoint, None, deadline, endpoint.segment(value, argument))
                if len(kept) >= KEPT_REQUESTS:
                    kept.clear()
                kept[value] = request
            return request
        return self._request(endpoint, network, deadline, endpoint.segment(value, argument))

    # --- streams ----------------------------------------------------------------------

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
    ) -> Walk[OrdersPage]:
        """Each page of a user's orders, following ``cursor``, one page fetched ahead.

        Arguments (and ``resume``) are checked here, before any request. Close it early
        with ``aclose()`` or ``contextlib.aclosing``: the fetch ahead is cancelled. Its
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
        pager, start = self._order_pager(
            address, market, status, side, page_size, None, resume, network, deadline
        )
        return page_walk(pager, start)

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
    ) -> Walk[Order]:
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
        _optional_positive_int(max_items, "max_items")
        pager, start = self._order_pager(
            address, market, status, side, page_size, max_items, resume, network, deadline
        )
        return item_walk(pager, start, max_items)

    def iter_leaderboard_pages(
        self,
        *,
        page_size: int | None = None,
        concurrency: int = 4,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> Walk[LeaderboardPage]:
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
        pager, start = self._board_pager(page_size, concurrency, None, resume, network, deadline)
        return page_walk(pager, start)

    def iter_leaderboard(
        self,
        *,
        page_size: int | None = None,
        max_items: int | None = None,
        concurrency: int = 4,
        resume: Checkpoint | str | None = None,
        network: Network | NetworkName | None = None,
        deadline: float | UseClientDefault | None = USE_CLIENT_DEFAULT,
    ) -> Walk[LeaderboardEntry]:
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
        _optional_positive_int(max_items, "max_items")
        pager, start = self._board_pager(
            page_size, concurrency, max_items, resume, network, deadline
        )
        return item_walk(pager, start, max_items)

    # --- watches --------------------------------------------------------------------

    def watch_orders(
        self,
        address: str,
        *,
        market: str | None = None,
        side: Side | SideName | None = None,
        interval: float = 1.0,
        state: WatchState | None = None,
        initial: bool = False,
    ) -> Watch[OrderChange]:
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
        segment, filters = self._orders_filters(address, market, None, side, None)
        check = _watch_arguments(interval, state)
        if not isinstance(initial, bool):
            raise TypeError(f"initial must be True or False, got {initial!r}")
        net, dl = self._network, self._pipeline.deadline
        base, side_value = self._base(net), cast("str | None", filters[2])
        identity = {
            "watch": "orders",
            "network": net.value,
            "address": address,
            "market": market,
            "side": side_value,
        }

        def profile() -> Request[UserProfile]:
            return USER.request(base, net, segment, "", dl)

        def page(cursor: str | None) -> Request[OrdersPage]:
            query = ORDERS.query_of((market, None, side_value, None, cursor))
            return ORDERS.request(base, net, segment, query, dl)

        source = OrderSource(
            Fetch(self._calls.conditional),
            identity,
            profile,
            page,
            order_filter(market, side_value),
        )
        return self._watch(source, check, state, initial)

    def watch_pool(
        self, pool_id: str, *, interval: float = 1.0, state: WatchState | None = None
    ) -> Watch[PoolChange]:
        """Every change of a pool from now on, one :class:`PoolChange` per poll that saw one.

        Args:
            pool_id: the pool's id.
            interval: seconds between polls (longer when the server asks).
            state: where the last seen pool and undelivered changes are kept.
        """
        segment = POOL.segment(pool_id, "pool_id")
        check = _watch_arguments(interval, state)
        net, dl = self._network, self._pipeline.deadline
        base = self._base(net)
        identity = {"watch": "pool", "network": net.value, "pool_id": pool_id}

        def request() -> Request[Pool]:
            return POOL.request(base, net, segment, "", dl)

        source = PoolSource(Fetch(self._calls.conditional), identity, request)
        return self._watch(source, check, state, False)

    def watch_leaderboard(
        self, *, top: int = 100, interval: float = 5.0, state: WatchState | None = None
    ) -> Watch[LeaderboardChange]:
        """Every change of the leaderboard's first ``top`` ranks from now on, one
        :class:`LeaderboardChange` per poll that saw one.

        Args:
            top: how many ranks to watch.
            interval: seconds between polls (longer when the server asks).
            state: where the last seen entries and undelivered changes are kept.
        """
        _positive_int(top, "top")
        check = _watch_arguments(interval, state)
        net, dl = self._network, self._pipeline.deadline
        base = self._base(net)
        identity = {"watch": "leaderboard", "network": net.value, "top": top}

        def page(number: int, size: int) -> Request[LeaderboardPage]:
            return LEADERBOARD.request(base, net, None, LEADERBOARD.query_of((number, size)), dl)

        source = BoardSource(Fetch(self._calls.conditional), identity, top, page)
        return self._watch(source, check, state, False)

    def _watch(
        self, source: Source[T], interval: float, state: WatchState | None, initial: bool
    ) -> Watch[T]:
        """A watch of ``source``, run by ``state``'s engine (alone: a :class:`Poller`)."""
        telemetry = self._calls.telemetry
        engine = (
            Poller(source, interval=interval, state=None, initial=initial, telemetry=telemetry)
            if state is None
            else state.engine(source, interval=interval, initial=initial, telemetry=telemetry)
        )
        return Watch(source, engine)

    async def wait_for_order(
        self,
        address: str,
        transaction_id: str,
        *,
        statuses: Iterable[OrderStatus | OrderStatusName] | None = None,
        interval: float = 1.0,
        timeout: float | None = None,  # noqa: ASYNC109 - the contract's name
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
        segment = ORDERS.segment(address, "address")
        given: object = transaction_id
        if not isinstance(given, str) or not given:
            raise ValueError(f"transaction_id must be a non-empty string, got {transaction_id!r}")
        wanted = (
            FINAL_STATUSES
            if statuses is None
            else frozenset(OrderStatus.parse_argument(s, "statuses") for s in _items(statuses))
        )
        if not wanted:
            raise ValueError("statuses must name at least one order status")
        check = _watch_arguments(interval, None)
        bound = _positive_number(timeout, "timeout", optional=True)
        net, dl = self._network, self._pipeline.deadline
        base = self._base(net)

        def profile() -> Request[UserProfile]:
            return USER.request(base, net, segment, "", dl)

        def page(cursor: str | None) -> Request[OrdersPage]:
            return ORDERS.request(
                base, net, segment, ORDERS.query_of((None, None, None, None, cursor)), dl
            )

        waiting = wait_for_order(
            Fetch(self._calls.conditional), profile, page, transaction_id, wanted, check
        )
        if bound is None:
            return await waiting
        try:
            async with asyncio.timeout(bound):
                return await waiting
        except TimeoutError:
            raise RequestTimeoutError(
                f"order {transaction_id} did not reach {', '.join(sorted(s.value for s in wanted))}"
                f" within {bound:g}s",
                url=profile().url,
                network=net.value,
            ) from None

    # --- shared by operations and streams ---------------------------------------------

    def _orders_filters(
        self,
        address: str,
        market: str | None,
        status: OrderStatus | str | None,
        side: Side | str | None,
        limit: int | None,
        limit_name: str = "limit",
    ) -> tuple[str, tuple[str | int | None, ...]]:
        """The address's path segment and the values of ``market, status, side, limit``."""
        segment = ORDERS.segment(address, "address")
        _check_instance(market, str, "market")
        filters = (
            market,
            None if status is None else OrderStatus.parse_argument(status, "status").value,
            None if side is None else Side.parse_argument(side, "side").value,
            _optional_positive_int(limit, limit_name),
        )
        return segment, filters

    def _order_pager(
        self,
        address: str,
        market: str | None,
        status: OrderStatus | str | None,
        side: Side | str | None,
        page_size: int | None,
        max_items: int | None,
        resume: object,
        network: _NetworkArg,
        deadline: _DeadlineArg,
    ) -> tuple[CursorPager, Checkpoint]:
        segment, filters = self._orders_filters(
            address, market, status, side, page_size, "page_size"
        )
        net, dl = self._network_for(network), self._deadline(deadline)
        start = Checkpoint(
            operation="orders",
            network=net,
            page_size=page_size,
            address=address,
            market=market,
            status=cast("str | None", filters[1]),
            side=cast("str | None", filters[2]),
        )
        start = continue_from(resume, start)
        calls, base = self._calls, self._base(net)

        def fetch(cursor: str | None) -> Awaitable[OrdersPage]:
            query = ORDERS.query_of((*filters, cursor))
            return calls.value(ORDERS.request(base, net, segment, query, dl))

        return CursorPager(fetch, start, max_items), start

    def _board_pager(
        self,
        page_size: int | None,
        concurrency: int,
        max_items: int | None,
        resume: object,
        network: _NetworkArg,
        deadline: _DeadlineArg,
    ) -> tuple[BoardPager, Checkpoint]:
        _optional_positive_int(page_size, "page_size")
        _positive_int(concurrency, "concurrency")
        net, dl = self._network_for(network), self._deadline(deadline)
        start = Checkpoint(operation="leaderboard", network=net, page_size=page_size, page=1)
        start = continue_from(resume, start)

        calls, base = self._calls, self._base(net)

        def fetch(page: int) -> Awaitable[LeaderboardPage]:
            query = LEADERBOARD.query_of((page, page_size))
            return calls.value(LEADERBOARD.request(base, net, None, query, dl))

        pager = BoardPager(fetch, start, concurrency=concurrency, max_items=max_items)
        return pager, start


class WithResponse:
    """``client.with_response``: the six operations, each returning a :class:`Response`.

    Not a copy of them: each one is the plain operation (same arguments and checks) run
    on a view of the client whose requests bring back the whole response;
    ``Response.value`` is what the plain operation returns.
    """

    __slots__ = ("_view",)

    def __init__(self, client: Client) -> None:
        view = copy.copy(client)  # shares the pipeline, the network and the limiter
        view._calls = client._calls.responses()
        view._view = True  # the client itself says when it is left unclosed
        self._view = view

    tokens = ResponseOf(Client.tokens)
    token_markets = ResponseOf(Client.token_markets)
    pool = ResponseOf(Client.pool)
    user = ResponseOf(Client.user)
    orders = ResponseOf(Client.orders)
    leaderboard = ResponseOf(Client.leaderboard)
