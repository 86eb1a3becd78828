"""The two networks and how their hosts are found: arguments first, then the environment."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs
from yarl import URL

__all__ = ["ENV_VARS", "Hosts", "Network", "parse_network"]


class Network(enum.StrEnum):
    """The host an operation goes to: the main network or the test network."""

    MAINNET = "mainnet"
    TESTNET = "testnet"


#: The environment variable read for each host when its argument is not given.
ENV_VARS: Mapping[Network, str] = {
    Network.MAINNET: "ASYNCAPI_BASE_URL",
    Network.TESTNET: "ASYNCAPI_TESTNET_BASE_URL",
}
_ARGUMENTS: Mapping[Network, str] = {
    Network.MAINNET: "base_url",
    Network.TESTNET: "testnet_base_url",
}


def parse_network(value: Network | str) -> Network:
    """Accept a Network or its name in any case; anything else is a ValueError."""
    if isinstance(value, Network):
        return value
    if isinstance(value, str):
        try:
            return Network(value.strip().lower())
        except ValueError:
            pass
    choices = ", ".join(repr(n.value) for n in Network)
    raise ValueError(f"unknown network {value!r}: expected one of {choices}")


def _normalise_base_url(value: str, argument: str) -> str:
    """Check an http(s) base address and return it without a trailing slash."""
    if not isinstance(value, str):
        raise ValueError(f"{argument} must be a string URL, not {type(value).__name__}")
    text = value.strip()
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as exc:
        raise ValueError(f"{argument} {value!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(
            f"{argument} {value!r} is not a valid base URL: expected http(s)://host[:port][/prefix]"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{argument} {value!r} must not carry a query or a fragment")
    if any(char.isspace() or char < " " or char in "\\\x7f" for char in text):
        raise ValueError(f"{argument} {value!r} contains blanks, backslashes or control characters")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{argument} must not carry credentials (they would show in every error and log "
            "line): pass them as headers= to Client, e.g. an Authorization header"
        )
    try:
        URL(text)
    except ValueError as exc:
        raise ValueError(f"{argument} {value!r} is not a valid URL: {exc}") from None
    return text.rstrip("/")


@attrs.frozen(slots=True)
class Hosts:
    """The configured base address of each network (None: not configured).

    Malformed addresses are refused at construction; a missing one only when a call needs it.
    """

    mainnet: str | None
    testnet: str | None

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        testnet_base_url: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> Hosts:
        env = os.environ if environ is None else environ
        found: dict[Network, str | None] = {}
        for network, given in ((Network.MAINNET, base_url), (Network.TESTNET, testnet_base_url)):
            if given is not None:
                found[network] = _normalise_base_url(given, _ARGUMENTS[network])
            elif env.get(ENV_VARS[network], "").strip():
                found[network] = _normalise_base_url(env[ENV_VARS[network]], ENV_VARS[network])
            else:
                found[network] = None
        return cls(found[Network.MAINNET], found[Network.TESTNET])

    def base(self, network: Network) -> str:
        """The base address for ``network``, or a ValueError naming how to configure it."""
        url = self.mainnet if network is Network.MAINNET else self.testnet
        if url is None:
            raise ValueError(
                f"no {network.value} host configured: pass {_ARGUMENTS[network]}= to Client "
                f"or set the environment variable {ENV_VARS[network]}"
            )
        return url
