"""A watcher process for the watch tests: ``python -m tests._watch_worker BASE_URL ADDRESS
STATE OUT`` watches the orders of ADDRESS with a FileWatchState at STATE and appends each
change to OUT as one JSON line, written and flushed to disk before the next is asked for
(so a change counts as handled once its line is on disk). The test kills it by PID."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from asyncapi_client import Client, FileWatchState


async def main(base_url: str, address: str, state: str, out: str) -> None:
    async with Client(base_url=base_url, timeout=2.0, max_retries=2) as client:
        client.set_testing(True, max_retries=2)  # no back-off: retries at once
        watch = client.watch_orders(address, interval=0.02, state=FileWatchState(state))
        with open(out, "a", encoding="utf-8") as file:  # noqa: ASYNC230 - fsync is the point
            async for change in watch:
                order = change.order
                line = {
                    "kind": change.kind,
                    "key": change.key,
                    "tx": order.transaction_id,
                    "status": order.status.value,
                    "filled": str(order.filled_size),
                    "previous": None if change.previous is None else change.previous.status.value,
                }
                file.write(json.dumps(line) + "\n")
                file.flush()
                os.fsync(file.fileno())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
