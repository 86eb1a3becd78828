"""The real OpenTelemetry SDK's in-memory span exporter and metric reader, shared by every
test module that looks at spans or metrics (no mocks).

The SDK's providers are global and can be set once per process: :func:`install_providers`
sets them on its first call and does nothing after, whichever module runs first.
"""

from __future__ import annotations

import functools

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["EXPORTER", "READER", "install_providers", "spans"]

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader(
    preferred_temporality={
        Counter: AggregationTemporality.DELTA,
        Histogram: AggregationTemporality.DELTA,
    }
)


@functools.cache
def install_providers() -> None:
    """The SDK's tracer and meter providers, writing to :data:`EXPORTER` and :data:`READER`."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


def spans() -> list[ReadableSpan]:
    """The spans finished since the exporter was last cleared."""
    return list(EXPORTER.get_finished_spans())
