"""The six operations as data, the one place a request is built, and ``with_response``.

:data:`ENDPOINTS` is the one table of the read API's operations: each one's name (the
Client method, the limiter's and the fake's operation name, telemetry's span name), its
path template (telemetry's ``url.template``), the decoder of its body, its default network
and its query parameters. Nothing else spells them. An :class:`Endpoint` also checks and
encodes the identifier that goes in its path (:meth:`Endpoint.segment`), encodes its query
(:meth:`Endpoint.query_of`) and builds the :class:`~._request.Request` of one call
(:meth:`Endpoint.request`): the client calls these and builds no URL itself.

``client.with_response.<operation>`` is not a copy of the operations: :class:`ResponseOf`
wraps each method once (the ``ParamSpec`` keeps its parameters for the type checker, and
``inspect.signature`` sees them too) and runs it on a view of the client whose requests
bring back the whole :class:`~asyncapi_client.Response`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Coroutine, Sequence
from typing import (
    Any,
    Concatenate,
    Final,
    Generic,
    Literal,
    ParamSpec,
    Self,
    TypeVar,
    get_args,
    overload,
)
from urllib.parse import quote, unquote

import attrs

from . import _decode
from ._network import Network
from ._request import Request, Response

__all__ = [
    "ENDPOINTS",
    "LEADERBOARD",
    "OPERATIONS",
    "ORDERS",
    "POOL",
    "TOKENS",
    "TOKEN_MARKETS",
    "USER",
    "Endpoint",
    "OperationName",
    "ResponseOf",
    "SyncResponseOf",
    "encode_segment",
    "endpoint",
]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

#: The operation names a limiter sees (and ``weights`` may name): the names of
#: :data:`ENDPOINTS`, in its order (checked at import).
OperationName = Literal["tokens", "token_markets", "pool", "user", "orders", "leaderboard"]

#: Ids made only of unreserved characters (RFC 3986) go on the wire as they are.
_UNRESERVED: Final = re.compile(r"[A-Za-z0-9._~-]+").fullmatch


def encode_segment(value: str) -> str:
    """Percent-encode ``value`` as exactly one path segment (``/ ? # %`` and dot segments too)."""
    if _UNRESERVED(value) and value not in (".", ".."):
        return value  # addresses and most ids: nothing to encode
    encoded = quote(value, safe="")
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    return encoded


def _dot_segment(value: str) -> bool:
    """Whether ``value`` becomes ``.`` or ``..`` once a server or proxy percent-decodes it,
    however many times (such a segment is resolved away: another resource answers)."""
    if "." not in value and "%" not in value:
        return False  # the hot path: hex addresses and plain ids
    for _ in range(8):
        if value in (".", ".."):
            return True
        decoded = unquote(value)
        if decoded == value:
            return False
        value = decoded
    return True  # still changing after eight rounds of decoding: nobody means that


def identifier(value: object, argument: str) -> str:
    """``value`` checked as an identifier of a path (``argument`` names it in errors) and
    encoded as one path segment."""
    if type(value) is str and "." not in value and _UNRESERVED(value):
        return value  # the hot path: nothing to encode, and no dot can make a dot segment
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


@attrs.frozen(slots=True)
class Endpoint(Generic[T]):
    """One operation of the read API.

    ``template`` is its path as the spec writes it (``/api/clob/pools/{poolId}``), with at
    most one ``{placeholder}`` segment; ``network`` is the network it goes to when a call
    names none (None: the client's); ``query`` names its query parameters, in order.
    """

    name: OperationName
    template: str
    decode: Callable[[bytes], T] = attrs.field(repr=False)
    network: Network | None = None
    query: tuple[str, ...] = ()
    #: The path below ``/api`` before and after the placeholder (``after`` is None when
    #: the path has no placeholder).
    before: str = attrs.field(init=False)
    after: str | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if not self.template.startswith("/api/"):
            raise ValueError(f"{self.name}: {self.template!r} is not below /api/")
        path = self.template[len("/api") :]
        head, brace, rest = path.partition("{")
        after: str | None = None
        if brace:
            _, closing, after = rest.partition("}")
            if not closing or "{" in after:
                raise ValueError(f"{self.name}: {self.template!r} has not one placeholder")
        object.__setattr__(self, "before", head)
        object.__setattr__(self, "after", after)

    def segment(self, value: object, argument: str) -> str:
        """The identifier of this endpoint's placeholder, checked and encoded (``argument``
        names it in errors: ``pool_id``)."""
        return identifier(value, argument)

    def path(self, segment: str | None) -> str:
        """The path below ``/api`` with ``segment`` (already encoded) in its placeholder."""
        after = self.after
        if after is None:
            return self.before
        if segment is None:
            raise ValueError(f"{self.name} needs a path segment for {self.template!r}")
        return f"{self.before}{segment}{after}"

    def query_of(self, values: Sequence[object]) -> str:
        """``k=v&...`` of this endpoint's query parameters and their ``values``, in order,
        each value percent-encoded; None values are not sent."""
        names = self.query
        try:
            return "&".join(
                f"{key}={quote(str(value), safe='')}"
                for key, value in zip(names, values, strict=True)
                if value is not None
            )
        except UnicodeEncodeError:
            shown = dict(zip(names, values, strict=True))
            raise ValueError(
                f"a query value is not valid text (it has no UTF-8 form): {shown}"
            ) from None

    def request(
        self,
        base: str,
        network: Network,
        segment: str | None,
        query: str,
        deadline: float | None,
    ) -> Request[T]:
        """The one Request of a call on ``network``, whose API root is ``base``
        (``https://host/api``): its path with ``segment`` (encoded), then ``?query``."""
        path = self.path(segment)
        url = f"{base}{path}?{query}" if query else base + path
        # tuple.__new__: the named tuple's own __new__ is Python code, this is the hot path
        return tuple.__new__(
            Request, (self.name, network, url, self.template, self.decode, deadline)
        )


TOKENS: Final = Endpoint("tokens", "/api/tokens", _decode.TOKENS, query=("search",))
TOKEN_MARKETS: Final = Endpoint(
    "token_markets",
    "/api/aggregated/tokens/{token}/markets",
    _decode.MARKETS,
    network=Network.TESTNET,  # where the spec addresses this call
)
POOL: Final = Endpoint("pool", "/api/clob/pools/{poolId}", _decode.POOL)
USER: Final = Endpoint("user", "/api/clob/users/{address}", _decode.USER)
ORDERS: Final = Endpoint(
    "orders",
    "/api/clob/users/{address}/orders",
    _decode.ORDERS_PAGE,
    query=("market", "status", "side", "limit", "cursor"),
)
LEADERBOARD: Final = Endpoint(
    "leaderboard", "/api/dash/leaderboard", _decode.LEADERBOARD_PAGE, query=("page", "limit")
)

#: The read API (see the spec), one row per operation.
ENDPOINTS: Final[tuple[Endpoint[Any], ...]] = (
    TOKENS,
    TOKEN_MARKETS,
    POOL,
    USER,
    ORDERS,
    LEADERBOARD,
)

#: The operation names, in the table's order.
OPERATIONS: Final[tuple[OperationName, ...]] = tuple(e.name for e in ENDPOINTS)
if get_args(OperationName) != OPERATIONS:
    raise AssertionError("OperationName must list ENDPOINTS' names, in order")

_BY_NAME: Final[dict[str, Endpoint[Any]]] = {e.name: e for e in ENDPOINTS}


def endpoint(name: str) -> Endpoint[Any]:
    """The endpoint of operation ``name``."""
    return _BY_NAME[name]


# --- with_response, made from the operations ----------------------------------------------


def _response_signature(method: Callable[..., Any]) -> inspect.Signature:
    """``method``'s signature, returning ``Response[<what it returned>]``."""
    signature = inspect.signature(method)
    returns = signature.return_annotation
    if returns is inspect.Signature.empty:
        raise TypeError(f"{method.__qualname__} has no return annotation")
    text = returns if isinstance(returns, str) else inspect.formatannotation(returns)
    return signature.replace(return_annotation=f"Response[{text}]")


class _Wrapped(Generic[P, R]):
    """What both wrappers share: the wrapped method's name, signature and hints (with
    ``Response[...]`` as the result), and a docstring pointing to the method."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self._method = method
        self.__wrapped__ = method  # get_type_hints() finds the method's module through it
        self.__name__ = method.__name__
        self.__qualname__ = method.__qualname__
        self.__module__ = method.__module__
        self.__signature__ = _response_signature(method)
        self.__annotations__ = {
            **method.__annotations__,
            "return": self.__signature__.return_annotation,
        }
        self.__doc__ = f":meth:`{method.__qualname__}` with the whole response."

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.__name__:
            raise TypeError(f"{owner.__name__}.{name} wraps {self.__qualname__}: same names only")


class ResponseOf(_Wrapped[P, R]):
    """``with_response.<operation>``: the async operation ``method`` run on the owner's
    response view (the client whose requests bring back a Response)."""

    def __init__(self, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> None:
        super().__init__(method)

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...

    @overload
    def __get__(
        self, instance: object, owner: type
    ) -> Callable[P, Coroutine[Any, Any, Response[R]]]: ...

    def __get__(self, instance: object, owner: type) -> Any:
        if instance is None:
            return self
        return self._method.__get__(instance._view)  # type: ignore[attr-defined]

    def __call__(
        self, instance: Any, /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, Response[R]]:
        """Called on the class (``WithResponse.pool(with_response, ...)``)."""
        bound: Callable[P, Coroutine[Any, Any, Response[R]]] = self.__get__(
            instance, type(instance)
        )
        return bound(*args, **kwargs)


class SyncResponseOf(_Wrapped[P, R]):
    """``SyncClient.with_response.<operation>``: the blocking operation ``method`` run on the
    owner (whose ``_target`` is the async client's ``with_response``)."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        super().__init__(method)

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, Response[R]]: ...

    def __get__(self, instance: object, owner: type) -> Any:
        if instance is None:
            return self
        return self._method.__get__(instance)

    def __call__(self, instance: Any, /, *args: P.args, **kwargs: P.kwargs) -> Response[R]:
        """Called on the class (``SyncWithResponse.pool(with_response, ...)``)."""
        bound: Callable[P, Response[R]] = self.__get__(instance, type(instance))
        return bound(*args, **kwargs)
