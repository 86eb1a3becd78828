"""Packaging: version from the installed metadata, py.typed shipped, entry points declared."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re

import asyncapi_client

DIST = "asyncapi-client"


def test_version_matches_the_installed_metadata() -> None:
    assert asyncapi_client.__version__ == importlib.metadata.version(DIST)
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", asyncapi_client.__version__)


def test_py_typed_is_shipped() -> None:
    marker = importlib.resources.files("asyncapi_client") / "py.typed"
    assert marker.is_file()


def test_console_script_entry_point() -> None:
    (script,) = [
        ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == DIST
    ]
    assert script.value == "asyncapi_client._cli:main"
    assert callable(script.load())


def test_pytest_plugin_entry_point_is_declared() -> None:
    plugins = [
        ep
        for ep in importlib.metadata.entry_points(group="pytest11")
        if ep.dist is not None and ep.dist.name == DIST
    ]
    assert len(plugins) == 1
    assert plugins[0].value.startswith("asyncapi_client.testing")


def test_python_requirement_and_runtime_dependencies() -> None:
    meta = importlib.metadata.metadata(DIST)
    assert meta["Requires-Python"] == ">=3.11"
    requires = importlib.metadata.requires(DIST) or []
    runtime = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in requires if "extra" not in r
    }
    assert {"aiohttp", "attrs", "cattrs"} <= runtime


def test_test_extra_names_the_tools() -> None:
    requires = importlib.metadata.requires(DIST) or []
    test_extra = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower()
        for r in requires
        if re.search(r"extra\s*==\s*['\"]test['\"]", r)
    }
    assert {
        "pytest",
        "pytest-asyncio",
        "aioresponses",
        "hypothesis",
        "coverage",
        "mypy",
        "ruff",
    } <= test_extra
