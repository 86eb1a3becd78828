"""docs/architecture.md names the code as it is: every module, class and ``Class.member`` it
writes in code type (or draws in its diagram) exists in the package, so renaming one fails
here until the page follows.

The package is read as source (its syntax trees), never imported: the optional extras a
module needs (redis-py, OpenTelemetry, pyarrow) play no part.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "asyncapi_client"
PAGE = ROOT / "docs" / "architecture.md"

#: Inline code spans (the page's fenced blocks are taken out first).
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCED = re.compile(r"^(`{3,})(\w*)\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
#: ``_pipeline.py``, ``asyncapi_client/_http.py``, ``testing/_server.py``, ``_cli/``: below
#: the package (``_gate.py`` is ``asyncapi_client/_gate.py``, never ``testing/_gate.py``).
_PATH = re.compile(rf"(?:{_IDENTIFIER}/)*(?:{_IDENTIFIER}\.py|{_IDENTIFIER}/)")
#: ``Pipeline._attempts``, ``_retry.decide``, ``asyncapi_client.testing``, ``Calls.run()``.
_DOTTED = re.compile(rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})+")
#: ``CacheStage``, ``AiohttpSender``: a capitalised name with a lower-case letter in it
#: (``ENDPOINTS``, ``GET`` and ``C901`` are constants or words, not classes).
_CLASS = re.compile(r"_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")
#: ``ENDPOINTS``, ``FAST_BUILD``: a constant of the package (an environment variable is
#: written with its value, ``NAME=1``, and is not one).
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,}")
#: Paths outside the package, written relative to the repository: not the package's names.
_ELSEWHERE = ("tests/", "tools/", "docs/", "benchmarks/", "site/", ".venv/", "../")


@attrs.frozen
class Package:
    """What the package defines, read from its source: ``modules`` (dotted names) with their
    top-level names, ``classes`` (by name, from any module) with their members."""

    files: frozenset[str]  # paths below the package: "_http.py", "testing/_server.py"
    folders: frozenset[str]  # "_cli/", "testing/"
    modules: dict[str, frozenset[str]]  # "asyncapi_client._http" -> its top-level names
    classes: dict[str, frozenset[str]]  # "Pipeline" -> its members (of every class so named)

    @property
    def names(self) -> frozenset[str]:
        """Every top-level name of every module (``OperationName`` is an alias, not a class)."""
        return frozenset().union(*self.modules.values())


def _targets(node: ast.stmt) -> Iterable[str]:
    """The names a statement of a module or class body defines."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    yield name.id
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            yield (alias.asname or alias.name).partition(".")[0]
    elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING imports, guarded definitions
        for branch in (node.body, node.orelse, getattr(node, "handlers", [])):
            for child in branch:
                body = child.body if isinstance(child, ast.ExceptHandler) else [child]
                for statement in body:
                    yield from _targets(statement)


def _members(cls: ast.ClassDef) -> set[str]:
    """A class's own members: what its body defines, and what its methods set on ``self``."""
    members = {name for node in cls.body for name in _targets(node)}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            members.add(node.attr)
    return members


def read_package(root: Path) -> Package:
    """The modules, classes and members of the package under ``root``."""
    files: set[str] = set()
    folders: set[str] = set()
    modules: dict[str, frozenset[str]] = {}
    own: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        files.add(relative.as_posix())
        folders.update(f"{parent.as_posix()}/" for parent in relative.parents if parent.parts)
        parts = [root.name, *relative.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules[".".join(parts)] = frozenset(n for node in tree.body for n in _targets(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own.setdefault(node.name, set()).update(_members(node))
                bases.setdefault(node.name, set()).update(
                    base.id if isinstance(base, ast.Name) else ast.unparse(base).rpartition(".")[2]
                    for base in node.bases
                )

    def inherited(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found = set(own.get(name, ()))
        for base in bases.get(name, ()):
            base = base.partition("[")[0]  # Generic[T], Walk[T]
            if base in own and base not in seen:
                found |= inherited(base, seen | {name})
        return found

    return Package(
        files=frozenset(files),
        folders=frozenset(folders),
        modules=modules,
        classes={name: frozenset(inherited(name)) for name in own},
    )


def spans(text: str) -> list[str]:
    """The names a Markdown page gives: its inline code spans, and each word of its ```text
    drawings (other fenced blocks are commands), each stripped of a trailing call
    (``Calls.run()`` is ``Calls.run``)."""
    found = [span.strip() for span in _SPAN.findall(_FENCED.sub("", text))]
    for _, info, body in _FENCED.findall(text):
        if info == "text":
            found += [word.strip(",;:|") for word in body.split()]
    return [re.sub(r"\(.*\)$", "", span) for span in found]


def _module(dotted: str, package: Package) -> str | None:
    """The package module ``dotted`` names: ``asyncapi_client._http``, or ``_http`` /
    ``testing`` / ``_cli._main`` below the package; None when it names none."""
    for name in (dotted, f"{PACKAGE.name}.{dotted}"):
        if name in package.modules:
            return name
    return None


def problem(span: str, package: Package) -> str | None:
    """What is wrong with one code span of the page, or None (also for spans that are not
    names of the package: commands, values, paths outside it)."""
    if span.startswith(_ELSEWHERE) or " " in span:
        return None
    if _PATH.fullmatch(span):
        path = span.removeprefix(f"{PACKAGE.name}/")
        if not path:
            return None  # the package itself
        if path.endswith("/"):
            return None if path in package.folders else f"no folder asyncapi_client/{path}"
        return None if path in package.files else f"no module asyncapi_client/{path}"
    if _DOTTED.fullmatch(span):
        head, _, rest = span.rpartition(".")
        module = _module(head, package)
        if module is not None:
            if rest in package.modules[module] or _module(span, package) is not None:
                return None
            return f"{module} has no {rest}"
        if _module(span, package) is not None:
            return None
        owner = head.rpartition(".")[2]
        if _CLASS.fullmatch(owner):
            members = package.classes.get(owner)
            if members is None:
                return f"no class {owner} in the package"
            return None if rest in members else f"{owner} has no member {rest}"
        if span.startswith(("_", f"{PACKAGE.name}.")):
            return f"no module {head} in the package"
        return None  # a dotted name of something else (aiohttp.ClientSession)
    if _CLASS.fullmatch(span):
        if span in package.names or hasattr(builtins, span):
            return None
        return f"no class {span} in the package"
    if _CONSTANT.fullmatch(span) and span not in package.names:
        return f"no constant {span} in the package"
    return None


def problems(text: str, package: Package) -> list[str]:
    """Every code span of ``text`` that names something the package does not have."""
    found = []
    for span in spans(text):
        wrong = problem(span, package)
        if wrong is not None:
            found.append(f"`{span}`: {wrong}")
    return found


@pytest.fixture(scope="module")
def package() -> Package:
    """The package as this checkout has it."""
    return read_package(PACKAGE)


def test_every_name_the_page_gives_is_in_the_package(package: Package) -> None:
    """A contributor follows the page's names into the code: each one must be there."""
    assert problems(PAGE.read_text(encoding="utf-8"), package) == []


def test_the_page_names_the_request_path_by_its_stages() -> None:
    """The names a reader follows from ``Client.pool`` to the sender are on the page (and so
    checked above): the check has something to check."""
    found = set(spans(PAGE.read_text(encoding="utf-8")))
    path = [
        "Client.pool",
        "Client._wire",
        "Endpoint.request",
        "Calls.run",
        "Telemetry.call",
        "CacheStage",
        "Pipeline.outcome",
        "Pipeline._attempts",
        "Pipeline._after_failure",
        "LimiterStage.admit",
        "AiohttpSender.send",
        "Upstream",
    ]
    assert [name for name in path if name not in found] == []


def test_a_renamed_name_is_reported(package: Package) -> None:
    """The checker itself: each kind of name the page writes, right and wrong."""
    text = (
        "`Pipeline.outcome` `Pipeline._attempts` `_retry.decide` `_http._translate` "
        "`asyncapi_client/_gate.py` `_calls.py` `testing/_server.py` `_cli/` "
        "`asyncapi_client.testing` `CacheStage` `ValueError` `aiohttp.ClientSession` "
        "`make test` `tests/_rawserver.py` `ENDPOINTS` `OperationName` `asyncapi_client/` "
        "`FAST_BUILD` `C901` `GET` `NAME=1`\n"
        "```sh\npython3 ../tools/check.py Pipeline.nothing\n```\n"
    )
    assert problems(text, package) == []
    wrong = (
        "`Pipeline.outcomes` `Piepline.outcome` `_retry.decides` `_pipelines.py` "
        "`asyncapi_client/_gates.py` `_cli/_mian.py` `CacheStages` `walks/` `END_POINTS` "
        "`_gates._refuse_past` `asyncapi_client.fleets.RedisLimiter`\n"
        "```text\nClient.pool(id)  |-- Pipeline.nothing, then _fetch.py\n```\n"
    )
    assert problems(wrong, package) == [
        "`Pipeline.outcomes`: Pipeline has no member outcomes",
        "`Piepline.outcome`: no class Piepline in the package",
        "`_retry.decides`: asyncapi_client._retry has no decides",
        "`_pipelines.py`: no module asyncapi_client/_pipelines.py",
        "`asyncapi_client/_gates.py`: no module asyncapi_client/_gates.py",
        "`_cli/_mian.py`: no module asyncapi_client/_cli/_mian.py",
        "`CacheStages`: no class CacheStages in the package",
        "`walks/`: no folder asyncapi_client/walks/",
        "`END_POINTS`: no constant END_POINTS in the package",
        "`_gates._refuse_past`: no module _gates in the package",
        "`asyncapi_client.fleets.RedisLimiter`: no module asyncapi_client.fleets in the package",
        "`Pipeline.nothing`: Pipeline has no member nothing",
        "`_fetch.py`: no module asyncapi_client/_fetch.py",
    ]
