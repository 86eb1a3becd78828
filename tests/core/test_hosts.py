"""A host must be a DNS name or an IP address literal, refused when the client is made
(argument or environment), not after every call failed its retries."""

from __future__ import annotations

import pytest

from asyncapi_client import Client
from tests._cli import cli

NOT_HOSTS = [
    "http://127.0.0.1.:8080",  # an address with a trailing dot: an empty label
    "http://2130706433:8080",  # 127.0.0.1 as one decimal number
    "http://0x7f000001:8080",  # ... as one hex number
    "http://127.1:8080",  # ... shortened
    "http://127.0.0.01:8080",  # ... with a leading zero (octal to some resolvers)
    "http://0x7f.0.0.1:8080",
    "http://1.2.3.4.5",
    "http://api..example",
    "http://.api.example",
    "http://api.example.",
    "http://-api.example",
    "http://api-.example",
    "http://a%20b.example",
    "http://" + "a" * 64 + ".example",
    "http://" + ".".join(["abcdefghi"] * 26),  # 259 characters
    "http://[fe80::1%25]",
    "http://a{0}b.example",
]


@pytest.mark.parametrize("url", NOT_HOSTS)
@pytest.mark.parametrize("argument", ["base_url", "testnet_base_url"])
def test_a_host_that_is_no_dns_name_or_address_is_refused_at_construction(
    argument: str, url: str
) -> None:
    with pytest.raises(ValueError, match="is neither a DNS name nor an IP address") as caught:
        Client(**{argument: url})  # type: ignore[arg-type]
    assert argument in str(caught.value)
    assert repr(url) in str(caught.value)


@pytest.mark.parametrize("url", NOT_HOSTS[:3])
@pytest.mark.parametrize("variable", ["ASYNCAPI_BASE_URL", "ASYNCAPI_TESTNET_BASE_URL"])
def test_a_host_from_the_environment_is_checked_too(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    monkeypatch.setenv(variable, url)
    with pytest.raises(ValueError, match="is neither a DNS name nor an IP address") as caught:
        Client()
    assert variable in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "http://[::ffff:127.0.0.1]",
        "http://[fe80::1%25eth0]:8080",
        "http://localhost:8080",
        "https://API.Example/prefix",
        "https://b\u00fccher.example",  # IDNA: sent as xn--bcher-kva.example
        "https://xn--bcher-kva.example",
        "http://my_service:8080",  # underscores: container and service names use them
        "http://node-1.eu-west.internal",
        "http://1st.example",
        "http://x.123abc",  # a last label with letters is no number
        "http://" + "a" * 63 + ".example",
    ],
)
def test_dns_names_and_address_literals_are_accepted(url: str) -> None:
    Client(base_url=url, testnet_base_url=url)


def test_the_command_line_refuses_such_a_host_as_bad_usage() -> None:
    run = cli("--base-url", "http://2130706433:1", "tokens")
    line = run.one_line_error(2)
    assert "--base-url" in line
    assert "is neither a DNS name nor an IP address" in line
