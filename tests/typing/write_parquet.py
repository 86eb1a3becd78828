"""Pins ``write_parquet``'s types for mypy --strict. Type-checked only, never run.

Walks of one kind, as a list or an async iterable, are accepted; one walk on its own, walks
of two kinds in one list and walks of pages are refused (each ``type: ignore`` below proves
a refusal: an unused one would fail the check).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from asyncapi_client import Client, Order, Walk, write_parquet


async def export(client: Client) -> None:
    rows: int = await write_parquet([client.iter_orders("0xa"), client.iter_orders("0xb")], "o")
    rows = await write_parquet((client.iter_leaderboard() for _ in range(2)), Path("b.parquet"))

    async def walks() -> AsyncIterator[Walk[Order]]:
        yield client.iter_orders("0xa")

    rows = await write_parquet(walks(), "orders", partition_by="user", rows_per_group=10)
    rows = await write_parquet(walks(), "orders", decimal_scale=6)
    await write_parquet(client.iter_orders("0xa"), "o")  # type: ignore[arg-type]
    mixed = [client.iter_orders("0xa"), client.iter_leaderboard()]
    await write_parquet(mixed, "o")  # type: ignore[arg-type]
    await write_parquet([client.iter_order_pages("0xa")], "o")  # type: ignore[arg-type]
    del rows
