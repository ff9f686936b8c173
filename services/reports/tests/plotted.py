"""What a page's plotly figure draws, read in the browser once the figure is ready."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

TRACES = (
    "id => document.getElementById(id).data.map(t => ({name: t.name,"
    " x: Array.from(t.x), y: Array.from(t.y), shape: t.line && t.line.shape}))"
)


def plotted_traces(page: Page, plot_id: str) -> dict[str, dict[str, Any]]:
    """The traces of the figure ``plot_id`` by name: ``x``, ``y`` and the line's ``shape``."""
    page.wait_for_selector(f"#{plot_id}[data-ready=true]", timeout=15000)
    return {trace["name"]: trace for trace in page.evaluate(TRACES, plot_id)}
