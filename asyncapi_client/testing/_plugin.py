"""pytest plugin (entry point ``pytest11``): the ``fake_exchange``, ``fake_server`` and
``fake_client`` fixtures.

Installed with the package (``pip install 'asyncapi-client[testing]'`` brings pytest and
pytest-asyncio with it), so a bot's test suite only writes::

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
  The ``fake_server`` marker passes its keywords to ``FakeServer``:
  ``@pytest.mark.fake_server(activity=50.0, quota=Quota(100, 10.0), rate_limit_headers="ietf",
  poll_interval=5.0)`` makes the data move and the server advertise and enforce a quota.
- ``fake_client``: a :class:`~asyncapi_client.Client` of ``fake_server`` (both networks) in
  testing mode (retries without waiting), closed after the test.

Disable the plugin with ``-p no:asyncapi_client``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from asyncapi_client import Client

    from ._data import FakeExchange
    from ._server import FakeServer

__all__ = ["fake_client", "fake_exchange", "fake_server", "pytest_configure"]

F = TypeVar("F", bound=Callable[..., Any])

MISSING_ASYNCIO: Final = (
    "the {name} fixture of asyncapi_client.testing needs pytest-asyncio, which is not "
    "installed: pip install 'asyncapi-client[testing]' (or pytest-asyncio)"
)


def _async_fixture(func: F) -> F:
    """pytest-asyncio's fixture decorator (strict mode needs it); without it, a clear failure."""
    try:
        import pytest_asyncio
    except ImportError:
        return cast(F, pytest.fixture(_needs_asyncio(func.__name__), name=func.__name__))
    return cast(F, pytest_asyncio.fixture(func))


def _needs_asyncio(name: str) -> Callable[[], None]:
    """A stand-in fixture that fails its test, naming the missing plugin and the extra."""

    def missing() -> None:
        pytest.fail(MISSING_ASYNCIO.format(name=name), pytrace=False)

    missing.__name__ = missing.__qualname__ = f"{name}_needs_pytest_asyncio"
    return missing


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fake_exchange(seed=0, **sizes): the data of the fake_exchange/fake_server fixtures, "
        "as FakeExchange.generate(seed=..., tokens=, users=, orders_per_user=, "
        "leaderboard_size=, pools=)",
    )
    config.addinivalue_line(
        "markers",
        "fake_server(**options): keyword options of the fake_server fixture's FakeServer: "
        "activity= (changes a second), quota=Quota(limit, window), rate_limit_headers= "
        "('ietf', 'split', 'x' or None), poll_interval= (seconds), prefix=",
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


#: What the ``fake_server`` marker may set: FakeServer's keywords other than the data's.
SERVER_OPTIONS: Final = frozenset(
    {"activity", "quota", "rate_limit_headers", "poll_interval", "prefix", "seed"}
)


def _server_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The keywords of the closest ``fake_server`` marker, checked by name."""
    marker = request.node.get_closest_marker("fake_server")
    if marker is None:
        return {}
    if marker.args:
        raise TypeError(
            "the fake_server marker takes keywords only, e.g. "
            f"@pytest.mark.fake_server(activity=50.0), got {marker.args!r}"
        )
    unknown = sorted(set(marker.kwargs) - SERVER_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown fake_server marker option(s) {', '.join(unknown)}: expected some of "
            f"{', '.join(sorted(SERVER_OPTIONS))}"
        )
    return dict(marker.kwargs)


@_async_fixture
async def fake_server(
    request: pytest.FixtureRequest, fake_exchange: FakeExchange
) -> AsyncIterator[FakeServer]:
    """A started FakeServer over ``fake_exchange`` on loopback; closed after the test.

    The ``fake_server`` marker's keywords (activity, quota, rate_limit_headers,
    poll_interval, prefix, seed) are passed to FakeServer.
    """
    from ._server import FakeServer

    options = {"seed": fake_exchange.seed, **_server_options(request)}
    async with FakeServer(fake_exchange, **options) as server:
        yield server


@_async_fixture
async def fake_client(fake_server: FakeServer) -> AsyncIterator[Client]:
    """A Client of ``fake_server`` in testing mode (no back-off waits); closed after the test."""
    from asyncapi_client import Client

    async with Client(
        base_url=fake_server.base_url, testnet_base_url=fake_server.testnet_base_url
    ) as client:
        client.set_testing(True)
        yield client
