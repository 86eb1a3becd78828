"""Arguments refused when the client is made, with the argument named, before any request
(rather than a misleading error at the first call)."""

from __future__ import annotations

import pytest

from asyncapi_client import Client, LocalLimiter
from asyncapi_client.fleet import RedisLimiter
from asyncapi_client.testing import FakeServer

#: What a header value may not hold: every C0 control character but HTAB, and DEL.
CONTROLS = [chr(c) for c in range(0x20) if c != 0x09] + ["\x7f"]


async def test_every_control_character_in_a_header_value_is_refused(
    server: FakeServer,
) -> None:
    """Refused by name when the client is made; a tab and text beyond Latin-1 are sent."""
    for char in CONTROLS:
        with pytest.raises(ValueError, match="X-Bot") as caught:
            Client(base_url=server.base_url, headers={"X-Bot": f"a{char}b"})
        assert repr(char) in str(caught.value), char
    headers = {"X-Tab": "a\tb", "X-Text": "café ✓"}
    async with Client(base_url=server.base_url, headers=headers) as client:
        await client.tokens()
    (sent,) = server.requests
    assert sent.headers["X-Tab"] == "a\tb"
    assert sent.headers["X-Text"] == "café ✓"


def test_a_header_value_with_no_utf8_form_is_refused() -> None:
    """aiohttp would drop the lone surrogate and send another value than the one given."""
    with pytest.raises(ValueError, match="X-Bot"):
        Client(base_url="http://127.0.0.1:9", headers={"X-Bot": "a\ud800b"})


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_coalesce_that_is_not_a_bool_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="coalesce"):
        Client(base_url="http://127.0.0.1:9", coalesce=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [LocalLimiter, RedisLimiter, object(), "local"])
def test_a_limiter_that_is_not_a_limiter_instance_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="limiter must be a Limiter instance"):
        Client(base_url="http://127.0.0.1:9", limiter=value)  # type: ignore[arg-type]
