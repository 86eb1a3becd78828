"""pytest plugin (entry point ``pytest11``): the ``fake_server`` and ``fake_exchange`` fixtures.

Installed with the package, so a bot's test suite only writes::

    from asyncapi_client import Client
    from asyncapi_client.testing import Fault

    async def test_bot(fake_server):
        async with Client(base_url=fake_server.base_url,
                          testnet_base_url=fake_server.testnet_base_url) as client:
            tokens = await client.tokens(search="eth")
            assert tokens

    @pytest.mark.fake_exchange(seed=7, users=2, orders_per_user=50)
    async def test_bot_survives_outages(fake_server):
        fake_server.set_fault("orders", Fault(error_rate=0.3, error_status=503))
        async with Client(base_url=fake_server.base_url) as client:
            client.set_testing(True)  # retries without sleeping
            ...
        assert any(r.status == 503 for r in fake_server.requests)

- ``fake_exchange``: a :class:`~asyncapi_client.testing.FakeExchange` for this test, from
  ``FakeExchange.generate(**marker kwargs)`` (``seed=0`` and the default sizes unless the
  ``fake_exchange`` marker says otherwise). Edit it to set up a scenario.
- ``fake_server``: a started :class:`~asyncapi_client.testing.FakeServer` over that exchange
  (its fault seed is the exchange's seed), closed after the test. Async: it needs
  pytest-asyncio (with ``asyncio_mode = "strict"``, mark the tests ``@pytest.mark.asyncio``).

Disable the plugin with ``-p no:asyncapi_client``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from ._data import FakeExchange
    from ._server import FakeServer

__all__ = ["fake_exchange", "fake_server", "pytest_configure"]

F = TypeVar("F", bound=Callable[..., Any])


def _async_fixture(func: F) -> F:
    """pytest-asyncio's fixture decorator when it is installed (strict mode needs it)."""
    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - another async plugin (anyio) may handle it
        return cast(F, pytest.fixture(func))
    return cast(F, pytest_asyncio.fixture(func))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fake_exchange(seed=0, **sizes): the data of the fake_exchange/fake_server fixtures, "
        "as FakeExchange.generate(seed=..., tokens=, users=, orders_per_user=, "
        "leaderboard_size=, pools=)",
    )


@pytest.fixture
def fake_exchange(request: pytest.FixtureRequest) -> FakeExchange:
    """A generated FakeExchange; the ``fake_exchange`` marker picks the seed and sizes."""
    from ._data import FakeExchange

    marker = request.node.get_closest_marker("fake_exchange")
    kwargs: dict[str, Any] = {}
    if marker is not None:
        if marker.args:
            kwargs["seed"] = marker.args[0]
        kwargs.update(marker.kwargs)
    return FakeExchange.generate(**kwargs)


@_async_fixture
async def fake_server(fake_exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    """A started FakeServer over ``fake_exchange`` on loopback; closed after the test."""
    from ._server import FakeServer

    async with FakeServer(fake_exchange, seed=fake_exchange.seed) as server:
        yield server
