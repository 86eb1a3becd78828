"""Pins the columnar export's types for mypy --strict. Type-checked only, never run.

Walks of items have the three methods; walks of pages do not (mypy refuses the call: an
unused ``type: ignore`` would fail the check, so each ignore below proves a refusal).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asyncapi_client import Client


async def export(client: Client) -> None:
    table: Any = await client.iter_orders("0xu").to_arrow(decimal_scale=6)
    rows: int = await client.iter_leaderboard().to_parquet(Path("b.parquet"), rows_per_group=10)
    rows = await client.iter_orders("0xu").to_parquet("o.parquet", decimal_scale=18)
    async for batch in client.iter_leaderboard().record_batches(rows=100, decimal_scale=2):
        table = batch
    await client.iter_order_pages("0xu").to_arrow()  # type: ignore[misc]
    client.iter_leaderboard_pages().record_batches()  # type: ignore[misc]
    await client.iter_orders("0xu").to_parquet(b"o.parquet")  # type: ignore[arg-type]
    del table, rows
