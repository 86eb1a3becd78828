"""OpenTelemetry spans and metrics for each operation call (``Client(telemetry=True)``).

Only ``opentelemetry-api`` is used (extra ``asyncapi-client[otel]``), through the global
tracer and meter providers the application set up; this module is imported only when a
client asks for telemetry, so without it nothing of OpenTelemetry is imported.

One span per operation call (each page of a walk is one), kind CLIENT, named
``asyncapi_client.<operation>``; an event ``retry`` per retry; the histogram
``asyncapi_client.operation.duration`` (seconds) and the counter ``asyncapi_client.retries``.
A watch's poll is a span ``asyncapi_client.watch.poll`` (its requests' spans inside it), and
the changes it saw add to the counter ``asyncapi_client.watch.changes``. What the server's
rate-limit headers last said is shown by the gauges ``asyncapi_client.ratelimit.remaining``
and ``asyncapi_client.ratelimit.limit`` (per network; read when the metrics are collected).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TypeVar

from yarl import URL

from ._errors import ApiError, StatusError
from ._network import Network
from ._request import Outcome, Request
from ._retry import RetryEvent

try:
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "telemetry=True needs OpenTelemetry: pip install 'asyncapi-client[otel]'"
    ) from exc

__all__ = ["Telemetry"]

T = TypeVar("T")

OPERATION = "asyncapi_client.operation"
WATCH = "asyncapi_client.watch"
NETWORK = "asyncapi_client.network"
ATTEMPTS = "asyncapi_client.attempts"
ERROR_TYPE = "error.type"
STATUS_CODE = "http.response.status_code"
CACHE = "asyncapi_client.cache"


#: Per network, the remaining and the limit the last answer's headers said (any client of
#: the process), shown by the gauges made once per process.
_REMAINING: dict[Network, int] = {}
_LIMIT: dict[Network, int] = {}
_gauges: list[object] = []


def _make_gauges(meter: metrics.Meter) -> None:
    """The rate-limit gauges, made once per process (the first client with telemetry)."""
    if _gauges:
        return
    _gauges.append(
        meter.create_observable_gauge(
            "asyncapi_client.ratelimit.remaining",
            callbacks=[functools.partial(_observe, _REMAINING)],
            unit="{request}",
            description="Requests the server's rate-limit headers last said remain",
        )
    )
    _gauges.append(
        meter.create_observable_gauge(
            "asyncapi_client.ratelimit.limit",
            callbacks=[functools.partial(_observe, _LIMIT)],
            unit="{request}",
            description="The limit per window the server's rate-limit headers last said",
        )
    )


def _observe(values: dict[Network, int], options: CallbackOptions) -> Iterable[Observation]:
    return [Observation(n, {NETWORK: network.value}) for network, n in list(values.items())]


class Telemetry:
    """The library's tracer, histogram and counter, named for it and its version."""

    def __init__(self, version: str) -> None:
        self._tracer = trace.get_tracer("asyncapi_client", version)
        meter = metrics.get_meter("asyncapi_client", version)
        self._duration = meter.create_histogram(
            "asyncapi_client.operation.duration",
            unit="s",
            description="Duration of an operation call, retries and waits included",
        )
        self._retries = meter.create_counter(
            "asyncapi_client.retries",
            unit="{retry}",
            description="Retries of operation calls",
        )
        self._changes = meter.create_counter(
            "asyncapi_client.watch.changes",
            unit="{change}",
            description="Changes the watches saw",
        )
        self._hosts: dict[str, str] = {}
        _make_gauges(meter)

    def quota(self, network: Network, remaining: int, limit: int | None) -> None:
        """What an answer's rate-limit headers said, for the gauges (of every client of
        the process: the last answer read for each network)."""
        _REMAINING[network] = remaining
        if limit is not None:
            _LIMIT[network] = limit

    @contextlib.contextmanager
    def poll(self, watch: str) -> Iterator[Callable[[int], None]]:
        """The span of one poll of a ``watch`` (``"orders"``...); what it yields counts the
        changes the poll saw."""
        with self._tracer.start_as_current_span(
            "asyncapi_client.watch.poll", kind=SpanKind.INTERNAL, attributes={WATCH: watch}
        ) as span:

            def saw(changes: int) -> None:
                span.set_attribute("asyncapi_client.watch.changes", changes)
                if changes:
                    self._changes.add(changes, {WATCH: watch})

            yield saw

    def _server(self, url: str) -> str:
        origin = url.split("/api/", 1)[0]
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = URL(origin).host or ""
        return host

    async def call(
        self, request: Request[T], send: Callable[[Request[T]], Awaitable[Outcome[T]]]
    ) -> Outcome[T]:
        """Run ``send(request)`` inside its span, and record its duration."""
        labels = {OPERATION: request.operation, NETWORK: request.network.value}
        attributes = {
            **labels,
            "url.template": request.template,
            "server.address": self._server(request.url),
        }
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"asyncapi_client.{request.operation}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                outcome = await send(request)
            except Exception as exc:
                kind = type(exc).__name__
                if isinstance(exc, ApiError):
                    span.set_attribute(ATTEMPTS, exc.attempts)
                if isinstance(exc, StatusError):
                    span.set_attribute(STATUS_CODE, exc.status)
                span.set_attribute(ERROR_TYPE, kind)
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                self._duration.record(time.perf_counter() - started, {**labels, ERROR_TYPE: kind})
                raise
            span.set_attribute(STATUS_CODE, outcome.status)
            span.set_attribute(ATTEMPTS, outcome.attempts)
            if outcome.cache is not None:  # the cache stage's answer
                span.set_attribute(CACHE, outcome.cache)
            self._duration.record(time.perf_counter() - started, labels)
            return outcome

    def retry(self, event: RetryEvent) -> None:
        """A ``retry`` event on the call's span, and one more on the retry counter."""
        trace.get_current_span().add_event(
            "retry",
            {"attempt": event.attempt, "wait": event.wait, ERROR_TYPE: type(event.error).__name__},
        )
        self._retries.add(1, {OPERATION: event.operation, NETWORK: event.network.value})
