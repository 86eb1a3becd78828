"""``make redis-server`` says which redis-server it found or installed, and how to start one.

A fleet needs a Redis before its first line runs; a reader who ran ``make redis-server``
should not have to hunt for the binary it found. The command it prints starts a server
that answers.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _make_redis_server() -> list[str]:
    done = subprocess.run(
        ["make", "--no-print-directory", "redis-server", f"PY={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_it_names_the_binary_and_how_to_start_a_server() -> None:
    lines = _make_redis_server()
    assert lines[0].startswith("make redis-server: found"), lines
    binary = Path(lines[0].rpartition(": ")[2])
    assert binary.is_file(), lines[0]
    start = [line.strip() for line in lines if line.strip().startswith(str(binary))]
    assert start == [f"{binary} --bind 127.0.0.1 --port 6379 --save '' --appendonly no"]
    assert any("docker run --rm -p 127.0.0.1:6379:6379 redis:7" in line for line in lines)


def test_the_command_it_prints_starts_a_server_that_answers(tmp_path: Path) -> None:
    lines = _make_redis_server()
    binary = lines[0].rpartition(": ")[2]
    command = next(line.strip() for line in lines if line.strip().startswith(binary))
    port = _free_port()  # the printed 6379 may be taken on this machine
    argv = shlex.split(command.replace("--port 6379", f"--port {port}"))
    process = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watchdog = threading.Timer(30, process.kill)  # bounds the wait for its log line below
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "Ready to accept connections" in line:
                break
        else:
            raise AssertionError(f"redis-server exited ({process.wait()}) before it was ready")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"PING\r\n")
            assert sock.recv(64) == b"+PONG\r\n"
    finally:
        watchdog.cancel()
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
