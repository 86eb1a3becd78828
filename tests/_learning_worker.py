"""One member of a fleet that learns its quota from the server's headers, as a process.

Run as ``python -m tests._learning_worker``. It prints ``ready`` once imported, then reads one
JSON line: ``base_url``, ``redis_url``, ``name`` (the RedisLimiter's), ``callers``,
``worker`` (sent as ``X-Worker``), ``start`` and ``end`` (``time.monotonic()``, which every
process of the machine shares). From ``start`` to ``end`` it keeps ``callers`` calls of
``tokens`` (each a different search) going through a RedisLimiter without rates, then prints
one JSON line: its successes and its errors by class, with the first message of each.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections import Counter
from typing import Any

from asyncapi_client import ApiError, Client
from asyncapi_client.fleet import RedisLimiter


async def run(config: dict[str, Any]) -> dict[str, Any]:
    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    ok = 0
    ids = itertools.count()
    end = config["end"]

    async def caller(client: Client) -> None:
        nonlocal ok
        while time.monotonic() < end:
            try:
                await client.tokens(search=f"w{config['worker']}-{next(ids)}")
            except ApiError as exc:
                errors[type(exc).__name__] += 1
                messages.setdefault(type(exc).__name__, str(exc))
            else:
                ok += 1

    async with (
        RedisLimiter(config["redis_url"], [], name=config["name"]) as limiter,
        Client(
            base_url=config["base_url"],
            limiter=limiter,
            timeout=10.0,
            headers={"X-Worker": str(config["worker"])},
        ) as client,
    ):
        wait = config["start"] - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)  # the fleet's start time, not a synchronisation
        tasks = [asyncio.create_task(caller(client)) for _ in range(config["callers"])]
        # a caller waiting for its slot past the end is not waited for
        await asyncio.wait(tasks, timeout=max(0.0, end - time.monotonic()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"worker": config["worker"], "ok": ok, "errors": errors, "messages": messages}


def main() -> None:
    print("ready", flush=True)
    config = json.loads(sys.stdin.readline())
    print(json.dumps(asyncio.run(run(config))), flush=True)


if __name__ == "__main__":
    main()
