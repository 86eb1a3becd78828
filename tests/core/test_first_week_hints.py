"""Errors a new user meets in the first week say what to do, in the error itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from asyncapi_client import Client
from asyncapi_client.testing import FakeExchange, FakeServer


def test_with_instead_of_async_with_names_both_fixes() -> None:
    client = Client(base_url="http://127.0.0.1:9")
    with pytest.raises(TypeError, match="async with") as caught, client:
        pass
    assert "SyncClient" in str(caught.value)


@pytest.mark.parametrize("suffix", ["/api", "/api/", "/prefix/api", "/API"])
def test_a_base_url_ending_in_api_is_refused_with_the_reason(suffix: str) -> None:
    with pytest.raises(ValueError, match="adds /api"):
        Client(base_url="http://127.0.0.1:9" + suffix)
    with pytest.raises(ValueError, match="testnet_base_url"):
        Client(base_url="http://127.0.0.1:9", testnet_base_url="http://127.0.0.1:9" + suffix)


def test_a_base_url_with_another_prefix_is_kept() -> None:
    Client(base_url="http://127.0.0.1:9/apis")
    Client(base_url="http://127.0.0.1:9/v1/api-gateway")


def test_a_client_used_again_under_a_second_asyncio_run_names_the_fix() -> None:
    with FakeServer(FakeExchange.generate(seed=1)).in_thread() as server:
        client = Client(base_url=server.base_url)

        async def use() -> None:
            await client.tokens()

        async def close() -> None:
            await client._sender.close()  # the first loop's session, on the first loop

        first = asyncio.new_event_loop()
        try:
            first.run_until_complete(use())
            first.run_until_complete(close())
        finally:
            first.close()
        with pytest.raises(RuntimeError, match="one Client per event loop"):
            asyncio.run(use())


_UNCLOSED = textwrap.dedent(
    """
    import asyncio, gc, warnings
    from asyncapi_client import Client
    from asyncapi_client.testing import FakeExchange, FakeServer

    warnings.simplefilter("always", ResourceWarning)

    async def main():
        async with FakeServer(FakeExchange.generate(seed=1)) as server:
            client = Client(base_url=server.base_url)  # made here
            await client.tokens()
            session = client._sender.session  # closed by hand below, once the warning is out
            del client
            gc.collect()
            await session.close()

    asyncio.run(main())
    """
)


def test_a_client_never_closed_warns_naming_how_to_close_it_and_where_it_was_made() -> None:
    run = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _UNCLOSED],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "ResourceWarning: unclosed Client(network='mainnet'" in run.stderr
    assert "await client.close()" in run.stderr
    assert "it was made at <string>:" in run.stderr  # the line of the script that made it
