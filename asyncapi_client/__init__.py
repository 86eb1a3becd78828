"""asyncapi_client: the asyncio-first, fully typed client of the exchange read API.

Every public name is importable from here::

    async with Client(base_url="https://...") as client:
        pool = await client.pool("0xpool")

    with SyncClient(base_url="https://...") as client:   # the same, blocking
        pool = client.pool("0xpool")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._cache import MemoryCache
from ._checkpoint import Checkpoint
from ._client import Client
from ._errors import (
    ApiError,
    BadRequestError,
    DecodeError,
    LimiterError,
    NotFoundError,
    PaginationError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    ServerError,
    StatusError,
    TransportError,
)
from ._limiters import Admission, Limiter, LimitStatus, LocalLimiter, Rate
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    MarketType,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
)
from ._network import Network
from ._request import Response
from ._retry import RetryEvent
from ._serialise import to_json, to_wire
from ._sync import SyncClient, SyncWalk, SyncWatch
from ._types import USE_CLIENT_DEFAULT, NetworkName, OrderStatusName, SideName, UseClientDefault
from ._version import __version__
from ._walks import Walk
from ._watches import FileWatchState, LeaderboardChange, OrderChange, PoolChange, Watch, WatchState

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterable, Iterable

__all__ = [
    "USE_CLIENT_DEFAULT",
    "Admission",
    "ApiError",
    "BadRequestError",
    "Checkpoint",
    "Client",
    "DecodeError",
    "FileWatchState",
    "LeaderboardChange",
    "LeaderboardEntry",
    "LeaderboardPage",
    "LimitStatus",
    "Limiter",
    "LimiterError",
    "LocalLimiter",
    "Market",
    "MarketType",
    "MemoryCache",
    "Network",
    "NetworkName",
    "NotFoundError",
    "Order",
    "OrderChange",
    "OrderStatus",
    "OrderStatusName",
    "OrdersPage",
    "PaginationError",
    "Pool",
    "PoolChange",
    "Rate",
    "RateLimitError",
    "RequestTimeoutError",
    "Response",
    "ResponseTooLargeError",
    "RetryEvent",
    "ServerError",
    "Side",
    "SideName",
    "StatusError",
    "SyncClient",
    "SyncWalk",
    "SyncWatch",
    "Token",
    "TransportError",
    "UseClientDefault",
    "UserProfile",
    "Walk",
    "Watch",
    "WatchState",
    "__version__",
    "to_json",
    "to_wire",
    "write_parquet",
]


async def write_parquet(
    walks: Iterable[Walk[Order]]
    | Iterable[Walk[LeaderboardEntry]]
    | AsyncIterable[Walk[Order]]
    | AsyncIterable[Walk[LeaderboardEntry]],
    path: str | os.PathLike[str],
    *,
    partition_by: str | None = None,
    rows_per_group: int = 65_536,
    decimal_scale: int = 18,
) -> int:
    """Write the items of several walks of one kind into one Parquet file, or into a dataset
    partitioned by a column; returns the number of rows written.

    The walks are taken one at a time, in order, each from where it stands, with the schema,
    exactness and bounded memory of :meth:`Walk.to_parquet`: row groups fill across walks,
    and ``path`` appears only complete (written beside it, then renamed). On a failure or
    a cancellation nothing appears, and the walk in progress stands where it was taken.

    Args:
        walks: walks of items of one kind (``iter_orders``, or ``iter_leaderboard``), as an
            iterable or an async iterable; walks of different kinds raise ``ValueError``.
        path: the file to write (replaced if it exists); with ``partition_by``, the
            directory of the dataset (new, empty, or a dataset of the same column, replaced).
        partition_by: a text or integer column (``"user"``): one Hive-style folder per
            value (``user=0xabc/``) of Parquet files without that column, as pyarrow,
            DuckDB and Spark read them.
        rows_per_group: rows in each row group (all full but the last; in a dataset, at
            most this many).
        decimal_scale: digits after the point in the decimal columns (0 to 38).
    """
    from . import _export  # on first use: importing the package costs nothing for it

    return await _export.write_parquet(
        walks,
        path,
        partition_by=partition_by,
        rows_per_group=rows_per_group,
        decimal_scale=decimal_scale,
    )
