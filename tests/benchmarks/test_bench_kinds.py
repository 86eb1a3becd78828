"""The benchmark's contenders measure what they say: each kind of ``pool()`` call returns
what its decoder makes (a Pool, or the dict of ``orjson.loads`` where the kind says so).

A contender that silently decodes another way would put a wrong figure in the tables
(``ours_orjson`` did, once the client read its decoder from the endpoint table).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import RawTestServer

from asyncapi_client import Pool
from benchmarks import _calls
from benchmarks._server import _Handler


@pytest.mark.parametrize(
    ("kind", "made"),
    [("raw", dict), ("raw_session", dict), ("typed", Pool), ("ours", Pool), ("ours_orjson", dict)],
)
async def test_each_benchmark_kind_decodes_as_it_says(kind: str, made: type[Any]) -> None:
    async with RawTestServer(_Handler(), host="127.0.0.1") as server:
        base = str(server.make_url("")).rstrip("/")
        call, close = await _calls.setup(kind, base)
        try:
            value = await call("p-0000001")
        finally:
            await close()
    assert type(value) is made
    if isinstance(value, dict):
        assert value["poolId"] == "p-0000001"
    else:
        assert isinstance(value, Pool)
        assert value.pool_id == "p-0000001"


async def test_the_orjson_kind_leaves_client_pool_as_it_was() -> None:
    async with RawTestServer(_Handler(), host="127.0.0.1") as server:
        base = str(server.make_url("")).rstrip("/")
        _, close = await _calls.setup("ours_orjson", base)
        await close()
        call, close = await _calls.setup("ours", base)
        try:
            assert isinstance(await call("p-0000002"), Pool)
        finally:
            await close()
