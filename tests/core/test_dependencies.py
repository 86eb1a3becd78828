"""Every third-party module the package imports is a declared runtime dependency, and every
dependency has a floor that the minimum set (``make matrix``) installs as it is."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

DIST = "asyncapi-client"


def _imported_by_the_package() -> set[str]:
    """Top-level names of modules imported at module level by what ``import asyncapi_client``
    loads (run in a fresh interpreter so that nothing else is loaded)."""
    code = (
        "import sys, asyncapi_client\n"
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items()"
        " if n.split('.')[0] == 'asyncapi_client' and getattr(m, '__file__', None)))"
    )
    files = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    names: set[str] = set()
    for file in files:
        for node in ast.parse(Path(file).read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"asyncapi_client"}


def test_every_imported_distribution_is_declared() -> None:
    requires = importlib.metadata.requires(DIST) or []
    declared = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in requires if "extra" not in r
    }
    providers = importlib.metadata.packages_distributions()
    imported = _imported_by_the_package()
    assert "yarl" in imported  # the check below sees the imports it is meant to see
    missing = {
        name: providers.get(name)
        for name in imported
        if not {d.lower() for d in providers.get(name, [name])} & declared
    }
    assert not missing, f"imported but not declared as dependencies: {missing}"


#: Set by `make matrix` for its minimum-set leg (uv's --resolution lowest-direct).
MINIMUM_SET_ENV = "ASYNCAPI_CLIENT_MINIMUM_SET"


def _floors(extras: tuple[str, ...]) -> dict[str, Version]:
    """Distribution name -> declared floor, for the runtime dependencies and ``extras``, where
    the requirement applies to this interpreter and platform."""
    floors: dict[str, Version] = {}
    for text in importlib.metadata.requires(DIST) or []:
        requirement = Requirement(text)
        applies = [
            extra
            for extra in ("", *extras)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra})
        ]
        if not applies or requirement.name == DIST:
            continue
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert lower, f"{text}: every dependency has a floor (>=)"
        floors[requirement.name] = Version(lower[0])
    return floors


def test_every_dependency_declares_a_floor_this_environment_meets() -> None:
    for name, floor in _floors(("redis", "test")).items():
        assert Version(importlib.metadata.version(name)) >= floor, name


@pytest.mark.skipif(
    not os.environ.get(MINIMUM_SET_ENV), reason="only in the minimum set (make matrix)"
)
def test_the_minimum_set_has_every_dependency_at_its_floor() -> None:
    """What `make matrix` runs the suite on is the declared floors themselves: a floor that
    the resolver had to raise (another floor needs more) would be a floor no one tested."""
    floors = _floors(("redis", "test"))
    assert {"aiohttp", "cattrs", "msgspec", "redis", "pytest-asyncio"} <= floors.keys()
    installed = {name: Version(importlib.metadata.version(name)) for name in floors}
    assert installed == floors
