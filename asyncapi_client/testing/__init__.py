"""An in-process fake of the whole exchange API, to test bots offline.

async with FakeServer(FakeExchange.generate(seed=7)) as server:
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as client:
        ...

Deterministic data from a seed, both networks on loopback, fault injection per operation
(:class:`Fault`), a record of every request, and the pytest fixture ``fake_server``.
"""

from ._data import FakeExchange, WireDict
from ._faults import OPERATIONS, Fault, FaultKind
from ._server import FakeServer, RecordedRequest

__all__ = [
    "OPERATIONS",
    "FakeExchange",
    "FakeServer",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "WireDict",
]
