"""SyncClient cannot drift from Client: same members, same signatures minus ``async``.

The blocking methods are generated from Client's own code (tools/sync_gen.py); these
tests regenerate them and compare, and compare what ``inspect.signature`` sees at run time.
``tests/typing/sync.py`` proves the same types to mypy.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from asyncapi_client import Client, SyncClient, SyncWalk, SyncWatch, Walk, Watch
from asyncapi_client._client import WithResponse
from asyncapi_client._sync import SyncWithResponse
from tools import sync_gen as gen

#: Written by hand on both sides: the lifecycle.
LIFECYCLE = {"close", "__aenter__", "__aexit__", "__enter__", "__exit__"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")} | {"__init__"}


def twins() -> list[tuple[str, Any, Any]]:
    pairs = [(f"Client.{n}", getattr(Client, n), getattr(SyncClient, n)) for n in public(Client)]
    pairs += [
        (f"WithResponse.{n}", getattr(WithResponse, n), getattr(SyncWithResponse, n))
        for n in public(WithResponse) - {"__init__"}
    ]
    return sorted(pairs, key=lambda pair: pair[0])


TWINS = twins()
IDS = [name for name, _, _ in TWINS]


def test_the_generated_methods_are_up_to_date() -> None:
    current = gen.TARGET.read_text(encoding="utf-8")
    assert gen.generate(current, gen.SOURCE.read_text(encoding="utf-8")) == current, (
        f"run: {gen.COMMAND}"
    )
    assert gen.main(["--check"]) == 0


def test_a_change_to_client_fails_the_check() -> None:
    """The check above can fail: a parameter added to Client.pool changes what is generated."""
    source = gen.SOURCE.read_text(encoding="utf-8")
    changed = source.replace("pool_id: str,\n", "pool_id: str,\n        hint: int = 0,\n", 1)
    assert changed != source
    current = gen.TARGET.read_text(encoding="utf-8")
    regenerated = gen.generate(current, changed)
    assert "hint: int = 0," in regenerated
    assert re.search(r"self\._target\.pool\(\s*pool_id,\s*hint,", regenerated)


def test_the_generator_refuses_what_it_does_not_know() -> None:
    source = gen.SOURCE.read_text(encoding="utf-8")
    current = gen.TARGET.read_text(encoding="utf-8")
    decorated = source.replace("    async def user(", "    @staticmethod\n    async def user(", 1)
    with pytest.raises(SystemExit, match="decorators"):
        gen.generate(current, decorated)
    starred = source.replace(
        "pool_id: str,\n        *,\n", "pool_id: str,\n        *rest: str,\n", 1
    )
    assert starred != source
    with pytest.raises(SystemExit, match=r"\*args"):
        gen.generate(current, starred)
    undocumented = source.replace("Set up a client; nothing connects", "Set up; nothing", 1)
    with pytest.raises(SystemExit, match="docstring"):
        gen.generate(current, undocumented)
    with pytest.raises(SystemExit, match="no region"):
        gen.generate("no markers", source)


def test_plain_methods_and_unknown_members() -> None:
    source = gen.SOURCE.read_text(encoding="utf-8")
    current = gen.TARGET.read_text(encoding="utf-8")
    anchor = "    # --- helpers ---"
    assert anchor in source
    described = source.replace(
        anchor, '    def describe(self) -> str:\n        return "x"\n\n' + anchor, 1
    )
    assert "return self._target.describe()" in gen.generate(current, described)
    nested = source.replace(anchor, "    class Nested:\n        pass\n\n" + anchor, 1)
    with pytest.raises(SystemExit, match="ClassDef is not supported"):
        gen.generate(current, nested)
    with pytest.raises(SystemExit, match="no class Client"):
        gen.generate(current, "class Other:\n    pass\n")
    with pytest.raises(SystemExit, match="ruff format failed"):
        gen.generate(current + "\ndef broken(:\n", source)


def test_the_command_rewrites_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    current = gen.TARGET.read_text(encoding="utf-8")
    stale = tmp_path / "_sync.py"
    start = current.index("    def tokens(")
    end = current.index("    def token_markets(")
    stale.write_text(current[:start] + current[end:], encoding="utf-8")  # tokens() lost
    monkeypatch.setattr(gen, "TARGET", stale)
    assert gen.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert gen.main([]) == 0
    assert "rewrote" in capsys.readouterr().out
    assert stale.read_text(encoding="utf-8") == current
    assert gen.main(["--check"]) == 0


def test_every_public_member_has_its_twin() -> None:
    """A member added to Client (or WithResponse) must be added here too: generate again."""
    assert public(SyncClient) == public(Client) | {"with_response"}
    assert public(SyncWithResponse) == public(WithResponse)
    assert "with_response" in vars(Client(base_url="http://127.0.0.1:9"))


@pytest.mark.parametrize(("name", "async_member", "sync_member"), TWINS, ids=IDS)
def test_each_twin_has_the_signature_of_its_async_one_minus_async(
    name: str, async_member: Any, sync_member: Any
) -> None:
    if isinstance(async_member, property):
        assert isinstance(sync_member, property), name
        assert async_member.fget is not None
        assert sync_member.fget is not None
        assert inspect.signature(async_member.fget).return_annotation == (
            inspect.signature(sync_member.fget).return_annotation
        )
        return
    assert not inspect.iscoroutinefunction(sync_member), name
    wanted = inspect.signature(async_member)
    got = inspect.signature(sync_member)
    assert list(got.parameters.values()) == list(wanted.parameters.values()), name
    returns = wanted.return_annotation
    if re.fullmatch(r"(Walk|Watch)\[\w+\]", returns):
        returns = "Sync" + returns  # a stream: Walk[T] becomes SyncWalk[T], Watch SyncWatch
    assert got.return_annotation == returns, name
    # Every name resolves, to the same types (the Walk of a stream to the SyncWalk).
    async_hints = get_type_hints(async_member)
    sync_hints = get_type_hints(sync_member)
    if get_origin(async_hints["return"]) is Walk:
        async_hints["return"] = SyncWalk[get_args(async_hints["return"])]  # type: ignore[misc]
    if get_origin(async_hints["return"]) is Watch:
        async_hints["return"] = SyncWatch[get_args(async_hints["return"])]  # type: ignore[misc]
    assert sync_hints == async_hints, name


@pytest.mark.parametrize(("name", "async_member", "sync_member"), TWINS, ids=IDS)
def test_each_twin_documents_every_parameter(
    name: str, async_member: Any, sync_member: Any
) -> None:
    wanted = (inspect.getdoc(async_member) or "").replace("Client.", "SyncClient.")
    got = inspect.getdoc(sync_member) or ""
    if name not in ("Client.__init__", "Client.close"):  # written for the sync client
        assert got.split("\n")[0] == wanted.split("\n")[0]
    if "Args:" not in wanted:  # with_response's point to the plain operations
        return
    args = got.partition("Args:")[2]
    for parameter in inspect.signature(sync_member).parameters:
        if parameter != "self":
            assert re.search(rf"^\s+(\w+, )*{parameter}(, \w+)*: \S", args, re.M), parameter


def test_the_streams_say_close_not_aclose() -> None:
    for name in ("iter_orders", "iter_order_pages", "iter_leaderboard", "iter_leaderboard_pages"):
        doc = inspect.getdoc(getattr(SyncClient, name)) or ""
        assert "aclose" not in doc, name
    doc = inspect.getdoc(SyncClient.__init__) or ""
    assert "session: refused (``ValueError``)" in doc


def annotations_of(method: Callable[..., Any]) -> list[str]:
    return [str(p.annotation) for p in inspect.signature(method).parameters.values()]


def test_the_signatures_name_only_public_types() -> None:
    for name, _, member in TWINS:
        if isinstance(member, property):
            continue
        for annotation in annotations_of(member):
            assert not re.search(r"(?<![\w.])_\w", annotation), (name, annotation)
