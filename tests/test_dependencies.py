"""Every third-party module the package imports is a declared runtime dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

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
