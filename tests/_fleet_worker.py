"""One fleet member for the multi-process tests: a process with its own loop, Client, limiter.

Run as ``python -m tests._fleet_worker``. It prints ``ready`` once imported, then for each
JSON line on stdin (a run: the start signal too, so the workers of a fleet start together)
keeps ``concurrency`` calls of ``tokens`` going for ``seconds`` through a new RedisLimiter and
Client on a new event loop, and prints one JSON line: its successes, its errors by class and
the first message of each class. ``margin`` and ``retry_after_cap`` are optional (the library's
defaults when absent); ``start`` (``time.monotonic()``) is when every worker starts calling.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from typing import Any

from asyncapi_client import ApiError, Client, Rate
from asyncapi_client.fleet import RedisLimiter


async def hammer(config: dict[str, Any]) -> dict[str, Any]:
    rates = [Rate(count, seconds) for count, seconds in config["rates"]]
    options: dict[str, Any] = {}
    if "margin" in config:
        options["margin"] = config["margin"]
    limiter = RedisLimiter(config["redis"], rates, name=config["name"], **options)
    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    ok = 0
    loop = asyncio.get_running_loop()
    end = 0.0

    async def caller(client: Client) -> None:
        nonlocal ok
        while loop.time() < end:
            try:
                await client.tokens()
            except ApiError as exc:
                errors[type(exc).__name__] += 1
                messages.setdefault(type(exc).__name__, str(exc))
            else:
                ok += 1

    async with (
        limiter,
        Client(
            base_url=config["base_url"],
            limiter=limiter,
            timeout=10.0,
            coalesce=False,  # each caller's request is its own (coalescing is per process)
            headers={"X-Worker": str(config["worker"])},
            retry_after_cap=config.get("retry_after_cap", 60.0),
        ) as client,
    ):
        # Warm up (connections to Redis and to the server, the script loaded) on another
        # operation, so the measured run is not skewed by one slow first request per worker.
        await client.leaderboard()
        # Every worker calls from the same moment to the same end (``start`` is on the
        # machine's monotonic clock, which every process shares): a worker slow to start on
        # a loaded machine neither runs alone after the others nor stretches the run.
        start = config.get("start", loop.time())
        if start > loop.time():
            await asyncio.sleep(start - loop.time())  # the fleet's start time, not a sync
        end = start + config["seconds"]
        callers = [asyncio.create_task(caller(client)) for _ in range(config["concurrency"])]
        # A caller may be waiting for a slot past the end: the run stops there, cancelling it.
        await asyncio.wait(callers, timeout=max(0.0, end - loop.time()))
        for task in callers:
            task.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        left = len(asyncio.all_tasks()) - 1
    return {
        "worker": config["worker"],
        "ok": ok,
        "errors": dict(errors),
        "messages": messages,
        "tasks_left": left,
    }


def main() -> None:
    try:
        # The run is timed at the server: on a shared, loaded machine a worker that waits
        # for a CPU sends late. Ask for a better share where allowed (root, as in CI).
        os.nice(-5)
    except OSError:
        pass
    print("ready", flush=True)
    for line in sys.stdin:  # until the test closes our stdin
        print(json.dumps(asyncio.run(hammer(json.loads(line)))), flush=True)


if __name__ == "__main__":
    main()
