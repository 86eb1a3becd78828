"""MkDocs hooks: fail the strict build on an undocumented public name or one left out.

mkdocstrings renders what has a docstring and silently skips what has none, so a name added
to ``__all__`` without a docstring, or a public method without one, would simply be missing
from the site. After the build this hook walks the public API (``__all__`` of
``asyncapi_client``, ``asyncapi_client.fleet`` and ``asyncapi_client.testing``, and the
public members each exported class declares) and logs a warning, which ``strict: true`` turns
into a failed build, for each name that has no docstring or does not appear in the site's
object inventory.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

import griffe
from mkdocstrings import Inventory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from griffe_sphinx import PUBLIC_MODULES, SphinxHabits

LOG = logging.getLogger("mkdocs.plugins.asyncapi_client_docs")


def _is_enum(cls: griffe.Object) -> bool:
    """Whether ``cls`` derives from an ``enum`` class (read from the source, not imported:
    the docs build has no optional dependency such as redis-py)."""
    for base in getattr(cls, "bases", ()):
        path = base.canonical_path if isinstance(base, griffe.Expr) else str(base)
        if path.startswith("enum."):
            return True
        try:
            parent = cls.modules_collection[path]
        except KeyError:
            continue  # outside the package (typing.Generic, Exception...)
        if parent.is_class and _is_enum(parent):
            return True
    return False


def _listed(cls: griffe.Object) -> set[str]:
    """Attribute names the class documents: its own or its ``__init__``'s docstring lists
    them in an ``Attributes:`` or ``Args:`` section, or names them in code (```name```)."""
    names: set[str] = set()
    init = cls.members.get("__init__")
    for docstring in (cls.docstring, init.docstring if init is not None else None):
        if docstring is None:
            continue
        names.update(re.findall(r"`+([A-Za-z_][A-Za-z0-9_]*)`+", docstring.value))
        for section in docstring.parsed:
            if section.kind in (
                griffe.DocstringSectionKind.attributes,
                griffe.DocstringSectionKind.parameters,
            ):
                names.update(item.name for item in section.value)
    return names


def undocumented(package: griffe.Module) -> list[str]:
    """Every public name (exported, or a public member of an exported class) with no docs."""
    missing: list[str] = []
    for module_path in PUBLIC_MODULES:
        module = package.modules_collection[module_path]
        for name in module.exports or ():
            if name == "__version__":
                continue  # a version string: documented by what it is
            member = module.get_member(str(name))
            target = member.final_target if member.is_alias else member
            public = f"{module_path}.{name}"
            if not target.docstring:
                missing.append(public)
            if not target.is_class:
                continue
            listed = _listed(target)
            enum_class = _is_enum(target)
            for child_name, child in target.members.items():
                if child_name.startswith("_") or child.is_alias:
                    continue
                field = child.is_attribute and "property" not in child.labels
                if field and (enum_class or child_name in listed):
                    continue
                if not child.docstring:
                    missing.append(f"{public}.{child_name}")
    return missing


def _load() -> griffe.Module:
    loader = griffe.GriffeLoader(
        extensions=griffe.load_extensions(SphinxHabits),
        docstring_parser=griffe.Parser.google,
    )
    package = loader.load("asyncapi_client")
    for module_path in PUBLIC_MODULES[1:]:
        loader.load(module_path)
    loader.resolve_aliases(implicit=False, external=False)
    assert isinstance(package, griffe.Module)
    return package


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Warn (a failed strict build) for each public name undocumented or not in the site."""
    package = _load()
    for path in undocumented(package):
        LOG.warning("public name without a docstring: %s", path)
    inventory_file = Path(config["site_dir"]) / "objects.inv"
    with inventory_file.open("rb") as file:
        inventory = Inventory.parse_sphinx(file)  # the names the reference pages rendered
    for module_path in PUBLIC_MODULES:
        for name in package.modules_collection[module_path].exports or ():
            if name != "__version__" and f"{module_path}.{name}" not in inventory:
                LOG.warning("public name missing from the API reference: %s.%s", module_path, name)
