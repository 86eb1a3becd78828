"""One process of a watching fleet, for the fleet-watch tests and benchmark.

Run as ``python -m tests._fleet_watch_worker CONFIG`` (JSON: ``worker``, ``base_url``, ``redis``,
``name``, ``consumer``, ``addresses``, ``interval``). It watches every address with its own
Client (``X-Worker`` on every request) and ``RedisWatchState``, and prints one JSON line per
change it receives (``event: "change"``, with the time it got it) and per record the library
logs at INFO or above (``event: "log"``). A change counts as handled once its line is
printed. It ends cleanly when its stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import Any

from asyncapi_client import Client, OrderChange, Watch
from asyncapi_client.fleet import RedisWatchState

_OUT = sys.stdout


def emit(event: dict[str, Any]) -> None:
    _OUT.write(json.dumps(event) + "\n")
    _OUT.flush()


class Relay(logging.Handler):
    """The library's log records, as events."""

    def emit(self, record: logging.LogRecord) -> None:
        emit({"event": "log", "level": record.levelname, "message": record.getMessage()})


async def follow(address: str, watch: Watch[OrderChange]) -> None:
    async for change in watch:
        order = change.order
        emit(
            {
                "event": "change",
                "address": address,
                "kind": change.kind,
                "tx": order.transaction_id,
                "status": order.status.value,
                "filled": str(order.filled_size),
                "key": change.key,
                "t": time.monotonic(),
            }
        )


async def run(config: dict[str, Any]) -> None:
    state = RedisWatchState(config["redis"], name=config["name"], consumer=config["consumer"])
    async with (
        state,
        Client(base_url=config["base_url"], headers={"X-Worker": config["worker"]}) as client,
    ):
        watches = {
            address: client.watch_orders(address, interval=config["interval"], state=state)
            for address in config["addresses"]
        }
        tasks = [asyncio.create_task(follow(a, w)) for a, w in watches.items()]
        # until stdin closes (read in a thread: this loop runs the watches)
        await asyncio.to_thread(sys.stdin.read)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for watch in watches.values():
            await watch.aclose()


def main() -> None:
    logger = logging.getLogger("asyncapi_client")
    logger.addHandler(Relay(logging.INFO))
    logger.setLevel(logging.INFO)
    asyncio.run(run(json.loads(sys.argv[1])))


if __name__ == "__main__":
    main()
