"""The types of the client's arguments: the strings a type checker accepts, and a sentinel.

``status``, ``side`` and ``network`` take an enum member or one of the strings below, so
that ``status="fillled"`` fails ``mypy`` instead of the call. At run time any case is
accepted (``"Partially_Filled"``), as the contract says; the aliases name the upper and
lower case forms, which is what code writes.
"""

from __future__ import annotations

from typing import ClassVar, Literal, TypeAlias, final

__all__ = [
    "USE_CLIENT_DEFAULT",
    "CacheState",
    "NetworkName",
    "OrderStatusName",
    "SideName",
    "UseClientDefault",
]

#: The strings a type checker accepts for ``status=`` besides an :class:`OrderStatus`.
OrderStatusName: TypeAlias = Literal[
    "OPEN",
    "FILLED",
    "PARTIALLY_FILLED",
    "CANCELLED",
    "EXPIRED",
    "open",
    "filled",
    "partially_filled",
    "cancelled",
    "expired",
]
#: The strings a type checker accepts for ``side=`` besides a :class:`Side`.
SideName: TypeAlias = Literal["BUY", "SELL", "buy", "sell"]
#: The strings a type checker accepts for ``network=`` besides a :class:`Network`.
NetworkName: TypeAlias = Literal["mainnet", "testnet", "MAINNET", "TESTNET"]
#: Where a value came from (``Response.cache``): sent for, served fresh, confirmed by a
#: 304, or served stale because its refresh failed.
CacheState: TypeAlias = Literal["miss", "hit", "revalidated", "stale"]


@final
class UseClientDefault:
    """The type of :data:`USE_CLIENT_DEFAULT`, for annotating a value passed through.

    A wrapper of your own can forward "not given" unchanged::

        async def pool(pid: str, deadline: float | None | UseClientDefault = USE_CLIENT_DEFAULT):
            return await client.pool(pid, deadline=deadline)
    """

    __slots__ = ()
    _instance: ClassVar[UseClientDefault | None] = None

    def __new__(cls) -> UseClientDefault:
        # One instance, however it is made (copy and pickle come back to it too).
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_CLIENT_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_CLIENT_DEFAULT"


#: ``deadline=USE_CLIENT_DEFAULT`` (the default of every operation and stream): the
#: client's own ``deadline``. ``deadline=None`` means no deadline for that call, and a
#: number of seconds is the deadline of that call.
USE_CLIENT_DEFAULT: UseClientDefault = UseClientDefault()
