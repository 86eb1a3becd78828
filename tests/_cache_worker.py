"""One fleet member for the RedisCache processes test: its own loop, Client and RedisCache.

Run as ``python -m tests._cache_worker``. It prints ``ready`` once imported, then for each
JSON line on stdin (the start signal too, so the workers of a fleet start together) calls
``tokens`` and ``token_markets`` of each token given, all at once, through a new RedisCache
and Client on a new event loop, and prints one JSON line: where each answer came from.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Awaitable
from typing import Any

from asyncapi_client import ApiError, Client
from asyncapi_client.fleet import RedisCache


async def run(config: dict[str, Any]) -> dict[str, Any]:
    states: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    async with (
        RedisCache(config["redis"], name=config["name"]) as cache,
        Client(
            base_url=config["base_url"],
            testnet_base_url=config["testnet_base_url"],
            cache=cache,
            timeout=config["timeout"],
            max_retries=0,
            coalesce=False,
        ) as client,
    ):
        calls: list[Awaitable[Any]] = [client.with_response.tokens()]
        calls += [client.with_response.token_markets(token) for token in config["tokens"]]
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, ApiError):
                errors[type(result).__name__] += 1
            elif isinstance(result, BaseException):
                raise result
            else:
                states[str(result.cache)] += 1
    # after the cache closed: what it stores in the background is done by then
    left = len(asyncio.all_tasks()) - 1
    return {"states": dict(states), "errors": dict(errors), "tasks_left": left}


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:  # until the test closes our stdin
        print(json.dumps(asyncio.run(run(json.loads(line)))), flush=True)


if __name__ == "__main__":
    main()
