"""An in-process fake of the whole exchange API, to test bots offline.

async with FakeServer(FakeExchange.generate(seed=7)) as server:
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as client:
        ...

Deterministic data from a seed, both networks on loopback, seeded random faults per operation
(:class:`Fault`), seeded activity with a journal (``exchange.advance``, :class:`Change`,
``FakeServer(activity=...)``), ETags and 304s, a quota per network (:class:`Quota`) advertised
in rate-limit headers, exact scripted replies (:class:`Reply`, ``server.script``), gates that hold
requests until released (:class:`Gate`, ``server.gate``), a record of every request, a wait
for any condition on it (``server.wait_until``), a threaded mode (``server.in_thread()``)
and the pytest fixtures ``fake_server`` and ``fake_client``.
"""

from ._changes import Change
from ._data import FakeExchange, WireDict
from ._faults import OPERATIONS, Fault, FaultKind
from ._gate import Gate
from ._quota import Quota
from ._records import RecordedRequest
from ._script import Reply, Responder, ScriptStep
from ._server import FakeServer

__all__ = [
    "OPERATIONS",
    "Change",
    "FakeExchange",
    "FakeServer",
    "Fault",
    "FaultKind",
    "Gate",
    "Quota",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptStep",
    "WireDict",
]
