"""watch_orders proven against the living fake's journal: thousands of order transitions,
5 % of answers failing (500s and dropped connections), bursts of 429s, and the watcher
process killed with SIGKILL five times and started again on its state file.

What a change stream must never do, checked line by line: miss a final state, deliver what
did not happen, or deliver again what was handled (only the change in hand at a kill may
come twice, as the first line after that restart)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Fault
from tests._env import worker_env

ROOT = Path(__file__).resolve().parents[2]
FINAL = frozenset({"FILLED", "CANCELLED", "EXPIRED"})
TRANSITIONS = 2_000
KILLS = 5
#: How long the watcher may take to deliver the last final states once changes stop.
CATCH_UP = 60.0


def start_watcher(
    server: FakeServer, address: str, state: Path, out: Path
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests._watch_worker",
            server.base_url,
            address,
            str(state),
            str(out),
        ],
        cwd=ROOT,
        env=worker_env(),
        stderr=subprocess.DEVNULL,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)


def lines(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    text = out.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def closed_ids(out: Path) -> set[str]:
    return {r["tx"] for r in lines(out) if r["kind"] == "closed"}


async def until(condition: Callable[[], bool], bound: float) -> None:
    """Until ``condition()`` holds, at most ``bound`` seconds: a bounded poll of files another
    process writes (nothing there can notify this loop)."""
    async with asyncio.timeout(bound):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


@pytest.mark.waits
async def test_no_final_state_missed_no_phantom_no_repeat_across_kills(tmp_path: Path) -> None:
    exchange = FakeExchange.generate(seed=21, users=1, orders_per_user=150)
    address = next(iter(exchange.orders))
    state, out = tmp_path / "state.json", tmp_path / "changes.jsonl"
    kills_at: list[int] = []  # lines written when each kill landed
    async with FakeServer(exchange) as server:
        server.set_fault("*", Fault(error_rate=0.05, drop_rate=0.05))
        watcher = start_watcher(server, address, state, out)
        try:
            await until(state.exists, 30)  # the baseline is taken: changes start now
            start = len(exchange.journal)
            done = 0
            next_kill = TRANSITIONS // (KILLS + 1)
            while done < TRANSITIONS:
                changes = exchange.advance(8)
                done += sum(1 for c in changes if c.kind.startswith("order."))
                await asyncio.sleep(0.02)  # the pace of the market, not a synchronisation
                if done >= next_kill and len(kills_at) < KILLS:
                    kill(watcher)
                    kills_at.append(len(lines(out)))
                    if len(kills_at) % 2:  # a burst of 429s now and then
                        server.set_fault("*", Fault(rate_limit_burst=6, retry_after=0))
                        server.set_fault("*", Fault(error_rate=0.05, drop_rate=0.05))
                    watcher = start_watcher(server, address, state, out)
                    next_kill += TRANSITIONS // (KILLS + 1)
            journal = exchange.journal[start:]
            finals = {
                c.key: (c.after["status"], c.after["filledSize"])
                for c in journal
                if c.kind.startswith("order.") and c.after["status"] in FINAL
            }
            server.clear_faults()
            await until(lambda: finals.keys() <= closed_ids(out), CATCH_UP)
        finally:
            kill(watcher)
    seen = lines(out)
    check_no_missed_final(seen, finals)
    check_no_phantom(seen, exchange, start)
    check_repeats_only_at_kills(seen, kills_at)
    check_each_order_moves_forward(seen)
    assert len(kills_at) == KILLS
    assert sum(1 for c in journal if c.kind.startswith("order.")) >= TRANSITIONS


def check_no_missed_final(seen: list[dict[str, Any]], finals: dict[str, tuple[str, str]]) -> None:
    delivered = {(r["tx"], r["status"], r["filled"]) for r in seen if r["kind"] == "closed"}
    missed = [
        tx for tx, (status, filled) in finals.items() if (tx, status, filled) not in delivered
    ]
    assert missed == [], f"{len(missed)} final states missed"


def check_no_phantom(seen: list[dict[str, Any]], exchange: FakeExchange, start: int) -> None:
    """Every state delivered is one the order had: a journal ``after``, or its state before
    its first change (a baseline order)."""
    had: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for change in exchange.journal:
        if change.kind.startswith("order."):
            if change.before is not None:
                had[change.key].add((change.before["status"], change.before["filledSize"]))
            had[change.key].add((change.after["status"], change.after["filledSize"]))
    for record in seen:
        assert (record["status"], record["filled"]) in had[record["tx"]], record
        assert (record["kind"] == "closed") == (record["status"] in FINAL), record


def check_repeats_only_at_kills(seen: list[dict[str, Any]], kills_at: list[int]) -> None:
    """A key comes twice only as the first line after a restart, repeating the last line
    written before that kill (the change in hand, not yet handled)."""
    first: dict[str, int] = {}
    for index, record in enumerate(seen):
        key = record["key"]
        if key in first:
            assert index in kills_at, f"{key} delivered again at line {index}, not after a kill"
            assert seen[index - 1]["key"] == key, f"{key} repeated but was not the change in hand"
            assert seen[index] == seen[first[key]]  # the same change, the same key
        else:
            first[key] = index


def check_each_order_moves_forward(seen: list[dict[str, Any]]) -> None:
    rank = {"OPEN": 0, "PARTIALLY_FILLED": 1, "FILLED": 2, "CANCELLED": 2, "EXPIRED": 2}
    by_order: dict[str, list[dict[str, Any]]] = defaultdict(list)
    previous_key = None
    for record in seen:
        if record["key"] != previous_key:  # a repeat at a kill is the same change
            by_order[record["tx"]].append(record)
        previous_key = record["key"]
    for tx, records in by_order.items():
        ranks = [rank[r["status"]] for r in records]
        assert ranks == sorted(ranks), (tx, records)
        assert all(r["kind"] != "closed" for r in records[:-1]), (tx, records)
