"""Debian's Chromium driven by Playwright for the page tests, and what a plotly figure draws."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TRACES = (
    "id => document.getElementById(id).data.map(t => ({name: t.name,"
    " x: Array.from(t.x), y: Array.from(t.y), shape: t.line && t.line.shape}))"
)


def have_chromium() -> bool:
    return Path(CHROMIUM).exists()


@contextmanager
def headless_chromium() -> Iterator[Browser]:
    """Chromium, headless, closed on the way out."""
    with (
        sync_playwright() as playwright,
        closing(playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)) as chromium,
    ):
        yield chromium


def plotted_traces(page: Page, plot_id: str) -> dict[str, dict[str, Any]]:
    """The traces of the figure ``plot_id`` by name: ``x``, ``y`` and the line's ``shape``."""
    page.wait_for_selector(f"#{plot_id}[data-ready=true]", timeout=15000)
    return {trace["name"]: trace for trace in page.evaluate(TRACES, plot_id)}


class Watched:
    """A page whose console errors, page errors and failed requests are collected."""

    def _failed(self, request: Any) -> None:
        # net::ERR_ABORTED is the browser cancelling its own request (a navigation or the next
        # load leaving a favicon fetch in flight), not a failure of the server.
        if request.failure != "net::ERR_ABORTED":
            self.problems.append(f"request failed: {request.url} ({request.failure})")

    def __init__(self, page: Page):
        self.page = page
        self.problems: list[str] = []
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("console", self._console)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.problems.append(f"console: {message.text}")
