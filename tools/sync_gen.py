"""Writes SyncClient's methods from Client's own code (``with_response`` is made from them).

``python tools/sync_gen.py`` (from the project's virtualenv, whose ruff formats the result)
rewrites the regions between the ``generated`` markers of ``asyncapi_client/_sync.py``;
``--check`` only says whether they are up to date (exit status 1 when not). ``make test``
runs the check and tests/sync/test_sync_typing.py the generator, so the two clients cannot
drift. A development tool of the repository: not part of the installed package.

Each public member of the async class becomes, with the same parameters (names, kinds,
annotations and defaults, copied from the syntax tree) and the same docstring:

- an ``async def`` operation: a ``def`` that runs it on the client's loop and returns its
  result;
- a ``def`` returning ``Walk[T]`` (a stream): a ``def`` returning ``SyncWalk[T]``;
- a ``def`` returning ``Watch[T]``: a ``def`` returning ``SyncWatch[T]``;
- a property or any other ``def``: the same, delegated to the async client.

Members written by hand in ``_sync.py`` (``close``, the context manager) are skipped; a
member of a kind not listed above stops the generator, so that a new kind gets a decision.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

__all__ = ["generate", "main"]

_ROOT: Final = Path(__file__).resolve().parent.parent
_PACKAGE: Final = _ROOT / "asyncapi_client"
SOURCE: Final = _PACKAGE / "_client.py"
TARGET: Final = _PACKAGE / "_sync.py"
#: How to run the generator, as its messages name it.
COMMAND: Final = "python tools/sync_gen.py"

#: Members of Client written by hand in _sync.py (or with no blocking twin).
_HANDWRITTEN: Final = frozenset({"close", "__aenter__", "__aexit__"})

#: Docstring edits: (old, new) pairs, each of which must match (a changed Client docstring
#: makes the generator fail instead of writing a wrong one).
_DOC_EDITS: Final[dict[tuple[str, str], tuple[tuple[str, str], ...]]] = {
    ("Client", "__init__"): (
        (
            "Set up a client; nothing connects until the first call.",
            "Set up a client and start its thread; nothing connects until the first call.",
        ),
        (
            "session: an ``aiohttp.ClientSession`` you own; never closed by the client.",
            "session: refused (``ValueError``): an aiohttp session works only on the loop it "
            "was\n                made on, and a SyncClient runs a loop of its own.",
        ),
    ),
    ("Client", "iter_order_pages"): (
        ("with ``aclose()`` or ``contextlib.aclosing``", "with ``close()`` or ``with``"),
    ),
}


def _edit_doc(cls: str, name: str, doc: str) -> str:
    """The async member's docstring as the blocking twin's."""
    for old, new in _DOC_EDITS.get((cls, name), ()):
        if old not in doc:
            raise SystemExit(f"{cls}.{name}'s docstring no longer has {old!r}: update sync_gen")
        doc = doc.replace(old, new)
    return doc.replace(":meth:`Client.", ":meth:`SyncClient.")


def _is_walk(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Walk"


def _is_watch(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Watch"


def _call_arguments(args: ast.arguments, where: str) -> str:
    """``a, b, *, c=c`` as the call that forwards every parameter of ``args`` (less self)."""
    if args.vararg is not None or args.kwarg is not None:
        raise SystemExit(f"{where}: *args/**kwargs are not supported by sync_gen")
    positional = [a.arg for a in [*args.posonlyargs, *args.args][1:]]
    keywords = [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    return ", ".join([*positional, *keywords])


def _body(statement: str, doc: str | None) -> list[ast.stmt]:
    body: list[ast.stmt] = []
    if doc is not None:
        body.append(ast.Expr(ast.Constant(doc)))
    body.extend(ast.parse(statement).body)
    return body


def _twin(cls: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | None:
    """The blocking twin of one member of the async class, or None for a member skipped."""
    name = node.name
    if name in _HANDWRITTEN or (name.startswith("_") and (name, cls) != ("__init__", "Client")):
        return None
    where = f"{cls}.{name}"
    decorators = [ast.unparse(d) for d in node.decorator_list]
    doc = ast.get_docstring(node, clean=False)
    if doc is not None:
        doc = _edit_doc(cls, name, doc)
    returns = node.returns
    if decorators == ["property"] and isinstance(node, ast.FunctionDef):
        statement = f"return self._target.{name}"
    elif decorators:
        raise SystemExit(f"{where}: decorators {decorators} are not supported by sync_gen")
    else:
        call = f"self._target.{name}({_call_arguments(node.args, where)})"
        if name == "__init__":
            statement = f"self._start({_call_arguments(node.args, where)})"
        elif isinstance(node, ast.AsyncFunctionDef):
            statement = f"return self._run({call})"
        elif _is_walk(returns):
            assert isinstance(returns, ast.Subscript)
            returns = ast.Subscript(ast.Name("SyncWalk"), returns.slice)
            statement = f"return SyncWalk(self, {call})"
        elif _is_watch(returns):
            assert isinstance(returns, ast.Subscript)
            returns = ast.Subscript(ast.Name("SyncWatch"), returns.slice)
            statement = f"return SyncWatch(self, {call})"
        elif returns is not None and ast.unparse(returns) == "None":
            statement = call
        else:
            statement = f"return {call}"
    twin = ast.FunctionDef(
        name=name,
        args=node.args,
        body=_body(statement, doc),
        decorator_list=node.decorator_list,
        returns=returns,
        type_comment=None,
    )
    twin.type_params = []  # type: ignore[attr-defined,unused-ignore]  # Python 3.12+
    return ast.fix_missing_locations(twin)


def _methods(tree: ast.Module, cls: str) -> str:
    """The twins of every public member of ``cls``, as source indented for a class body."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            break
    else:
        raise SystemExit(f"no class {cls} in {SOURCE.name}")
    twins: list[ast.stmt] = []
    for member in node.body:
        if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
            twin = _twin(cls, member)
            if twin is not None:
                twins.append(twin)
        elif not (isinstance(member, ast.Expr | ast.Assign | ast.AnnAssign)):
            raise SystemExit(f"{cls}: a member of kind {type(member).__name__} is not supported")
    holder = ast.ClassDef(name="Holder", bases=[], keywords=[], body=twins, decorator_list=[])
    holder.type_params = []  # type: ignore[attr-defined,unused-ignore]  # Python 3.12+
    source = ast.unparse(ast.fix_missing_locations(holder))
    # the methods at one level of indentation (unparse puts a blank line before each)
    return source.split("\n", 1)[1].strip("\n")


#: (name of the region in _sync.py, async class it is generated from)
_REGIONS: Final = (("SyncClient", "Client"),)


def _begin_marker(region: str, cls: str) -> str:
    return f"    # --- generated: {region} from {cls} ({COMMAND}) ---"


_END_MARKER: Final = "    # --- end generated ---"


def _format(text: str) -> str:
    """``text`` as ``ruff format`` writes it (with the project's settings)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--stdin-filename",
            str(_PACKAGE / "_sync.py"),
            "-",
        ],
        input=text,
        capture_output=True,
        text=True,
        check=False,
        cwd=_ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"ruff format failed (run this with the project's virtualenv: "
            f".venv/bin/python tools/sync_gen.py):\n{done.stderr}"
        )
    return done.stdout


def generate(current: str, source: str, formatter: Callable[[str], str] = _format) -> str:
    """``current`` (the text of _sync.py) with its generated regions rewritten from ``source``
    (the text of _client.py)."""
    tree = ast.parse(source)
    text = current
    for region, cls in _REGIONS:
        begin = _begin_marker(region, cls)
        start = text.find(begin + "\n")
        end = text.find(_END_MARKER, start)
        if start < 0 or end < 0:
            raise SystemExit(f"{TARGET.name} has no region {begin.strip()!r} ... end generated")
        start += len(begin) + 1
        text = f"{text[:start]}{_methods(tree, cls)}\n\n{text[end:]}"
    return formatter(text)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    current = TARGET.read_text(encoding="utf-8")
    wanted = generate(current, SOURCE.read_text(encoding="utf-8"))
    if "--check" in args:
        if wanted != current:
            print(f"{TARGET} is out of date: run {COMMAND}")
            return 1
        return 0
    if wanted != current:
        TARGET.write_text(wanted, encoding="utf-8")
        print(f"rewrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
