"""``--checkpoint FILE``: walks that continue after a failure or a SIGKILL, losing nothing.

In-process runs show the file's life (written as items go out, resumed, removed at the end);
the crash test kills real processes with SIGKILL at random points of their output.
"""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncapi_client._cli._checkpoint import CheckpointFile
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, Reply
from tests._cli import Run, cli, hosts, subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    exchange = FakeExchange.generate(seed=4, users=2, orders_per_user=60, leaderboard_size=45)
    with FakeServer(exchange).in_thread() as served:
        yield served


def owner(server: FakeServer) -> str:
    orders = server.exchange.orders
    return max(orders, key=lambda a: len(orders[a]))


def ids(run: Run, key: str) -> list[str]:
    return [item[key] for item in run.jsonl()]


def test_a_failed_walk_continues_from_its_checkpoint(server: FakeServer, tmp_path: Path) -> None:
    address = owner(server)
    expected = [o["transactionId"] for o in server.exchange.orders[address]]
    checkpoint = tmp_path / "orders.ckpt"
    env = hosts(server.base_url)
    args: tuple[str, ...] = ("--max-retries", "0", "orders", address, "--all", "--limit", "7")
    args += ("--checkpoint", str(checkpoint))
    server.script("orders", Reply(), Reply(), Reply(), Reply(503))  # page 4 fails, once

    first = cli(*args, env=env)
    assert "HTTP 503" in first.one_line_error(1).split("\n")[-1]
    done = ids(first, "transactionId")
    assert done == expected[:21]  # three pages of 7, each order written once
    saved = json.loads(checkpoint.read_text())
    assert saved["last"] == expected[20]

    second = cli(*args, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stderr == (
        f"asyncapi-client: resuming the walk from the checkpoint in {checkpoint}\n"
    )
    assert done + ids(second, "transactionId") == expected  # nothing lost, nothing twice
    assert not checkpoint.exists()
    assert not list(tmp_path.iterdir())  # no temporary file left either


def test_a_checkpoint_that_cannot_be_saved_mid_walk_is_one_line_and_resumable(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk after the walk started: exit 1 in one line; FILE keeps the last good one."""
    address = owner(server)
    expected = [o["transactionId"] for o in server.exchange.orders[address]]
    checkpoint = tmp_path / "orders.ckpt"
    args = ("orders", address, "--all", "--limit", "7", "--checkpoint", str(checkpoint))
    real_write = CheckpointFile._write
    saves = 0

    def write(path: Path, text: str) -> None:
        nonlocal saves
        if text:  # the writability probe writes "" and must pass
            saves += 1
            if saves > 10:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(path, text)

    monkeypatch.setattr(CheckpointFile, "_write", staticmethod(write))
    first = cli(*args, env=hosts(server.base_url))
    line = first.one_line_error(1)
    assert line == (
        f"asyncapi-client: error: cannot save the checkpoint: --checkpoint {checkpoint}: "
        "No space left on device"
    )
    assert json.loads(checkpoint.read_text())["last"] == expected[9]
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.name]  # no temporary left

    monkeypatch.setattr(CheckpointFile, "_write", staticmethod(real_write))
    second = cli(*args, env=hosts(server.base_url))
    assert second.returncode == 0, second.stderr
    written = ids(first, "transactionId") + ids(second, "transactionId")
    assert sorted(set(written)) == sorted(expected)  # nothing lost
    assert len(written) - len(expected) <= 1  # at most the item in flight, twice


def test_a_leaderboard_walk_continues_too(server: FakeServer, tmp_path: Path) -> None:
    board = [e["address"] for e in server.exchange.leaderboard]
    checkpoint = tmp_path / "board.ckpt"
    env = hosts(server.base_url)
    args: tuple[str, ...] = ("--max-retries", "0", "--format", "csv", "leaderboard", "--all")
    args += ("--limit", "10", "--checkpoint", str(checkpoint))
    server.set_fault("leaderboard", Fault(error_rate=0.5))

    outputs: list[str] = []
    for _ in range(20):
        run = cli(*args, env=env)
        outputs.append(run.stdout)
        if run.returncode == 0:
            break
        assert run.returncode == 1
        *resuming, error = run.stderr.splitlines()
        assert len(resuming) == (len(outputs) > 1)
        assert error.startswith("asyncapi-client: error: HTTP 500"), error
    else:  # pragma: no cover - 20 runs at a 50 % error rate
        pytest.fail("the walk never completed")
    assert len(outputs) > 1
    assert outputs[0].startswith("rank,address,score\n")
    assert all(not out.startswith("rank,") for out in outputs[1:])  # one header in all
    rows = [line.split(",")[1] for out in outputs for line in out.splitlines()[0:]]
    assert rows[1:] == board
    assert not checkpoint.exists()


def test_checkpoint_defaults_to_jsonl_off_a_terminal(server: FakeServer, tmp_path: Path) -> None:
    checkpoint = tmp_path / "c"
    run = cli("leaderboard", "--all", "--checkpoint", str(checkpoint), env=hosts(server.base_url))
    assert [e["rank"] for e in run.ok().jsonl()] == [e["rank"] for e in server.exchange.leaderboard]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["orders", "0xabc", "--checkpoint", "{file}"], "orders: --checkpoint needs --all"),
        (["leaderboard", "--checkpoint", "{file}"], "leaderboard: --checkpoint needs --all"),
        (
            ["--format", "json", "leaderboard", "--all", "--checkpoint", "{file}"],
            "--checkpoint needs --format jsonl, csv or table",
        ),
    ],
)
def test_checkpoint_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    argv = [a.replace("{file}", str(tmp_path / "c")) for a in args]
    run = cli(*argv, env={"ASYNCAPI_BASE_URL": "http://127.0.0.1:9"})
    assert run.returncode == 2
    assert says in run.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "checkpoint"),
        ('{"version": 1, "operation": "leaderboard"}', "checkpoint"),
        ("\udcff", "not a checkpoint (not UTF-8 text)"),
    ],
    ids=["garbage", "truncated", "binary"],
)
def test_a_bad_checkpoint_file_is_one_line_and_exit_2(
    server: FakeServer, tmp_path: Path, content: str, says: str
) -> None:
    checkpoint = tmp_path / "c"
    checkpoint.write_bytes(content.encode("utf-8", "surrogateescape"))
    args = ("--format", "jsonl", "leaderboard", "--all", "--checkpoint", str(checkpoint))
    line = cli(*args, env=hosts(server.base_url)).one_line_error(2)
    assert line.startswith(f"asyncapi-client: error: --checkpoint {checkpoint}: ")
    assert says in line.split(f"{checkpoint}: ", 1)[1]
    assert server.requests == []  # refused before any request


def test_a_checkpoint_of_another_walk_is_refused(server: FakeServer, tmp_path: Path) -> None:
    address = owner(server)
    checkpoint = tmp_path / "c"
    args: tuple[str, ...] = ("--max-retries", "0", "orders", address, "--all", "--limit", "5")
    args += ("--checkpoint", str(checkpoint))
    server.script("orders", Reply(), Reply(503))
    cli(*args, env=hosts(server.base_url)).one_line_error(1)
    assert checkpoint.exists()
    other = cli(*args, "--status", "FILLED", env=hosts(server.base_url))
    line = other.one_line_error(2)
    assert f"--checkpoint {checkpoint}: " in line
    assert checkpoint.exists()  # kept: it still belongs to the walk that made it


# --- killed at random moments -------------------------------------------------------------------


@pytest.mark.waits
def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    """Kill ``orders --all --checkpoint F`` with SIGKILL after a random number of output
    lines, again and again, then let it finish: every order is in the union of the outputs,
    in order, and each kill writes at most one order twice."""
    exchange = FakeExchange.generate(seed=9, users=1, orders_per_user=1500, leaderboard_size=1)
    (address,) = exchange.orders
    expected = [o["transactionId"] for o in exchange.orders[address]]
    rng = random.Random(20261123)
    checkpoint = tmp_path / "walk.ckpt"
    outputs: list[list[str]] = []
    kills = 0
    with FakeServer(exchange).in_thread() as server:
        env = subprocess_env(ASYNCAPI_BASE_URL=server.base_url)
        argv = [*CLI, "--format", "jsonl", "orders", address, "--all", "--limit", "7"]
        argv += ["--checkpoint", str(checkpoint)]
        for _ in range(8):
            existed = checkpoint.exists()
            # At most ~200 lines fit in the pipe ahead of this reader, so a kill after
            # <= 60 lines read always lands mid-walk while 1,500 orders remain.
            kill_after = rng.randint(1, 60) if kills < 4 else None
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert proc.stdout is not None
            assert proc.stderr is not None
            lines: list[bytes] = []
            for line in proc.stdout:
                lines.append(line)
                if len(lines) == kill_after:
                    proc.kill()
                    break
            lines += proc.stdout.read().splitlines(keepends=True)  # written before it died
            stderr = proc.stderr.read().decode()
            proc.stdout.close()
            proc.stderr.close()
            status = proc.wait(timeout=60)
            assert all(line.endswith(b"\n") for line in lines)  # whole lines only
            outputs.append([json.loads(line)["transactionId"] for line in lines])
            assert ("resuming the walk" in stderr) == existed, stderr
            if kill_after is None:
                assert status == 0, stderr
                break
            assert status == -9
            kills += 1
    assert kills == 4
    everything = [tid for out in outputs for tid in out]
    assert list(dict.fromkeys(everything)) == expected  # nothing lost, in order
    assert len(everything) - len(expected) <= kills  # at most one order twice per kill
    assert not checkpoint.exists()


@pytest.mark.parametrize("case", ["no-such-dir", "a-directory", "too-big"])
def test_a_checkpoint_that_cannot_be_read_or_written_is_refused_before_the_walk(
    server: FakeServer, tmp_path: Path, case: str
) -> None:
    if case == "no-such-dir":
        checkpoint, says = tmp_path / "missing" / "c", "cannot write it"
    elif case == "a-directory":
        checkpoint, says = tmp_path, "cannot read it"
    else:
        checkpoint, says = tmp_path / "c", "not a checkpoint (over 1 MiB)"
        checkpoint.write_bytes(b" " * (2 << 20))
    args = ("--format", "jsonl", "leaderboard", "--all", "--checkpoint", str(checkpoint))
    line = cli(*args, env=hosts(server.base_url)).one_line_error(2)
    assert line.startswith(f"asyncapi-client: error: --checkpoint {checkpoint}: {says}"), line
    assert server.requests == []
