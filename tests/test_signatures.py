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

PUBLIC: list[tuple[str, Callable[..., Any]]] = [
    ("Client.__init__", Client.__init__),
    *[(f"Client.{name}", getattr(Client, name)) for name in OPERATIONS + STREAMS],
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
    assert public == {*OPERATIONS, *STREAMS, "close", "set_testing"}
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
