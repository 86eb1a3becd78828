"""The public names are exactly the contract's (../shared/design/api.md), no more, no less."""

from __future__ import annotations

import enum
import typing

import asyncapi_client

CONTRACT_CLASSES = {
    # Networks and hosts, Client
    "Network",
    "Client",
    # Models and their enums
    "Token",
    "Market",
    "Pool",
    "Order",
    "UserProfile",
    "LeaderboardEntry",
    "OrdersPage",
    "LeaderboardPage",
    "Side",
    "OrderStatus",
    "MarketType",
    # Errors
    "ApiError",
    "TransportError",
    "RequestTimeoutError",
    "StatusError",
    "BadRequestError",
    "NotFoundError",
    "RateLimitError",
    "ServerError",
    "DecodeError",
    "ResponseTooLargeError",
    "PaginationError",
    # Rate limits
    "Rate",
    "LocalLimiter",
    "Limiter",
    "Admission",
    "LimiterError",
    "LimitStatus",
    # Per-call results and retry events
    "Response",
    "RetryEvent",
    # Resumable walks
    "Walk",
    "Checkpoint",
    # Cached reference data
    "MemoryCache",
    # The sync client, and the type of its streams (for annotations)
    "SyncClient",
    "SyncWalk",
    # Watching for changes: the watch, its changes, its state (and the type state= takes,
    # and the sync client's watch, for annotations)
    "Watch",
    "OrderChange",
    "PoolChange",
    "LeaderboardChange",
    "FileWatchState",
    "WatchState",
    "SyncWatch",
}

CONTRACT_FUNCTIONS = {"to_json", "to_wire", "write_parquet"}

# Argument types: the strings status=, side= and network= take (for annotating a user's own
# variables), and deadline='s "not given" sentinel with its type.
TYPE_ALIASES = {"OrderStatusName", "SideName", "NetworkName"}
SENTINELS = {"USE_CLIENT_DEFAULT"}
SENTINEL_TYPES = {"UseClientDefault"}


def test_all_is_exactly_the_contract() -> None:
    assert set(asyncapi_client.__all__) == (
        CONTRACT_CLASSES
        | CONTRACT_FUNCTIONS
        | TYPE_ALIASES
        | SENTINELS
        | SENTINEL_TYPES
        | {"__version__"}
    )


def test_all_is_sorted_without_duplicates() -> None:
    # ruff's RUF022 order (isort style): CONSTANTS, then Classes, then the rest; each sorted.
    def group(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert asyncapi_client.__all__ == sorted(set(asyncapi_client.__all__), key=group)


def test_argument_types_are_public_and_name_only_public_types() -> None:
    for name in TYPE_ALIASES:
        alias = getattr(asyncapi_client, name)
        assert typing.get_origin(alias) is typing.Literal, name
        assert all(isinstance(arg, str) for arg in typing.get_args(alias)), name
    sentinel_type = asyncapi_client.UseClientDefault
    assert sentinel_type.__module__.startswith("asyncapi_client")
    assert sentinel_type.__doc__
    assert isinstance(asyncapi_client.USE_CLIENT_DEFAULT, sentinel_type)


def test_every_name_resolves() -> None:
    for name in asyncapi_client.__all__:
        assert getattr(asyncapi_client, name) is not None, name
    for name in CONTRACT_CLASSES:
        assert isinstance(getattr(asyncapi_client, name), type), name
    for name in CONTRACT_FUNCTIONS:
        function = getattr(asyncapi_client, name)
        assert callable(function), name
        assert function.__module__.startswith("asyncapi_client"), name
        assert function.__doc__, name
    assert isinstance(asyncapi_client.__version__, str)


def test_star_import_gives_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from asyncapi_client import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(asyncapi_client.__all__)


def test_public_classes_present_themselves_as_the_package() -> None:
    """No private module leaks into what a user imports: every name is importable from here."""
    for name in CONTRACT_CLASSES:
        cls = getattr(asyncapi_client, name)
        assert cls.__module__.startswith("asyncapi_client"), name
        assert cls.__name__ == name


def test_enums_are_str_enums() -> None:
    for name in ("Network", "Side", "OrderStatus", "MarketType"):
        cls = getattr(asyncapi_client, name)
        assert issubclass(cls, enum.Enum)
        assert issubclass(cls, str)
