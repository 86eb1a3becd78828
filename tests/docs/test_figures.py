"""The figures the README and the docs quote are the latest benchmark results, everywhere.

A reader compares pages: the README's "about 1.2x raw aiohttp" beside its own "1.06-1.10x"
teaches them to trust neither. Every measured figure is quoted between markers
(``<!--fig NAME-->1.07<!--/fig-->``) and computed from the one results file kept per case
(``benchmarks/_figures.py``); a number that looks measured but is not marked fails here,
unless it is listed below with where it comes from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import _figures
from benchmarks._figures import FIGURES, MARKED, ROOT, latest, pages, quoted, rewrite

#: Pages where a reader meets figures as claims (the benchmarks' README, also a docs page,
#: is the method and the history of past runs: its latest figures are marked, the rest
#: are dated history by design).
CLAIM_PAGES = [
    page
    for page in pages()
    if page.name not in ("changelog.md", "benchmarks.md")
    and page != ROOT / "benchmarks" / "README.md"
]
#: What a measured figure looks like in prose: a ratio (``1.2x``, ``4-19x``, ``30-40 times``,
#: ``1/22``) or a cost (``3.8 µs``, ``1.8 MB``); a target (``≤ 1/20``) is not one.
MEASURED = re.compile(
    r"(?<![\w.])(?<!≤ )\d[\d,.]*(?:\s*(?:-|\u2013|to)\s*\d[\d,.]*)?"
    r"(?:\s?[x\u00d7](?!\w)|\s+times\b|\s?µs\b|\s?MB\b)"
    r"|(?<![\w.])(?<!≤ )1/\d+\b"
)
#: Figures that are not results of a benchmark run, each with the page that states it.
NOT_FROM_A_RUN = {
    # A size computed from the layout of a checkpoint entry, not measured by a run.
    ("docs/guides/walks.md", "13 MB"),
    # The cost of reading walk.checkpoint, timed with timeit when it was written.
    ("docs/guides/walks.md", "10 to 15 µs"),
    # The size of a hostile body that crashes an old orjson, not a cost.
    ("docs/guides/platforms.md", "2 MB"),
    # How often waiting requests polled before, a count of the design, not a cost.
    ("docs/guides/rate-limits.md", "1,000 times"),
    # The public-only build's cost, from the A/B record (benchmarks/ab-request-path.md).
    ("docs/performance.md", "1.18x"),
    ("docs/performance.md", "1.25x"),
}


def _prose(text: str) -> str:
    """``text`` without fenced code, inline code, and the figures already marked."""
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return MARKED.sub("", text)


def test_results_keep_one_file_per_case() -> None:
    """Each case's latest results are in exactly one file; older runs are git's history."""
    cases = latest()  # refuses a case held by two files
    for name in ("pool-c1", "pool-c64", "pool-outside", "cache", "sync", "limiter", "export"):
        assert name in cases, f"no results file holds the {name!r} case"


def test_every_quoted_figure_is_the_latest_measured() -> None:
    cases = latest()
    wrong = [str(q) for page in pages() for q in quoted(page, cases) if q.quoted != q.measured]
    assert not wrong, (
        "figures differ from benchmarks/results/ (python -m benchmarks._figures --write "
        "puts the latest in):\n" + "\n".join(wrong)
    )


def test_every_figure_reads_from_the_kept_results() -> None:
    """A new results file that lacks what a figure reads fails here, naming the figure."""
    cases = latest()
    for name, figure in FIGURES.items():
        try:
            figure(cases)
        except (KeyError, TypeError, ValueError) as error:
            pytest.fail(f"figure {name}: {error!r}")


@pytest.mark.parametrize(
    ("page", "names"),
    [
        ("README.md", {"pool.c1", "pool.c64", "httpx.c1", "httpx.c64", "cache.hit"}),
        ("docs/index.md", {"pool.c1", "httpx.c1"}),
        ("docs/performance.md", {"pool.c1.q", "pool.c64.q", "httpx.c64", "cache.hit"}),
        ("docs/guides/caching.md", {"cache.hit"}),
        ("docs/guides/sync.md", {"sync.ratio", "sync.handover"}),
        ("docs/guides/rate-limits.md", {"limiter.redis.cpu", "limiter.redis.added"}),
        ("benchmarks/README.md", {"pool.c1.q", "pool.outside.c64.q", "run.file"}),
    ],
)
def test_the_pages_quote_their_headline_figures(page: str, names: set[str]) -> None:
    found = {q.name for q in quoted(ROOT / page, latest())}
    assert names <= found, f"{page} does not quote {sorted(names - found)}"


@pytest.mark.parametrize("page", CLAIM_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_no_measured_figure_is_left_unmarked(page: Path) -> None:
    """A number that reads as measured comes from the results, or is listed with its source."""
    shown = str(page.relative_to(ROOT))
    allowed = {text for where, text in NOT_FROM_A_RUN if where == shown}
    prose = _prose(page.read_text(encoding="utf-8"))
    unmarked = [m[0] for m in MEASURED.finditer(prose) if m[0] not in allowed]
    assert not unmarked, f"{shown}: figures not read from benchmarks/results/: {unmarked}"


def test_the_listed_exceptions_are_still_on_their_pages() -> None:
    for page, text in NOT_FROM_A_RUN:
        assert text in (ROOT / page).read_text(encoding="utf-8"), (page, text)


def test_pages_name_only_results_files_that_are_kept() -> None:
    """A page that cites a results file cites one in the tree (a past run: ``git show``)."""
    cited = re.compile(r"(?<![:/\w])(?:benchmarks/)?results/(\d{4}-\d{2}-\d{2}-[\w-]+\.json)")
    sources = [*pages(), ROOT / "benchmarks" / "ab-request-path.md"]
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in sources
        for name in cited.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / "benchmarks" / "results" / name).exists()
    ]
    assert not missing, missing


def _results(where: Path, name: str, cases: dict[str, dict[str, object]]) -> None:
    document = {"meta": {"cases": list(cases), "commit": "abc1234"}, "results": cases}
    (where / name).write_text(json.dumps(document), encoding="utf-8")


def test_a_case_in_two_files_is_refused(tmp_path: Path) -> None:
    _results(tmp_path, "2026-01-01-full.json", {"cache": {}})
    _results(tmp_path, "2026-02-01-cache.json", {"cache": {}})
    (tmp_path / "latest.json").write_text("{}", encoding="utf-8")  # a local run: not read
    with pytest.raises(ValueError, match=r"'cache' is in 2026-01-01-full.json and 2026-02-01"):
        latest(tmp_path)


def test_a_wrong_figure_is_found_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hit = {"median": 21.6, "q1": 21.5, "q3": 21.7, "min": 21.4, "max": 22.0, "values": [21.6]}
    _results(
        tmp_path, "2026-01-01-full.json", {"cache": {"ratios": {"request/memory hit cpu": hit}}}
    )
    monkeypatch.setattr(_figures, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "A hit costs <!--fig cache.hit-->1/30<!--/fig--> of a request; "
        "<!--fig no.such-->9<!--/fig-->.\n",
        encoding="utf-8",
    )
    cases = latest(tmp_path)
    found = quoted(page, cases)
    assert [(q.name, q.quoted, q.measured) for q in found] == [
        ("cache.hit", "1/30", "1/22"),
        ("no.such", "9", None),
    ]
    assert "page.md:1: cache.hit is quoted as '1/30', measured '1/22'" in str(found[0])
    assert rewrite(page, cases) == 1
    assert "<!--fig cache.hit-->1/22<!--/fig-->" in page.read_text(encoding="utf-8")
