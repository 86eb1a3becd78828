"""A griffe extension: the code's Sphinx habits, rendered by mkdocstrings.

The docstrings are Google style, with two Sphinx habits that ``help()`` reads well and
Markdown does not: roles (``:class:`Network```, ``:meth:`close```) and ``#:`` comments above
a constant or type alias. This extension turns each role into a cross-reference to the public
name it resolves to (a link in the site, checked by autorefs: a role that names nothing fails
the strict build), or into plain code for names outside the public API; it reads ``#:``
comments as the docstring of the assignment below them, and turns a paragraph ending in
``::`` and the indented block after it into a fenced code block.
"""

from __future__ import annotations

import builtins
import re
import textwrap
from typing import Any

import griffe

__all__ = ["SphinxHabits", "public_paths"]

LOGGER = griffe.get_logger("griffe_sphinx")
ROLE = re.compile(
    r":(?:class|meth|func|data|attr|exc|mod|obj|const):`(~?)([^`<]+?)(?:\s*<([^>]+)>)?`"
)
LITERAL = re.compile(
    r"^(?P<indent>[ ]*)(?P<text>.*?)::\n\n(?P<block>(?:(?P=indent)[ ]+.*\n|\n)+)", re.M
)
#: The modules whose ``__all__`` is the public API (the reference renders each).
PUBLIC_MODULES = ("asyncapi_client", "asyncapi_client.fleet", "asyncapi_client.testing")


def public_paths(package: griffe.Module) -> dict[str, str]:
    """Canonical path -> public path, for every name the public modules export."""
    paths: dict[str, str] = {}
    for module_path in PUBLIC_MODULES:
        module = package.modules_collection[module_path]
        assert isinstance(module, griffe.Module)
        for name in module.exports or ():
            member = module.get_member(str(name))
            target = member.final_target if member.is_alias else member
            paths.setdefault(target.path, f"{module_path}.{name}")
    return paths


def _public(path: str, paths: dict[str, str]) -> str | None:
    """The public path of ``path`` or of the class it is a member of."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        public = paths.get(".".join(parts[:cut]))
        if public is not None:
            return ".".join([public, *parts[cut:]])
    return None


def _resolve(obj: griffe.Object, name: str) -> str | None:
    """The canonical path ``name`` means in ``obj``'s scope, or None."""
    first, dot, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            resolved = scope.resolve(first)
        except griffe.NameResolutionError:
            scope = scope.parent
            continue
        path = f"{resolved}{dot}{rest}"
        try:
            target = obj.modules_collection[path]
        except KeyError:
            return path
        return str(target.final_target.path if target.is_alias else target.path)
    return None


class SphinxHabits(griffe.Extension):
    """Sphinx roles to cross-references, ``#:`` comments to docstrings, ``::`` to fences."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, agent: Any, **kwargs: Any) -> None:
        """Read the ``#:`` comment lines right above an undocumented assignment."""
        if attr.docstring is not None or attr.lineno is None:
            return
        lines = attr.module.lines
        comment: list[str] = []
        index = attr.lineno - 2
        while index >= 0 and lines[index].lstrip().startswith("#:"):
            comment.insert(0, lines[index].lstrip()[2:].strip())
            index -= 1
        if comment:
            attr.docstring = griffe.Docstring(
                "\n".join(comment),
                lineno=index + 2,
                parent=attr,
                parser=getattr(agent, "docstring_parser", None),
                parser_options=getattr(agent, "docstring_options", None),
            )

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite every docstring of the package once it is loaded."""
        if pkg.path != "asyncapi_client":
            return
        paths = public_paths(pkg)
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _rewrite(obj, obj.docstring.value, paths)


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            assert isinstance(member, griffe.Object)
            found += _walk(member)
    return found


def _rewrite(obj: griffe.Object, text: str, paths: dict[str, str]) -> str:
    def fence(match: re.Match[str]) -> str:
        indent, block = match["indent"], textwrap.dedent(match["block"]).strip("\n")
        lead = f"{match['text']}:" if match["text"].strip() else ""
        code = textwrap.indent(f"```\n{block}\n```", indent)
        return f"{indent}{lead}\n\n{code}\n\n" if lead else f"{code}\n\n"

    def role(match: re.Match[str]) -> str:
        short, name, target = match[1], match[2].strip(), match[3]
        where = (target or name).strip().lstrip("~")
        shown = where.rsplit(".", 1)[-1] if short else name
        resolved = where if where.startswith("asyncapi_client.") else _resolve(obj, where)
        public = _public(resolved, paths) if resolved else None
        if public is not None:
            return f"[`{shown}`][{public}]"
        local = "." not in where and not where.startswith("_") and not hasattr(builtins, where)
        if resolved is None and local:
            LOGGER.warning("%s: the role %r names nothing in scope", obj.path, match[0])
        return f"`{shown}`"

    return ROLE.sub(role, LITERAL.sub(fence, text + "\n")).rstrip("\n")
