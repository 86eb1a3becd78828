"""``orders ADDRESS [ADDRESS ...] --all``: each user's orders in turn, into one output in
every format; ``--checkpoint`` continues across users; ``--page-size`` is the page size
(``--limit`` another name for it)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._cli import cli, hosts

EXCHANGE = FakeExchange.generate(seed=12, users=3, orders_per_user=25, leaderboard_size=5)
USERS = list(EXCHANGE.orders)
EXPECTED = [o["transactionId"] for user in USERS for o in EXCHANGE.orders[user]]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(EXCHANGE).in_thread() as served:
        yield served


def test_json_is_one_array_of_every_users_orders(server: FakeServer) -> None:
    run = cli("--format", "json", "orders", *USERS, "--all", "--page-size", "10",
              env=hosts(server.base_url))  # fmt: skip
    assert [o["transactionId"] for o in run.ok().json()] == EXPECTED


def test_jsonl_csv_and_table_hold_every_users_orders(server: FakeServer) -> None:
    env = hosts(server.base_url)
    jsonl = cli("--format", "jsonl", "orders", *USERS, "--all", env=env).ok()
    assert [o["transactionId"] for o in jsonl.jsonl()] == EXPECTED
    text = cli("--format", "csv", "orders", *USERS, "--all", env=env).ok().stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["transactionId"] for row in rows] == EXPECTED  # one header in all
    table = cli("--format", "table", "--wide", "orders", *USERS, "--all", env=env).ok()
    shown = [line for line in table.lines() if any(t in line for t in EXPECTED)]
    assert len(shown) == len(EXPECTED)


def test_parquet_holds_every_users_orders(server: FakeServer, tmp_path: Path) -> None:
    output = tmp_path / "orders.parquet"
    run = cli("orders", *USERS, "--all", "--format", "parquet", "--output", str(output),
              "--rows-per-group", "20", env=hosts(server.base_url))  # fmt: skip
    run.ok()
    assert pq.read_table(output).column("transaction_id").to_pylist() == EXPECTED
    meta = pq.ParquetFile(output).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [20, 20, 20, 15]


def test_a_checkpoint_continues_with_the_user_it_stopped_at(
    server: FakeServer, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "walk.ckpt"
    args = ("--max-retries", "0", "--format", "jsonl", "orders", *USERS, "--all",
            "--page-size", "10", "--checkpoint", str(checkpoint))  # fmt: skip
    server.script("orders", Reply(), Reply(), Reply(), Reply(), Reply(503))  # user 2, page 2
    first = cli(*args, env=hosts(server.base_url))
    assert first.returncode == 1
    assert json.loads(checkpoint.read_text())["address"] == USERS[1]
    with FakeServer(EXCHANGE).in_thread() as again:  # no late request of the first run
        second = cli(*args, env=hosts(again.base_url))
    assert second.returncode == 0, second.stderr
    written = [o["transactionId"] for o in first.jsonl() + second.jsonl()]
    assert written == EXPECTED  # nothing lost, nothing twice
    asked = [r.path.split("/")[-2] for r in again.requests]
    assert asked == [USERS[1]] * 3 + [USERS[2]] * 3  # the first user is not asked again
    assert not checkpoint.exists()


def test_a_checkpoint_of_a_user_not_given_is_refused(server: FakeServer, tmp_path: Path) -> None:
    checkpoint = tmp_path / "walk.ckpt"
    args = ("--max-retries", "0", "--format", "jsonl", "orders", USERS[0], "--all",
            "--page-size", "10", "--checkpoint", str(checkpoint))  # fmt: skip
    server.script("orders", Reply(), Reply(503))
    assert cli(*args, env=hosts(server.base_url)).returncode == 1
    other = (*args[:5], USERS[1], USERS[2], *args[6:])
    line = cli(*other, env=hosts(server.base_url)).one_line_error(2)
    assert f"a walk of {USERS[0]}, which is not among the ADDRESS arguments" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["orders", "0xa", "0xb"], "orders: several addresses need --all"),
        (["orders", "0xa", "0xb", "0xa", "--all"], "orders: ADDRESS 0xa is given twice"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    assert message in cli(*argv, env=hosts("http://127.0.0.1:9")).one_line_error(2)


@pytest.mark.parametrize("option", ["--page-size", "--limit"])
def test_page_size_and_its_other_name_limit_set_the_page_size(
    server: FakeServer, option: str
) -> None:
    env = hosts(server.base_url)
    cli("orders", USERS[0], option, "7", env=env).ok()
    cli("orders", USERS[0], "--all", option, "7", env=env).ok()
    cli("leaderboard", option, "3", env=env).ok()
    assert [r.query["limit"] for r in server.requests] == ["7"] * 5 + ["3"]


def test_help_names_page_size_and_limit_as_one_option() -> None:
    for command in ("orders", "leaderboard"):
        text = cli(command, "--help").stdout
        # Python 3.13's argparse writes the metavar once: "--page-size, --limit N".
        assert re.search(r"--page-size( N)?, --limit N", text), text
        assert "--limit is another name" in " ".join(text.split())
