"""Packaging: version from the installed metadata, py.typed shipped, entry points declared,
and what importing the package costs a process (every CLI run and fleet worker pays it)."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

import asyncapi_client
from tests._oracle import pool_json

DIST = "asyncapi-client"
ROOT = Path(__file__).resolve().parents[2]


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


#: Run in a fresh interpreter: import the package and the CLI, decode good bodies, report.
_STARTUP = """
import sys
import asyncapi_client, asyncapi_client._cli._main
from asyncapi_client import _decode
assert _decode.POOL(sys.argv[1].encode()).pool_id == "p1"
print(sorted(m for m in ("importlib.metadata", "opentelemetry") if m in sys.modules))
print(_decode._converter.cache_info().currsize)
"""


def test_starting_up_loads_no_metadata_and_builds_no_detailed_converter() -> None:
    """The version is a constant and the cattrs converter (error paths, to_wire) is made on
    first use: together about 115 ms off every start that decodes only good bodies."""
    run = subprocess.run(
        [sys.executable, "-c", _STARTUP, orjson.dumps(pool_json()).decode()],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert run.stdout.splitlines() == ["[]", "0"]


def _make_variable(name: str) -> list[str]:
    if not ROOT.joinpath("Makefile").is_file():  # an sdist ships the tests, not the Makefile
        pytest.skip("no Makefile beside the tests")
    found = re.search(rf"^{name}\s*\?=\s*(.*)$", ROOT.joinpath("Makefile").read_text(), re.M)
    assert found is not None, name
    return found.group(1).split()


def test_the_classifiers_name_exactly_the_pythons_make_matrix_requires() -> None:
    """A Python is claimed only where `make matrix` must find it and run the whole suite on it;
    the floor of requires-python is the one the minimum set runs on."""
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["project"]
    claimed = {
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    required = _make_variable("MATRIX_REQUIRED")
    assert claimed == set(required)
    (minimum,) = _make_variable("MATRIX_MINIMUM")
    lowest = min(required, key=lambda v: tuple(map(int, v.split("."))))
    assert project["requires-python"] == f">={minimum}"
    assert minimum == lowest
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert running in set(required) | set(_make_variable("MATRIX_OPTIONAL"))


def test_the_decoders_fast_build_is_verified_only_where_make_matrix_runs() -> None:
    """A version-gated shortcut is "verified" on a Python only if `make matrix` must run the
    suite there, both with it and (the public-only leg) without it."""
    from asyncapi_client import _fastpaths

    verified = {f"{major}.{minor}" for major, minor in _fastpaths.FAST_BUILD_VERIFIED}
    assert verified <= set(_make_variable("MATRIX_REQUIRED"))
