"""The exceptions the library raises, and the one place a status becomes a class.

Everything raised for a failed request derives from :class:`ApiError`::

    ApiError
     ├── TransportError                 the connection failed (refused, reset, DNS, TLS, cut short)
     │    ├── RequestTimeoutError        an attempt or the deadline ran out (also a TimeoutError)
     │    ├── LimiterError               the rate limiter's shared state could not be reached
     │    └── ResponseTooLargeError      the body grew past max_response_bytes (never retried)
     ├── StatusError                    a non-2xx answer: .status .url .body .headers
     │    ├── BadRequestError            400
     │    ├── NotFoundError              404
     │    ├── RateLimitError             429, with .retry_after
     │    └── ServerError                5xx
     ├── DecodeError                    not JSON, or not the documented shape: .path
     └── PaginationError                the server's pages are inconsistent (repeated cursor,
                                        page ignored, data moved under a checkpoint)

Invalid arguments are not API errors: they raise plain :class:`ValueError` before any request.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from datetime import UTC

from multidict import CIMultiDict, CIMultiDictProxy

__all__ = [
    "ApiError",
    "BadRequestError",
    "DecodeError",
    "LimiterError",
    "NotFoundError",
    "PaginationError",
    "RateLimitError",
    "RequestTimeoutError",
    "ResponseTooLargeError",
    "ServerError",
    "StatusError",
    "TransportError",
    "parse_retry_after",
    "status_error",
]

#: How much of an error body a StatusError keeps (characters).
BODY_PREVIEW_CHARS = 2048


class ApiError(Exception):
    """Base class of every error raised for a failed request.

    ``message`` is the text without the network, URL and attempts that ``str()`` adds;
    ``network`` and ``url`` say where the request went, when it got that far.
    ``attempts`` is how many requests the failed call made (0: it failed before any);
    when more than one, the message says so and ``__cause__`` is the error of the attempt
    before the last (whose own ``__cause__`` goes back further, down to the first's).
    """

    #: Set (by the session layer) on a failure that cannot heal: a certificate that does
    #: not verify, a malformed answer, a refused redirect, the limiter's final no. Never
    #: retried.
    _final: bool = False
    #: Set (by the pipeline) on a RequestTimeoutError of the call's own deadline: callers
    #: that shared its request are not handed it (each has a deadline of its own).
    _own_deadline: bool = False

    def __init__(self, message: str, *, url: str | None = None, network: str | None = None):
        super().__init__(message)
        self.message = message
        self.url = url
        self.network = network
        self.attempts = 0

    def __str__(self) -> str:
        where = " ".join(part for part in (self.network and f"[{self.network}]", self.url) if part)
        text = (
            f"{self.message} after {self.attempts} attempts" if self.attempts > 1 else self.message
        )
        return f"{text} ({where})" if where else text


class TransportError(ApiError):
    """The connection failed: refused, reset, DNS, TLS, or the body was cut short."""


class RequestTimeoutError(TransportError, TimeoutError):
    """An attempt ran past its ``timeout``, or the operation ran past its ``deadline``."""


class LimiterError(TransportError):
    """The limiter (e.g. a fleet's Redis) could not be asked; retried like a connection failure.

    ``limiter`` names it (its ``repr``), so a log line says which shared quota failed.
    """

    def __init__(
        self, message: str, *, limiter: str, url: str | None = None, network: str | None = None
    ):
        super().__init__(message, url=url, network=network)
        self.limiter = limiter


class ResponseTooLargeError(TransportError):
    """The body grew past ``max_response_bytes``; refused as it streamed in, never retried.

    ``limit`` is the ``max_response_bytes`` it grew past.
    """

    def __init__(
        self, message: str, *, limit: int, url: str | None = None, network: str | None = None
    ):
        super().__init__(message, url=url, network=network)
        self.limit = limit


class StatusError(ApiError):
    """The server answered with a status outside 2xx.

    ``status`` is the HTTP status, ``body`` the start of the error body as text (truncated),
    ``headers`` the answer's headers (case-insensitive, repeated headers kept, read-only).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        url: str,
        body: str = "",
        headers: Mapping[str, str] | None = None,
        network: str | None = None,
    ):
        super().__init__(message, url=url, network=network)
        self.status = status
        self.body = body
        # Case-insensitive like HTTP itself, repeated headers kept, read-only.
        self.headers: Mapping[str, str] = CIMultiDictProxy(CIMultiDict(headers or {}))


class BadRequestError(StatusError):
    """400: the server refused the request's arguments."""


class NotFoundError(StatusError):
    """404: no such token, pool, user or path."""


class RateLimitError(StatusError):
    """429: too many requests; ``retry_after`` is the server's wait in seconds, if it gave one."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        url: str,
        body: str = "",
        headers: Mapping[str, str] | None = None,
        network: str | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(
            message, status=status, url=url, body=body, headers=headers, network=network
        )
        self.retry_after = retry_after


class ServerError(StatusError):
    """5xx: the server failed."""


class DecodeError(ApiError):
    """The body is not JSON, or not the documented shape.

    ``path`` names the offending field in the body as sent, for example ``orders[3].price``;
    it is ``""`` when the top level itself is wrong and ``None`` when the body is not JSON.
    A key of a free-form record longer than 64 characters is spelt as its head and length
    (``kkkk…(100,001 chars)``), and a path is at most 1,000 characters (head and tail kept).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None,
        url: str | None = None,
        network: str | None = None,
    ):
        super().__init__(message, url=url, network=network)
        self.path = path


class PaginationError(ApiError):
    """The server's pages are inconsistent: a cursor handed back twice, a page after the
    first that brings nothing new (the page parameter ignored), or data that moved since
    the checkpoint a walk resumes from."""


_STATUS_CLASSES: dict[int, type[StatusError]] = {
    400: BadRequestError,
    404: NotFoundError,
    429: RateLimitError,
}


def parse_retry_after(
    value: str | None, *, now: float | None = None, date: str | None = None
) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    An HTTP date is measured against ``date``, the answer's own ``Date`` header, when it
    has a readable one (a server whose clock is ahead of ours still means what it says),
    else against ``now`` (the wall clock when None). Returns None for a missing or
    unreadable header; a date in the past gives 0.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if seconds == seconds and seconds != float("inf") else None
    when = _http_date(value)
    if when is None:
        return None
    sent = _http_date(date) if date is not None else None
    if sent is None:
        sent = time.time() if now is None else now
    return max(when - sent, 0.0)


def _http_date(value: str) -> float | None:
    """An HTTP date as a Unix time (a date without a zone taken as UTC), or None."""
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):  # a year of 20 digits...
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def status_error(
    status: int,
    *,
    url: str,
    body: str,
    headers: Mapping[str, str],
    network: str | None = None,
) -> StatusError:
    """Build the StatusError subclass that fits ``status`` (the one status -> class mapping)."""
    cls = _STATUS_CLASSES.get(status) or (ServerError if 500 <= status <= 599 else StatusError)
    preview = body if len(body) <= BODY_PREVIEW_CHARS else body[:BODY_PREVIEW_CHARS] + "…"
    detail = " ".join(preview.split())[:200]
    message = f"HTTP {status}" + (f": {detail}" if detail else "")
    if cls is RateLimitError:
        return RateLimitError(
            message,
            status=status,
            url=url,
            body=preview,
            headers=headers,
            network=network,
            retry_after=parse_retry_after(headers.get("Retry-After"), date=headers.get("Date")),
        )
    return cls(message, status=status, url=url, body=preview, headers=headers, network=network)
