"""Networks and hosts: names in any case, URLs checked when made, missing hosts at call time."""

from __future__ import annotations

import pytest

from asyncapi_client import Client, Network
from asyncapi_client._network import HostConfigError
from asyncapi_client.testing import FakeServer

MAIN_ENV = "ASYNCAPI_BASE_URL"
TEST_ENV = "ASYNCAPI_TESTNET_BASE_URL"


@pytest.fixture(autouse=True)
def _no_env_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAIN_ENV, raising=False)
    monkeypatch.delenv(TEST_ENV, raising=False)


def test_network_is_a_str_enum_of_two() -> None:
    assert [n.value for n in Network] == ["mainnet", "testnet"]
    assert Network("mainnet") is Network.MAINNET
    assert str(Network.MAINNET) == "mainnet"
    assert isinstance(Network.TESTNET, str)


@pytest.mark.parametrize(
    ("name", "network"),
    [
        ("mainnet", Network.MAINNET),
        ("MAINNET", Network.MAINNET),
        ("MainNet", Network.MAINNET),
        (Network.MAINNET, Network.MAINNET),
        ("testnet", Network.TESTNET),
        ("TESTNET", Network.TESTNET),
        ("tEsTnEt", Network.TESTNET),
        (Network.TESTNET, Network.TESTNET),
    ],
)
def test_network_names_are_case_insensitive(name: str, network: Network) -> None:
    # Typed as the upper or lower-case names; any case is accepted at run time.
    client = Client(name, base_url="http://h", testnet_base_url="http://t")  # type: ignore[arg-type]
    assert client.network is network


def test_default_network_is_mainnet() -> None:
    assert Client(base_url="http://h").network is Network.MAINNET


@pytest.mark.parametrize("name", ["devnet", "main", "", "mainnet2", "test net"])
def test_unknown_network_name_is_a_value_error_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="network"):
        Client(name, base_url="http://h", testnet_base_url="http://t")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [5, None, b"mainnet", 1.0])
def test_non_string_network_is_a_value_error(name: object) -> None:
    with pytest.raises(ValueError):
        Client(name, base_url="http://h")  # type: ignore[arg-type]


MALFORMED = [
    "ftp://host.example",
    "not a url",
    "http://",
    "https://",
    "http://h:99999",
    "http://h:0",
    "http://h:port",
    "host.example",
    "//host.example",
    "/api",
    "http:///path-only",
    "http://[::1",
    "https://h.example/?x=1",
    "https://h.example/#frag",
    "ws://h.example",
    "file:///etc/passwd",
]


@pytest.mark.parametrize("url", MALFORMED)
@pytest.mark.parametrize("argument", ["base_url", "testnet_base_url"])
def test_malformed_url_argument_is_a_value_error_at_construction(argument: str, url: str) -> None:
    with pytest.raises(ValueError) as info:
        Client(**{argument: url})  # type: ignore[arg-type]
    assert argument in str(info.value)


@pytest.mark.parametrize("url", MALFORMED)
@pytest.mark.parametrize("variable", [MAIN_ENV, TEST_ENV])
def test_malformed_url_in_the_environment_is_a_value_error_at_construction(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    monkeypatch.setenv(variable, url)
    with pytest.raises(ValueError) as info:
        Client()
    assert variable in str(info.value)


@pytest.mark.parametrize("url", [5, b"http://h", ["http://h"]])
def test_non_string_url_is_a_value_error(url: object) -> None:
    with pytest.raises(ValueError, match="base_url"):
        Client(base_url=url)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "https://api.example",
        "https://api.example/",
        "https://api.example/prefix/v1",
        "https://api.example/prefix/v1/",
        "http://[::1]:8080",
        "HTTPS://API.EXAMPLE",
        "  https://api.example  ",
    ],
)
def test_well_formed_urls_are_accepted(url: str) -> None:
    Client(base_url=url, testnet_base_url=url)


async def test_missing_host_is_a_value_error_at_call_time_naming_argument_and_env() -> None:
    client = Client()  # constructing without any host is fine
    async with client:
        with pytest.raises(ValueError) as main:
            await client.pool("p")
        with pytest.raises(ValueError) as test:
            await client.token_markets("t")
    assert "base_url" in str(main.value)
    assert MAIN_ENV in str(main.value)
    assert "testnet_base_url" in str(test.value)
    assert TEST_ENV in str(test.value)


async def test_only_the_needed_host_must_be_configured(server: FakeServer) -> None:
    async with Client(base_url=server.base_url) as client:
        await client.pool("p")  # mainnet is configured: fine
        with pytest.raises(ValueError, match=TEST_ENV):
            await client.token_markets("t")  # the test-network host is not
        await client.token_markets("t", network="mainnet")
    async with Client("testnet", testnet_base_url=server.testnet_base_url) as client:
        await client.user("u")
        with pytest.raises(ValueError, match=MAIN_ENV):
            await client.user("u", network="mainnet")
    assert [(r.network, r.operation) for r in server.requests] == [
        ("mainnet", "pool"),
        ("mainnet", "token_markets"),
        ("testnet", "user"),
    ]


async def test_blank_environment_variable_counts_as_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MAIN_ENV, "   ")
    async with Client() as client:
        with pytest.raises(ValueError, match=MAIN_ENV):
            await client.leaderboard()


async def test_environment_is_read_when_the_client_is_made(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAIN_ENV, server.base_url)
    client = Client()
    monkeypatch.setenv(MAIN_ENV, "http://127.0.0.1:9")
    async with client:
        await client.pool("p")
    assert [(r.network, r.operation) for r in server.requests] == [("mainnet", "pool")]


@pytest.mark.parametrize("network", ["devnet", "", 3])
async def test_unknown_network_per_call_is_a_value_error_before_any_request(
    server: FakeServer, network: object
) -> None:
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as c:
        with pytest.raises(ValueError):
            await c.pool("p", network=network)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await c.token_markets("t", network=network)  # type: ignore[arg-type]
    assert server.requests == []


def test_host_errors_carry_the_argument_and_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A front end (the CLI) rewords the message from attributes, never by parsing it."""
    with pytest.raises(HostConfigError) as given:
        Client(testnet_base_url="ftp://h")
    error = given.value
    assert isinstance(error, ValueError)
    assert (error.network, error.argument, error.env_var) == (
        Network.TESTNET,
        "testnet_base_url",
        TEST_ENV,
    )
    assert error.source == "testnet_base_url"
    assert error.value == "ftp://h"
    assert str(error).startswith("testnet_base_url 'ftp://h' is not a valid base URL")
    assert error.describe("--testnet-base-url").startswith("--testnet-base-url 'ftp://h' is not")

    monkeypatch.setenv(MAIN_ENV, "http://user:secret@h")
    with pytest.raises(HostConfigError) as from_env:
        Client()
    assert from_env.value.source == MAIN_ENV
    assert from_env.value.describe("--base-url").startswith(f"{MAIN_ENV} must not carry")
    assert "secret" not in str(from_env.value)


async def test_a_missing_host_error_names_both_ways_to_configure_it() -> None:
    async with Client() as client:
        with pytest.raises(HostConfigError) as info:
            await client.user("u")
    error = info.value
    assert error.source is None
    assert str(error) == (
        f"no mainnet host configured: pass base_url= to Client or set the environment "
        f"variable {MAIN_ENV}"
    )
    assert error.describe("--base-url") == (
        f"no mainnet host configured: pass --base-url or set the environment variable {MAIN_ENV}"
    )
