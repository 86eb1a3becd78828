"""The measured figures the README and the docs quote, read from the latest benchmark results.

A page quotes a figure between two markers that neither GitHub nor the docs site shows:
``<!--fig pool.c1-->1.07<!--/fig-->``. The name is a key of :data:`FIGURES`, which computes
the text from the results file holding that case: ``benchmarks/results/`` keeps one file per
case, the latest (older runs live in git's history). So every page says what the latest run
measured, and no two pages can drift apart.

``python -m benchmarks._figures`` lists every quoted figure that differs from the results
(exit status 1); ``--write`` rewrites them in place. ``tests/docs/test_figures.py`` runs the
check in ``make test``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
#: A results file kept in git: the run's date, then what it holds (``full``, ``export``...).
DATED = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})-(?P<name>[a-z0-9-]+)\.json$")
#: Between two ends of a range, as the pages print them (an en dash).
DASH = "\u2013"
#: ``<!--fig NAME-->TEXT<!--/fig-->``: TEXT is the figure NAME as the page quotes it.
MARKED = re.compile(r"<!--fig (?P<name>[a-z0-9_.-]+)-->(?P<text>[^<\n]*)<!--/fig-->")


@attrs.frozen
class Case:
    """One benchmark case's results, and the file they were read from."""

    name: str
    file: Path
    data: Mapping[str, Any]


def cases_of(file: Path, document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The cases one results file holds: a ``make bench`` run lists them in ``meta.cases``
    (``results`` holds each); a file of another tool (``benchmarks._export``,
    ``benchmarks._fleet``) is one case, named after the date in its file name."""
    meta = document.get("meta")
    if isinstance(meta, Mapping) and "cases" in meta:
        results = document["results"]
        return {str(name): results[name] for name in meta["cases"]}
    match = DATED.match(file.name)
    if match is None:
        raise ValueError(f"{file.name}: not a dated results file (YYYY-MM-DD-NAME.json)")
    return {match["name"]: document}


def latest(results: Path = RESULTS) -> dict[str, Case]:
    """Every case of the kept results files; refuses a case that two files hold (keep only
    the latest file per case: ``git rm`` the older one, git's log keeps it)."""
    found: dict[str, Case] = {}
    for file in sorted(results.glob("*.json")):
        if DATED.match(file.name) is None:
            continue  # latest.json and other local runs are not kept in git
        document = json.loads(file.read_text(encoding="utf-8"))
        for name, data in cases_of(file, document).items():
            if name in found:
                raise ValueError(
                    f"case {name!r} is in {found[name].file.name} and {file.name}: keep only "
                    "the latest file per case (git rm the older one; git's log keeps it)"
                )
            found[name] = Case(name, file, data)
    return found


# --- How each figure is computed ----------------------------------------------------------


def _at(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (keys may hold spaces, not dots)."""
    value: Any = data
    for key in path.split("."):
        value = value[key]
    return value


def quartiles(stats: Mapping[str, float], digits: int = 2) -> str:
    """``median [first quartile - third quartile]``, as the performance tables show ratios."""
    median, q1, q3 = (f"{stats[key]:.{digits}f}" for key in ("median", "q1", "q3"))
    return f"{median} [{q1}{DASH}{q3}]"


def spread(values: Sequence[float], digits: int) -> str:
    """``median (min - max)`` of per-round values."""
    median, low, high = (f"{v:.{digits}f}" for v in (statistics.median(values), *_ends(values)))
    return f"{median} ({low}{DASH}{high})"


def _ends(values: Sequence[float]) -> tuple[float, float]:
    return min(values), max(values)


def _per_round(numerators: Iterable[float], denominators: Iterable[float]) -> list[float]:
    return [a / b for a, b in zip(numerators, denominators, strict=True)]


Figure = Callable[[Mapping[str, Case]], str]


def ratio(case: str, path: str, *, digits: int = 2, with_quartiles: bool = False) -> Figure:
    """A median ratio (with its quartiles) at ``path`` in a case's results."""

    def figure(cases: Mapping[str, Case]) -> str:
        stats = _at(cases[case].data, path)
        return quartiles(stats, digits) if with_quartiles else f"{stats['median']:.{digits}f}"

    return figure


def _both(name: str, case: str, path: str) -> dict[str, Figure]:
    """``name`` (the median) and ``name.q`` (with its quartiles) of one ratio."""
    return {
        name: ratio(case, path),
        f"{name}.q": ratio(case, path, with_quartiles=True),
    }


def _decode_vs_floor(cases: Mapping[str, Case]) -> str:
    contenders = cases["decode"].data["contenders"]
    ours = contenders["asyncapi_client"]["us_per_order"]["values"]
    floor = contenders["orjson.loads + 3 Decimal"]["us_per_order"]["values"]
    return spread(_per_round(ours, floor), 2)


def _hooks(kind: str, concurrency: str) -> Figure:
    """What ``with_response`` or ``telemetry=True`` costs over a plain call, per round."""

    def figure(cases: Mapping[str, Case]) -> str:
        results = cases["hooks"].data["results"][concurrency]
        rounds = _per_round(results[kind]["values"], results["asyncapi_client"]["values"])
        return f"{statistics.median(rounds):.2f}"

    return figure


def _limiter(kind: str, measure: str) -> Figure:
    """``median (min - max)`` µs of one limiter configuration (7 rounds)."""

    def figure(cases: Mapping[str, Case]) -> str:
        rounds = cases["limiter"].data["rounds"][kind]
        digits = 1 if measure.startswith("ask") else 0
        return spread([round_[measure] for round_ in rounds], digits)

    return figure


def _limiter_ratio(kind: str, over: str, measure: str, *, added: bool = False) -> Figure:
    """Per round, ``kind`` over ``over``: the ratio as ``median (min - max)``, or with
    ``added`` the median difference in µs."""

    def figure(cases: Mapping[str, Case]) -> str:
        rounds = cases["limiter"].data["rounds"]
        mine = [round_[measure] for round_ in rounds[kind]]
        theirs = [round_[measure] for round_ in rounds[over]]
        if added:
            return f"{statistics.median(a - b for a, b in zip(mine, theirs, strict=True)):.0f}"
        return spread(_per_round(mine, theirs), 2)

    return figure


def _value(case: str, path: str, template: str) -> Figure:
    """``template`` formatted with the number at ``path`` (``{:.1f}``, ``1/{:.0f}``...)."""

    def figure(cases: Mapping[str, Case]) -> str:
        return template.format(_at(cases[case].data, path))

    return figure


def _sync_extra(cases: Mapping[str, Case]) -> str:
    """µs of client CPU a SyncClient call costs over the same call on Client (medians)."""
    contenders = cases["sync"].data["contenders"]
    extra = contenders["SyncClient"]["cpu_us"]["median"]
    extra -= contenders["asyncapi_client"]["cpu_us"]["median"]
    return f"{extra:.0f}"


def _pool_percent(cases: Mapping[str, Case]) -> str:
    """The least and most ``pool()`` costs over raw, as percent: ``6 - 10``."""
    medians = [
        _at(cases["pool-c1"].data, "ratios.ours_vs_raw.median"),
        _at(cases["pool-c64"].data, "ratios.ours_vs_raw.median"),
        _at(cases["pool-outside"].data, "runs.c1-cycle.ratios.ours_vs_raw.median"),
        _at(cases["pool-outside"].data, "runs.c64-cycle.ratios.ours_vs_raw.median"),
    ]
    return f"{(min(medians) - 1) * 100:.0f}{DASH}{(max(medians) - 1) * 100:.0f}"


def _date(case: str) -> Figure:
    def figure(cases: Mapping[str, Case]) -> str:
        match = DATED.match(cases[case].file.name)
        assert match is not None
        return match["date"]

    return figure


def _commit(case: str) -> Figure:
    def figure(cases: Mapping[str, Case]) -> str:
        return str(json.loads(cases[case].file.read_text(encoding="utf-8"))["meta"]["commit"])

    return figure


def _file(case: str) -> Figure:
    def figure(cases: Mapping[str, Case]) -> str:
        return str(cases[case].file.relative_to(ROOT))

    return figure


#: The pool() rows of the tables: (name, case, where its ratios are in the case's results).
_POOL_ROWS = [
    ("c1", "pool-c1", "ratios"),
    ("c64", "pool-c64", "ratios"),
    ("crawler", "pool-crawler-c64", "ratios"),
    ("outside.c1", "pool-outside", "runs.c1-cycle.ratios"),
    ("outside.c64", "pool-outside", "runs.c64-cycle.ratios"),
    ("outside.crawler", "pool-outside", "runs.c64-new.ratios"),
]
#: The ratios of each pool() row: ours, the minimal typed client, ours over it, raw over raw.
_POOL_RATIOS = {
    "ours_vs_raw": "pool",
    "minimal_vs_raw": "typed",
    "ours_vs_minimal": "ours-typed",
    "noise_floor": "floor",
}
_HTTPX = "contenders.httpx+pydantic.cpu_ratio_vs_raw"
_LIMITERS = {"local-m0": "local.m0", "local": "local", "redis-m0": "redis.m0", "redis": "redis"}
_MEASURES = {"cpu_us": "cpu", "wall_us": "wall", "ask_cpu_us": "ask.cpu", "ask_wall_us": "ask.wall"}

#: Every figure a page may quote, by name.
FIGURES: dict[str, Figure] = {
    "run.date": _date("pool-c1"),
    "run.commit": _commit("pool-c1"),
    "run.file": _file("pool-c1"),
    # The run of the other cases, when the pool() cases were measured again on their own.
    "rest.date": _date("limiter"),
    "rest.file": _file("limiter"),
    **{
        name: figure
        for row, case, path in _POOL_ROWS
        for which, ratio_name in _POOL_RATIOS.items()
        for name, figure in _both(f"{ratio_name}.{row}", case, f"{path}.{which}").items()
    },
    "pool.percent": _pool_percent,
    "httpx.c1": ratio("pool-c1", _HTTPX, digits=1),
    "httpx.c64": ratio("pool-c64", _HTTPX, digits=0),
    "orders.raw.q": ratio(
        "orders", "contenders.asyncapi_client.cpu_ratio_vs_raw", with_quartiles=True
    ),
    **_both("orders.c8", "orders-c8", "contenders.asyncapi_client.cpu_ratio_vs_aiohttp_pydantic"),
    "orders.10k.q": ratio(
        "orders-10k",
        "contenders.asyncapi_client.cpu_ratio_vs_aiohttp_pydantic",
        with_quartiles=True,
    ),
    "decode.us": _value("decode", "contenders.asyncapi_client.us_per_order.median", "{:.1f}"),
    "decode.us.spread": lambda cases: spread(
        _at(cases["decode"].data, "contenders.asyncapi_client.us_per_order.values"), 2
    ),
    "decode.floor": _decode_vs_floor,
    "walk.leaderboard": _value("streams", "walks.leaderboard.ratio.median", "{:.2f}"),
    "walk.cursor": _value("streams", "walks.cursor.ratio.median", "{:.2f}"),
    "memory.mb": _value("memory", "growth_mb.asyncapi_client.median", "{:.1f}"),
    "cache.hit": _value("cache", "ratios.request/memory hit cpu.median", "1/{:.0f}"),
    "hooks.with_response": _hooks("with_response", "c1"),
    "hooks.telemetry": _hooks("telemetry=True", "c1"),
    "sync.ratio": _value("sync", "cpu_ratio_vs_async.median", "{:.2f}"),
    "sync.us": _value("sync", "contenders.SyncClient.cpu_us.median", "{:.0f}"),
    "sync.client.us": _value("sync", "contenders.asyncapi_client.cpu_us.median", "{:.0f}"),
    "sync.extra": _sync_extra,
    "sync.handover": _value("sync", "handover_us.threads.median", "{:.1f}"),
    "sync.nothing": _value("sync", "handover_us.sync_client.median", "{:.1f}"),
    **{
        f"limiter.{kind_name}.{measure_name}": _limiter(kind, measure)
        for kind, kind_name in _LIMITERS.items()
        for measure, measure_name in _MEASURES.items()
    },
    "limiter.margin.local": _limiter_ratio("local", "local-m0", "cpu_us"),
    "limiter.margin.redis": _limiter_ratio("redis", "redis-m0", "cpu_us"),
    "limiter.margin.local.ask": _limiter_ratio("local", "local-m0", "ask_cpu_us"),
    "limiter.margin.redis.ask": _limiter_ratio("redis", "redis-m0", "ask_cpu_us"),
    "limiter.redis.added": _limiter_ratio("redis", "local", "cpu_us", added=True),
    "limiter.redis.ratio": _limiter_ratio("redis", "local", "cpu_us"),
    "limiter.redis.ask.added": _limiter_ratio("redis", "local", "ask_cpu_us", added=True),
    "export.mb": _value("export", "memory.growth_mb", "{:.0f}"),
    "watchfleet.date": _date("watchfleet"),
    **{
        f"watchfleet.{name}.{p}": _value("watchfleet", path.format(p), template)
        for p in ("1", "4", "16")
        for name, path, template in (
            ("rpi", "fleets.{}.requests_per_interval", "{:.1f}"),
            ("vs", "vs_alone.{}", "{:.2f}"),
            ("lag", "fleets.{}.scheduler_lag_ms.p99", "{:.1f}"),
        )
    },
    **{
        f"watchfleet.{name}.{p}": _value("watchfleet", f"fleets.{p}.delay_ms.{name}", "{:.1f}")
        for p in ("4", "16")
        for name in ("p50", "p99")
    },
}


# --- Pages ---------------------------------------------------------------------------------


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that quote figures: the README, the docs and the benchmarks' README."""
    return [
        root / "README.md",
        *sorted((root / "docs").rglob("*.md")),
        root / "benchmarks" / "README.md",
    ]


@attrs.frozen
class Quoted:
    """One figure as a page quotes it, and what the latest results say."""

    page: Path
    line: int
    name: str
    quoted: str
    measured: str | None  # None: no such figure

    def __str__(self) -> str:
        where = f"{self.page.relative_to(ROOT)}:{self.line}"
        if self.measured is None:
            return f"{where}: no figure named {self.name!r} (see benchmarks/_figures.py)"
        return f"{where}: {self.name} is quoted as {self.quoted!r}, measured {self.measured!r}"


def quoted(page: Path, cases: Mapping[str, Case]) -> list[Quoted]:
    """Every figure ``page`` quotes, with the text the latest results give it."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in MARKED.finditer(text):
        name = match["name"]
        measured = FIGURES[name](cases) if name in FIGURES else None
        line = text.count("\n", 0, match.start()) + 1
        found.append(Quoted(page, line, name, match["text"], measured))
    return found


def rewrite(page: Path, cases: Mapping[str, Case]) -> int:
    """Put the latest figures into ``page``; how many changed."""
    text = page.read_text(encoding="utf-8")
    changed = 0

    def latest_text(match: re.Match[str]) -> str:
        nonlocal changed
        if match["name"] not in FIGURES:
            return match[0]
        measured = FIGURES[match["name"]](cases)
        changed += measured != match["text"]
        return f"<!--fig {match['name']}-->{measured}<!--/fig-->"

    new = MARKED.sub(latest_text, text)
    if new != text:
        page.write_text(new, encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the figures in place")
    args = parser.parse_args(argv)
    cases = latest()
    if args.write:
        for page in pages():
            changed = rewrite(page, cases)
            if changed:
                print(f"{page.relative_to(ROOT)}: {changed} figures updated")
    wrong = [q for page in pages() for q in quoted(page, cases) if q.quoted != q.measured]
    for figure in wrong:
        print(figure)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
