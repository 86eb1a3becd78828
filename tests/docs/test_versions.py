"""The dependency floors the docs state are the ones ``pyproject.toml`` declares.

A guide that says ``redis>=5.0.1`` where the package requires 5.0.2 sends a reader to a
version the suite found broken. Every ``NAME>=VERSION`` in the README and the docs, and each
row of the platforms guide's table of floors, is checked against ``pyproject.toml``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
STATED = re.compile(r"\b([A-Za-z][\w.-]*)>=(\d[\w.]*)")
#: A row of the platforms guide's table: ``| redis (extra `redis`) | 5.0.2 | why |``.
ROW = re.compile(r"^\| ([a-z][\w-]*)(?: \(extra[^)]*\))? \| (\d[\w.]*) \|", re.MULTILINE)


def floors() -> dict[str, str]:
    """Every declared requirement's floor, by canonical name, the extras' included (the
    highest where two name one: the bench extra's msgspec floor is below the package's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += extra
    found: dict[str, str] = {}
    for line in lines:
        requirement = Requirement(line)
        for spec in requirement.specifier:
            name = canonicalize_name(requirement.name)
            if spec.operator == ">=" and Version(spec.version) > Version(found.get(name, "0")):
                found[name] = spec.version
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_each_stated_floor_is_the_declared_one(page: Path) -> None:
    declared = floors()
    shown = page.relative_to(ROOT)
    for name, version in STATED.findall(page.read_text(encoding="utf-8")):
        key = canonicalize_name(name)
        if key in declared:
            assert version == declared[key], (
                f"{shown}: {name}>={version}, pyproject: {key}>={declared[key]}"
            )


def test_the_platforms_table_lists_the_declared_floors() -> None:
    text = (ROOT / "docs" / "guides" / "platforms.md").read_text(encoding="utf-8")
    rows = dict(ROW.findall(text))
    declared = floors()
    assert "redis" in rows, "the platforms guide's table of floors was not found"
    for name, version in rows.items():
        assert declared.get(canonicalize_name(name)) == version, (name, version)
