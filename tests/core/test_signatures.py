"""What help() and an IDE show of the public methods: public types only, and every parameter
documented. ``tests/typing/api.py`` proves the same types to mypy."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

import pytest

from asyncapi_client import (
    Client,
    Network,
    NetworkName,
    OrderStatus,
    OrderStatusName,
    Side,
    SideName,
    UseClientDefault,
)
from asyncapi_client._client import WithResponse

OPERATIONS = ["tokens", "token_markets", "pool", "user", "orders", "leaderboard"]
STREAMS = ["iter_orders", "iter_order_pages", "iter_leaderboard", "iter_leaderboard_pages"]
WATCHES = ["watch_orders", "watch_pool", "watch_leaderboard", "wait_for_order"]

PUBLIC: list[tuple[str, Callable[..., Any]]] = [
    ("Client.__init__", Client.__init__),
    *[(f"Client.{name}", getattr(Client, name)) for name in OPERATIONS + STREAMS + WATCHES],
    *[(f"WithResponse.{name}", getattr(WithResponse, name)) for name in OPERATIONS],
]
IDS = [name for name, _ in PUBLIC]

EXPECTED_TYPES: dict[str, object] = {
    "status": OrderStatus | OrderStatusName | None,
    "side": Side | SideName | None,
    "network": Network | NetworkName | None,
    "deadline": float | UseClientDefault | None,
}


def parameters(method: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(method).parameters if p != "self"]


def test_every_public_method_is_listed() -> None:
    """A new operation or stream joins the checks below (or this fails)."""
    public = {
        name
        for name, member in vars(Client).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }
    assert public == {*OPERATIONS, *STREAMS, *WATCHES, "close", "set_testing"}
    assert {n for n in vars(WithResponse) if not n.startswith("_")} == set(OPERATIONS)


@pytest.mark.parametrize("method", [m for _, m in PUBLIC], ids=IDS)
def test_signatures_name_only_public_types(method: Callable[..., Any]) -> None:
    for name, parameter in inspect.signature(method).parameters.items():
        annotation = str(parameter.annotation)
        assert not re.search(r"(?<![\w.])_\w", annotation), (name, annotation)
        default = parameter.default
        if default is not inspect.Parameter.empty and default is not None:
            assert not type(default).__name__.startswith("_"), (name, default)
    get_type_hints(method)  # every name resolves


@pytest.mark.parametrize("method", [m for _, m in PUBLIC[1:]], ids=IDS[1:])
def test_status_side_network_and_deadline_have_their_typed_forms(
    method: Callable[..., Any],
) -> None:
    hints = get_type_hints(method)
    for name, expected in EXPECTED_TYPES.items():
        if name in hints:
            assert hints[name] == expected, name
    if method.__name__ not in WATCHES:  # a watch uses the client's network and deadline
        assert "network" in hints
        assert "deadline" in hints


def test_the_constructors_network_is_typed_without_none() -> None:
    assert get_type_hints(Client.__init__)["network"] == Network | NetworkName


@pytest.mark.parametrize("name", OPERATIONS)
def test_with_response_mirrors_the_operations(name: str) -> None:
    plain = inspect.signature(getattr(Client, name))
    full = inspect.signature(getattr(WithResponse, name))
    assert list(full.parameters.values()) == list(plain.parameters.values())


# with_response's methods point to the plain ones (same parameters, checked above).
DOCUMENTED = [(n, m) for n, m in PUBLIC if n.startswith("Client.")]


@pytest.mark.parametrize("method", [m for _, m in DOCUMENTED], ids=[n for n, _ in DOCUMENTED])
def test_every_parameter_is_documented(method: Callable[..., Any]) -> None:
    doc = inspect.getdoc(method) or ""
    _, found, args = doc.partition("Args:")
    assert found, "no Args: section"
    for name in parameters(method):
        # "name: what it is", or a group "a, b, c: what they are"
        assert re.search(rf"^\s+(\w+, )*{name}(, \w+)*: \S", args, re.MULTILINE), name


def test_the_operations_are_one_table() -> None:
    """The endpoints table names the operations everywhere: the Client's methods, the
    limiter's operation names, the fake's routes, telemetry's templates."""
    from typing import get_args

    from asyncapi_client._client import TEMPLATES
    from asyncapi_client._limiters import OPERATIONS as LIMITER_OPERATIONS
    from asyncapi_client._limiters import OperationName
    from asyncapi_client._operations import ENDPOINTS
    from asyncapi_client.testing import OPERATIONS as FAKE_OPERATIONS

    names = [e.name for e in ENDPOINTS]
    assert names == OPERATIONS == list(get_args(OperationName)) == list(FAKE_OPERATIONS)
    assert set(names) == LIMITER_OPERATIONS
    assert {e.name: e.template for e in ENDPOINTS} == TEMPLATES


async def test_with_response_runs_the_operation_itself(client: Client) -> None:
    """``with_response.pool`` is ``Client.pool`` (its checks too), bringing back a Response."""
    from asyncapi_client import Response

    response = await client.with_response.pool("p")
    assert isinstance(response, Response)
    assert response.value == await client.pool("p")
    assert response.url.endswith("/api/clob/pools/p")
    with pytest.raises(ValueError, match="dot segment"):
        await client.with_response.pool("..")
    with pytest.raises(ValueError, match="deadline"):
        await WithResponse.pool(client.with_response, "p", deadline=-1)
