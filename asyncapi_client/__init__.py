"""asyncapi_client: the asyncio-first, fully typed client of the exchange read API.

Every public name is importable from here::

    async with Client(base_url="https://...") as client:
        pool = await client.pool("0xpool")

    with SyncClient(base_url="https://...") as client:   # the same, blocking
        pool = client.pool("0xpool")
"""

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
]
