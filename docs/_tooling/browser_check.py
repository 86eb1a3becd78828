"""Check the built site in a real browser: headless Chromium over its DevTools protocol.

``python docs/_tooling/browser_check.py site`` serves ``site/`` on 127.0.0.1, opens every page
of the site (the front page, every guide, the API reference...) and fails, naming the page,
on any console error, uncaught exception, failed request or HTTP error status, or a page with
no heading. It then opens the front page, waits until the site search has loaded its index
(the search worker's first answer, not a time), types ``RedisLimiter`` into the search and
waits for a result that leads to the fleet reference, and saves a screenshot of the front
page as ``site/screenshot.png`` for a person to look at. Exit status 0 when everything held,
1 if not. Every wait is for a condition in the page (a promise it resolves), bounded by a
timeout that names what did not happen.

Chromium is Debian's ``chromium`` (``CHROMIUM`` names another binary); the Makefile installs
it. The protocol is spoken with aiohttp's websocket client, a dependency of the library.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import http.server
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]
PAGE_TIMEOUT = 30.0  # seconds for one page to load and go quiet
QUIET = 0.5  # seconds without a request in flight that count as "the page is done"
SEARCH_FOR = "RedisLimiter"


class Quiet(http.server.SimpleHTTPRequestHandler):
    """The site's files, without a log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(site: Path) -> Iterator[str]:
    """Serve ``site`` on an ephemeral loopback port; yields the base URL."""
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def chromium() -> Iterator[str]:
    """Start headless Chromium with a fresh profile; yields its DevTools websocket URL."""
    binary = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if binary is None:
        raise SystemExit("no chromium: install Debian's chromium package (make docs does)")
    # Chromium's crash handlers outlive it in sessions of their own, but write elsewhere
    # (~/.config/chromium); a file one of them might leave is no reason to fail the check.
    with tempfile.TemporaryDirectory(prefix="docs-browser-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helper processes in a process group of its own
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not port_file.exists() or len(port_file.read_text().split()) < 2:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"chromium did not start (exit status {process.poll()})")
                time.sleep(0.05)  # polling the file Chromium writes once it listens
            port, path = port_file.read_text().split()[:2]
            yield f"ws://127.0.0.1:{port}{path}"
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop Chromium and every helper it started (its process group), and return once none
    is left: a helper still writing into the profile would make its removal fail."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + 10
    while _group_alive(process.pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.05)  # polling: the helpers are not our children, nothing to wait() on


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (zombies, which write nothing, aside)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[2]) == group and fields[0] != "Z":  # state, ppid, pgrp, ...
                return True
    return False


class Browser:
    """One DevTools connection; a page target attached in flat mode, its events in a queue."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.session: str | None = None

    async def read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self.replies.pop(data["id"], None)
                if future is None or future.done():
                    continue  # its caller gave up waiting
                if "error" in data:
                    future.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
            else:
                self.events.put_nowait(data)

    async def call(
        self, method: str, session: bool = True, wait: float = PAGE_TIMEOUT, **params: Any
    ) -> dict[str, Any]:
        """Send one DevTools command; its result, or ``TimeoutError`` after ``wait`` s."""
        number = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.replies[number] = future
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session and self.session is not None:
            message["sessionId"] = self.session
        await self.ws.send_str(json.dumps(message))
        try:
            return await asyncio.wait_for(future, wait)
        finally:
            self.replies.pop(number, None)  # a reply after the timeout is dropped

    async def evaluate(self, expression: str, wait: float = PAGE_TIMEOUT) -> Any:
        """The value of ``expression`` in the page, a promise's once it settles."""
        result = await self.call(
            "Runtime.evaluate",
            wait=wait,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        return result["result"].get("value")


def _problem(event: dict[str, Any], base: str) -> str | None:
    """What is wrong in one DevTools event, or None."""
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        text = details.get("exception", {}).get("description") or details.get("text")
        return f"uncaught exception: {text}"
    if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
        texts = [str(arg.get("value", arg.get("description", ""))) for arg in params["args"]]
        return f"console.{params['type']}: {' '.join(texts)}"
    if method == "Log.entryAdded" and params["entry"]["level"] == "error":
        entry = params["entry"]
        return f"console error: {entry['text']} {entry.get('url', '')}".rstrip()
    if method == "Network.loadingFailed" and not params.get("canceled"):
        return f"request failed: {params['errorText']} (request {params['requestId']})"
    if method == "Network.responseReceived":
        response = params["response"]
        if response["status"] >= 400:
            return f"HTTP {response['status']}: {response['url']}"
        if not response["url"].startswith((base, "data:", "blob:")):
            return f"request off the site: {response['url']}"
    return None


async def visit(browser: Browser, url: str, base: str) -> list[str]:
    """Load ``url``; the problems seen until it loaded and no request was in flight."""
    while not browser.events.empty():
        browser.events.get_nowait()
    await browser.call("Page.navigate", url=url)
    problems: list[str] = []
    in_flight: set[str] = set()
    loaded = False
    deadline = time.monotonic() + PAGE_TIMEOUT
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            problems.append(f"not loaded and quiet after {PAGE_TIMEOUT:.0f} s")
            break
        try:
            event = await asyncio.wait_for(browser.events.get(), QUIET if loaded else left)
        except TimeoutError:
            if loaded and not in_flight:
                break  # loaded, and nothing asked for during QUIET seconds
            continue
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent" and params.get("loaderId"):
            in_flight.add(params["requestId"])  # (a worker's own script has no loader here)
        elif method in ("Network.loadingFinished", "Network.loadingFailed"):
            in_flight.discard(params["requestId"])
        elif method == "Page.loadEventFired":
            loaded = True
        problem = _problem(event, base)
        if problem is not None:
            problems.append(problem)
    heading = await browser.evaluate(
        "(document.querySelector('article h1') || {}).textContent || ''"
    )
    if not str(heading).strip():
        problems.append("no <h1> in the page's article: the content did not render")
    return problems


#: Run in every new document before its own scripts: the site search's web worker answers
#: for the first time once it has loaded ``search/search_index.json`` and built its index
#: from it (Material's worker posts nothing before that), so that first answer resolves
#: ``window.__searchIndexLoaded``. The check waits on that promise instead of a time.
INDEX_LOADED_HOOK = """
(() => {
  let loaded;
  window.__searchIndexLoaded = new Promise(resolve => { loaded = resolve; });
  const Native = window.Worker;
  window.Worker = class extends Native {
    constructor(url, options) {
      super(url, options);
      if (String(url).includes("search")) {
        this.addEventListener("message", () => loaded(), { once: true });
      }
    }
  };
})();
"""
#: Resolves with the result links (href and text) once one leads to the fleet reference and
#: names what was searched for: a MutationObserver on the result list, no polling.
RESULTS_FOUND = """
new Promise(resolve => {
  const list = document.querySelector(".md-search-result");
  const hits = () => Array.from(document.querySelectorAll(".md-search-result__link"))
    .map(a => a.getAttribute("href") + " " + a.textContent);
  const found = () => hits().some(h => h.includes("reference/fleet/") && h.includes(%s));
  if (found()) { resolve(hits()); return; }
  new MutationObserver((_, observer) => {
    if (found()) { observer.disconnect(); resolve(hits()); }
  }).observe(list, { childList: true, subtree: true });
})
"""
INDEX_TIMEOUT = 120.0  # seconds for the worker to load and build the index on a busy machine


async def search(browser: Browser, base: str) -> list[str]:
    """Type into the site search once its index is loaded; the results must lead to the
    fleet reference."""
    hook = await browser.call("Page.addScriptToEvaluateOnNewDocument", source=INDEX_LOADED_HOOK)
    try:
        await browser.call("Page.navigate", url=base)
        try:
            await browser.evaluate("window.__searchIndexLoaded", wait=INDEX_TIMEOUT)
        except TimeoutError:
            index = "search/search_index.json"
            return [f"the search index ({index}) was not loaded in {INDEX_TIMEOUT:.0f} s"]
    finally:
        await browser.call(
            "Page.removeScriptToEvaluateOnNewDocument", identifier=hook["identifier"]
        )
    await browser.evaluate("document.querySelector('input.md-search__input').focus()")
    for char in SEARCH_FOR:  # typed key by key, as a person would: the search reads keyup
        await browser.call("Input.dispatchKeyEvent", type="keyDown", text=char, key=char)
        await browser.call("Input.dispatchKeyEvent", type="keyUp", key=char)
    try:
        await browser.evaluate(RESULTS_FOUND % json.dumps(SEARCH_FOR), wait=PAGE_TIMEOUT)
    except TimeoutError:
        found = await browser.evaluate(
            "Array.from(document.querySelectorAll('.md-search-result__link'))"
            ".map(a => a.getAttribute('href') + ' ' + a.textContent)"
        )
        return [f"search for {SEARCH_FOR!r} found no result in the fleet reference: {found}"]
    return []


def pages(site: Path, base: str) -> list[str]:
    """Every page of the built site (each ``index.html`` under it), as URLs on our server."""
    found = [
        base + path.parent.relative_to(site).as_posix() + "/"
        for path in site.rglob("index.html")
        if path.relative_to(site).parts[0] != "assets"
    ]
    return sorted(url.replace("/./", "/") for url in found)


async def check(site: Path, base: str, endpoint: str) -> int:
    """Every page, then the search, then the screenshot; 1 if anything failed."""
    failures = 0
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(endpoint, max_msg_size=0) as ws,
    ):
        browser = Browser(ws)
        reader = asyncio.create_task(browser.read())
        try:
            target = await browser.call("Target.createTarget", url="about:blank")
            attached = await browser.call(
                "Target.attachToTarget", targetId=target["targetId"], flatten=True
            )
            browser.session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                await browser.call(f"{domain}.enable")
            await browser.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            urls = pages(site, base)
            for url in urls:
                problems = await visit(browser, url, base)
                failures += bool(problems)
                print(f"{'ok  ' if not problems else 'FAIL'} {url[len(base) - 1 :]}")
                for problem in problems:
                    print(f"       {problem}")
            problems = await search(browser, base)
            failures += bool(problems)
            print(f"{'ok  ' if not problems else 'FAIL'} search finds {SEARCH_FOR}")
            for problem in problems:
                print(f"       {problem}")
            await visit(browser, base, base)
            shot = await browser.call("Page.captureScreenshot", format="png")
            (site / "screenshot.png").write_bytes(base64.b64decode(shot["data"]))
            print(f"screenshot of the front page: {site / 'screenshot.png'}")
            print(f"{len(urls) + 1 - failures} passed, {failures} failed")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs' site_dir)")
    site = parser.parse_args().site.resolve()
    if not (site / "index.html").exists():
        raise SystemExit(f"{site} has no index.html: build the site first (make docs)")
    with serving(site) as base, chromium() as endpoint:
        return asyncio.run(check(site, base, endpoint))


if __name__ == "__main__":
    sys.exit(main())
