"""Every private shortcut of the package, each behind its version gate, its public twin beside it.

A shortcut uses something a dependency (or CPython) does not document, to skip work on the
hot path. Each one here is chosen once, at import, only on the versions the whole suite was
run on with it and without it (``make matrix`` runs it once more with
``ASYNCAPI_CLIENT_PUBLIC_ONLY=1``, which turns every shortcut off), and its measured A/B is
in its docstring (benchmarks/ab-request-path.md has the runs). The modules that use a
shortcut call the functions here and nothing private of the dependency themselves, so
``grep _fastpaths`` finds every use.

aiohttp's shortcuts are decided here too, from the aiohttp *module* the HTTP adapter hands
in (:func:`aiohttp_shortcuts`): this module imports no HTTP library.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Final, NamedTuple

import attrs

__all__ = [
    "AIOHTTP_VERIFIED",
    "FAST_BUILD",
    "FAST_BUILD_VERIFIED",
    "PUBLIC_ONLY_ENV",
    "AiohttpShortcuts",
    "aiohttp_shortcuts",
    "builder_class",
]

#: Set (to anything but "" or "0") to use only the public paths.
PUBLIC_ONLY_ENV: Final = "ASYNCAPI_CLIENT_PUBLIC_ONLY"
_ALLOWED: Final = sys.implementation.name == "cpython" and os.environ.get(PUBLIC_ONLY_ENV, "") in (
    "",
    "0",
)

# --- the decoder's fast build (asyncapi_client/_decode.py) ---------------------------------

#: The CPython versions the decoder's fast build was verified on: each model made as an
#: instance of a private subclass whose ``__init__`` stores plain attributes, then given its
#: class by ``__class__`` assignment (same layout). Public twin: ``msgspec.convert`` into the
#: model. A/B: see docs/performance.md's decode figures (benchmarks ``decode``).
FAST_BUILD_VERIFIED: Final = ((3, 11), (3, 12), (3, 13))
FAST_BUILD: Final = _ALLOWED and sys.version_info[:2] in FAST_BUILD_VERIFIED


def builder_class(cls: type, converters: dict[str, Callable[[Any], Any]]) -> type:
    """A subclass of ``cls`` that attrs gives a plain ``__init__`` (each field stored, through
    its converter if it has one), with the same layout, so that an instance of it can become a
    ``cls`` by ``__class__`` assignment; TypeError if it cannot."""
    namespace = {
        "__slots__": (),
        "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__,
        "__doc__": f"Building {cls.__name__} instances (private to the decoder).",
    }
    these: dict[str, Any] = {
        field.name: attrs.field(converter=converters.get(field.name)) for field in attrs.fields(cls)
    }
    builder: type = attrs.define(
        type(f"_{cls.__name__}Builder", (cls,), namespace),
        these=these,
        slots=False,
        frozen=False,
        init=True,
        repr=False,
        eq=False,
        order=False,
        auto_detect=False,
        on_setattr=attrs.setters.NO_OP,
    )
    probe: Any = object.__new__(builder)
    probe.__class__ = cls  # a TypeError when the layouts differ: the public build is used
    return builder


# --- aiohttp (asyncapi_client/_http.py) ----------------------------------------------------

#: The aiohttp releases (major, minor) its shortcuts were verified on.
AIOHTTP_VERIFIED: Final = ((3, 14),)


class AiohttpShortcuts(NamedTuple):
    """Which of aiohttp's private shortcuts the adapter uses (each False: its public twin).

    - ``direct_request``: ``await session._request(...)``, the coroutine ``session.get()``
      wraps in a context manager whose ``__await__`` the interpreter resumes through a
      wrapper (our own session, no trace config). Twin: ``await session.get(...)``. A/B
      (``pool()`` CPU, twin / shortcut, 30 rounds): 1.017 at concurrency 64 and at 1.
    - ``default_headers_class``: our headers as the request class's ``DEFAULT_HEADERS``
      (``request_class`` is public, the attribute is not): as session headers they are
      copied into each request one by one. Twin: ``ClientSession(headers=...)``. A/B:
      1.020 at concurrency 64, 1.019 at 1.
    - ``no_retry_attribute``: aiohttp's resend after a dropped connection turned off with
      ``session._retry_connection`` (as aiohttp's own test client does). Twin: the
      adapter's ``_no_resend`` middleware (a middleware chain per request). A/B: 1.032 at
      concurrency 64, 1.014 at 1.
    - ``caller_middlewares``: a caller's session keeps its own middlewares when ours are
      added per request, read from ``session._middlewares``. No public twin (aiohttp does
      not show a session's middlewares): without it ours are not added and aiohttp may
      resend a request once after a dropped connection on a caller's session.
    """

    direct_request: bool
    default_headers_class: bool
    no_retry_attribute: bool
    caller_middlewares: bool


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def aiohttp_shortcuts(aiohttp: ModuleType) -> AiohttpShortcuts:
    """The shortcuts to use with this ``aiohttp`` module (all off on an unverified release,
    another interpreter, or with ``ASYNCAPI_CLIENT_PUBLIC_ONLY``)."""
    on = _ALLOWED and _release(aiohttp.__version__) in AIOHTTP_VERIFIED
    session, request = aiohttp.ClientSession, aiohttp.ClientRequest
    return AiohttpShortcuts(
        direct_request=on and hasattr(session, "_request"),
        default_headers_class=on and isinstance(getattr(request, "DEFAULT_HEADERS", None), Mapping),
        no_retry_attribute=on and "_retry_connection" in getattr(session, "ATTRS", ()),
        caller_middlewares=on,
    )


def direct_get(session: Any, url: Any) -> Any:
    """``session._request("GET", url)`` without redirects (see ``direct_request``)."""
    return session._request("GET", url, allow_redirects=False)


def turn_off_resend(session: Any) -> None:
    """aiohttp's resend after a dropped connection, off (see ``no_retry_attribute``)."""
    session._retry_connection = False


def middlewares_of(session: Any) -> tuple[Any, ...]:
    """A caller's session's own middlewares (see ``caller_middlewares``)."""
    return tuple(getattr(session, "_middlewares", ()))
