"""The stages one call goes through, outermost first: telemetry's span, the cache, the pipeline.

:class:`Calls` is what a :class:`~asyncapi_client.Client` hands every Request to. The client
builds each stage and hands it here (asyncapi_client/_client.py, ``Client.__init__``); this
class only chooses, per call, which stages the request passes: the cache for the operations
its ``ttl`` names, a span when telemetry is on, then the pipeline
(asyncapi_client/_pipeline.py), which ends at the sender (asyncapi_client/_http.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ._pipeline import Pipeline
from ._request import Outcome, Request, Response

if TYPE_CHECKING:  # imported only when a client asks for a cache or telemetry
    from ._cache import CacheStage
    from ._telemetry import Telemetry

__all__ = ["Calls"]

T = TypeVar("T")


class Calls:
    """Runs one client's Requests through its stages; ``whole``: each call returns the
    whole :class:`Response` (``client.with_response``) instead of the value."""

    __slots__ = ("_cache", "_pipeline", "_plain", "_telemetry", "whole")

    def __init__(
        self,
        pipeline: Pipeline,
        cache: CacheStage | None,
        telemetry: Telemetry | None,
        *,
        whole: bool = False,
    ) -> None:
        self._pipeline = pipeline
        self._cache = cache
        self._telemetry = telemetry
        self.whole = whole
        #: Each call straight to the pipeline, for its value (no cache, no span).
        self._plain = not whole and cache is None and telemetry is None

    @property
    def telemetry(self) -> Telemetry | None:
        """Telemetry's tracer and meters (None: telemetry is off)."""
        return self._telemetry

    def responses(self) -> Calls:
        """The same stages, each call returning the whole Response."""
        return Calls(self._pipeline, self._cache, self._telemetry, whole=True)

    def run(self, request: Request[T]) -> Coroutine[Any, Any, T]:
        """What a client's operation awaits: the value, or (``whole``) the Response."""
        if self._plain:
            return self._pipeline.value(request)
        if self.whole:
            return self.response(request)  # type: ignore[return-value]
        return self.value(request)

    def value(self, request: Request[T]) -> Coroutine[Any, Any, T]:
        """Run ``request`` for its decoded value (a plain method: no coroutine of its own)."""
        cache = self._cache
        if self._telemetry is not None:
            return self._traced_value(request)
        if cache is not None and cache.answers(request):
            return cache.value(request)
        return self._pipeline.value(request)

    async def response(self, request: Request[T]) -> Response[T]:
        """Run ``request`` for the whole :class:`Response`."""
        return Response(*await self._outcome(request))

    async def _traced_value(self, request: Request[T]) -> T:
        return (await self._outcome(request)).value

    def _outcome(self, request: Request[T]) -> Awaitable[Outcome[T]]:
        """The Outcome of ``request`` through the cache (when it answers the operation),
        inside the call's span (when telemetry is on)."""
        cache = self._cache
        send = (
            cache.outcome
            if cache is not None and cache.answers(request)
            else self._pipeline.outcome
        )
        if self._telemetry is not None:
            return self._telemetry.call(request, send)
        return send(request)

    async def conditional(
        self, request: Request[T], etag: str | None
    ) -> tuple[Outcome[T] | None, Mapping[str, str]]:
        """A watch's poll: ``request`` with ``If-None-Match: etag`` (when given), past the
        cache, inside its span; the Outcome, or None for a 304, and the answer's headers."""
        headers = None if etag is None else {"If-None-Match": etag}
        pipeline = self._pipeline
        if self._telemetry is None:
            outcome = await pipeline.outcome(request, headers)
        else:
            outcome = await self._telemetry.call(
                request, lambda sent: pipeline.outcome(sent, headers)
            )
        if outcome.status == 304:  # only ever to a conditional request
            return None, outcome.headers
        return outcome, outcome.headers
