"""The two networks and how their hosts are found: arguments first, then the environment."""

from __future__ import annotations

import enum
import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

import attrs
from yarl import URL

__all__ = ["ARGUMENTS", "ENV_VARS", "HostConfigError", "Hosts", "Network", "parse_network"]


class Network(enum.StrEnum):
    """The host an operation goes to: the main network or the test network."""

    MAINNET = "mainnet"
    TESTNET = "testnet"


#: The environment variable read for each host when its argument is not given.
ENV_VARS: Mapping[Network, str] = {
    Network.MAINNET: "ASYNCAPI_BASE_URL",
    Network.TESTNET: "ASYNCAPI_TESTNET_BASE_URL",
}
#: The Client argument that names each host.
ARGUMENTS: Mapping[Network, str] = {
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


class HostConfigError(ValueError):
    """A host that is malformed or not configured, with the names a caller can fix it by.

    ``argument`` is the Client argument (``base_url``) and ``env_var`` the environment
    variable (``ASYNCAPI_BASE_URL``) for ``network``; ``source`` is the one the bad value came
    from (None when no value came at all). A front end such as the command line rewords the
    message with :meth:`describe` instead of parsing it.
    """

    def __init__(
        self, network: Network, problem: str, *, source: str | None, value: object
    ) -> None:
        self.network = network
        self.argument = ARGUMENTS[network]
        self.env_var = ENV_VARS[network]
        self.source = source
        self.value = value
        self.problem = problem
        given_as = self.argument if source is not None else f"{self.argument}= to Client"
        super().__init__(self.describe(given_as))

    def describe(self, argument: str, env_var: str | None = None) -> str:
        """The message, naming the host's argument as ``argument`` (e.g. ``--base-url``)."""
        env_var = env_var or self.env_var
        if self.source is None:
            return (
                f"no {self.network.value} host configured: pass {argument} "
                f"or set the environment variable {env_var}"
            )
        label = env_var if self.source == self.env_var else argument
        return self.problem.format(label=label, value=self.value)


def _normalise_base_url(value: object, network: Network, source: str) -> str:
    """Check an http(s) base address and return it without a trailing slash."""

    def fail(problem: str) -> HostConfigError:
        return HostConfigError(network, problem, source=source, value=value)

    if not isinstance(value, str):
        raise fail(f"{{label}} must be a string URL, not {type(value).__name__}")
    text = value.strip()
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as exc:
        raise fail(f"{{label}} {{value!r}} is not a valid URL: {_braces(exc)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise fail(
            "{label} {value!r} is not a valid base URL: expected http(s)://host[:port][/prefix]"
        )
    if parts.query or parts.fragment:
        raise fail("{label} {value!r} must not carry a query or a fragment")
    if any(char.isspace() or char < " " or char in "\\\x7f" for char in text):
        raise fail("{label} {value!r} contains blanks, backslashes or control characters")
    if parts.username is not None or parts.password is not None:
        raise fail(
            "{label} must not carry credentials (they would show in every error and log "
            "line): pass them as headers= to Client, e.g. an Authorization header"
        )
    try:
        host = URL(text).raw_host or ""
    except ValueError as exc:
        raise fail(f"{{label}} {{value!r}} is not a valid URL: {_braces(exc)}") from None
    if parts.path.rstrip("/").lower().endswith("/api"):
        raise fail(
            "{label} {value!r} ends in /api: the client adds /api to every request itself, "
            "so pass the address without it (every call would go to /api/api/...)"
        )
    why = _bad_host(host, bracketed=text.partition("//")[2].startswith("["))
    if why:
        raise fail(
            f"{{label}} {{value!r}} is not a valid base URL: its host {_braces(repr(host))} "
            f"is neither a DNS name nor an IP address ({_braces(why)})"
        )
    return text.rstrip("/")


#: One label of a DNS name as sent (IDNA already applied): letters, digits, hyphens and
#: underscores (service names use them), neither starting nor ending with a hyphen.
_LABEL: Final = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)").fullmatch
#: A last label that resolvers read as a number (``2130706433``, ``0x7f000001``, the ``1``
#: of ``127.1``): the host would be an IPv4 address in disguise.
_NUMERIC: Final = re.compile(r"[0-9]+|0x[0-9a-f]*").fullmatch


def _bad_host(host: str, *, bracketed: bool) -> str:
    """Why ``host`` (as yarl encodes it: lowercase, IDNA) is not a DNS name or an IP
    address literal; "" when it is one."""
    if bracketed:
        address, percent, zone = host.partition("%25")  # the zone id's "%", encoded
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return "not an IPv6 address"
        return "an empty zone" if percent and not zone else ""
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        pass
    else:
        return ""
    if len(host) > 253:
        return "longer than 253 characters"
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1 and "" not in labels[:-1]:
        return "an empty label: drop the trailing dot"
    if "" in labels:
        return "an empty label"
    for label in labels:
        if len(label) > 63:
            return f"a label of {len(label)} characters, more than 63"
        if not _LABEL(label):
            return f"the label {label!r} is not letters, digits and inner hyphens"
    if _NUMERIC(labels[-1]):
        return "a number or a malformed IPv4 address"
    return ""


def _braces(text: BaseException | str) -> str:
    """A text (or an exception's) made safe inside a str.format template."""
    return str(text).replace("{", "{{").replace("}", "}}")


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
                found[network] = _normalise_base_url(given, network, ARGUMENTS[network])
            elif env.get(ENV_VARS[network], "").strip():
                found[network] = _normalise_base_url(
                    env[ENV_VARS[network]], network, ENV_VARS[network]
                )
            else:
                found[network] = None
        return cls(found[Network.MAINNET], found[Network.TESTNET])

    def base(self, network: Network) -> str:
        """The base address for ``network``, or a HostConfigError naming how to configure it."""
        url = self.mainnet if network is Network.MAINNET else self.testnet
        if url is None:
            raise HostConfigError(network, "", source=None, value=None)
        return url
