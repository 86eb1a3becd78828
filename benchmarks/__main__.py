"""``python -m benchmarks [--quick] [--case NAME ...] [--out PATH]``: run, print, write JSON."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import attrs
import orjson

import asyncapi_client

from ._cases import CASES, Config
from ._server import _ROOT, ServerProcess, pin_cores
from ._stats import format_table

_DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest.json"
_VERSIONS = (
    "asyncapi-client",
    "aiohttp",
    "cattrs",
    "attrs",
    "orjson",
    "yarl",
    "multidict",
    "httpx",
    "sniffio",
    "pydantic",
    "pydantic-core",
    "msgspec",
    "psutil",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> dict[str, str]:
    found = {}
    for name in _VERSIONS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def _meta(mode: str, pinning: str, cases: list[str]) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "cases": cases,
        "machine": {
            "nproc": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "platform": platform.platform(),
            "pinning": pinning,
        },
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "versions": _versions(),
        "commit": _commit(),
        # Which package was measured: another checkout's when run from a copy beside it.
        "asyncapi_client": str(Path(asyncapi_client.__file__).parent),
    }


def _header(meta: dict[str, Any]) -> str:
    v = meta["versions"]
    m = meta["machine"]
    return (
        f"asyncapi_client benchmarks ({meta['mode']}), {meta['date']}, commit {meta['commit']}\n"
        f"machine: {m['nproc']} cores, {m['cpu_model']}, {m['platform']}; {m['pinning']};"
        f" load average {' '.join(f'{x:.2f}' for x in meta['load_before'])}\n"
        f"Python {meta['python']}, aiohttp {v['aiohttp']}, cattrs {v['cattrs']}, "
        f"attrs {v['attrs']}, orjson {v['orjson']}; httpx {v['httpx']}, "
        f"pydantic {v['pydantic']}, msgspec {v['msgspec']}"
    )


_HEADERS = (
    "case",
    "asyncapi_client",
    "baseline",
    "ratio: median (min-max) or [quartiles]",
    "target",
    "pass/fail",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="asyncapi_client benchmark suite"
    )
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    parser.add_argument(
        "--case",
        action="append",
        choices=sorted(CASES),
        help="run only this case (repeatable); default: all",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a target is missed"
    )
    parser.add_argument("--out", type=Path, default=_DEFAULT_OUT, help="where to write JSON")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds of the pool(), orders and sync cases, one-loop and outside (bounded runs"
        " on a shared machine); default 31 one-loop, 11 outside",
    )
    args = parser.parse_args(argv)

    names = args.case or list(CASES)
    cfg = Config.quick_run() if args.quick else Config()
    if args.rounds is not None:
        cfg.overhead_rounds = cfg.outside_rounds = args.rounds
    client_cpu, server_cpu, pinning = pin_cores()
    cfg.client_cpu = client_cpu
    meta = _meta("quick" if args.quick else "full", pinning, names)
    meta["load_before"] = os.getloadavg()
    print(_header(meta), file=sys.stderr, flush=True)

    results: dict[str, Any] = {}
    started = time.perf_counter()
    with ServerProcess(server_cpu) as server:
        for name in names:
            print(f"[{name}]", file=sys.stderr, flush=True)
            case_start = time.perf_counter()
            results[name] = CASES[name](cfg, server)
            results[name]["seconds"] = round(time.perf_counter() - case_start, 1)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_after"] = os.getloadavg()

    rows = [row for name in names for row in results[name]["rows"]]
    details = [row for name in names for row in results[name].get("details", [])]
    print()
    print(_header(meta))
    if details:
        print(
            "\nEvery contender (median over rounds, with (min-max), or [quartiles] in cases"
            " of many rounds; ratios per round):\n"
        )
        print(
            format_table(
                ("case", "contender", "measured", "ratio"), [[*d.values()] for d in details]
            )
        )
    print("\nSummary:\n")
    print(format_table(_HEADERS, [[*r.values()] for r in rows]))
    print(f"\n{meta['seconds']:.0f} s; results in {args.out}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    document = {"meta": meta, "config": _config_dict(cfg), "results": results, "table": rows}
    args.out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    failed = any(r.get("pass") is False for r in results.values())  # info cases have none
    return 1 if failed and args.strict else 0


def _config_dict(cfg: Config) -> dict[str, Any]:
    return attrs.asdict(cfg)


if __name__ == "__main__":
    sys.exit(main())
