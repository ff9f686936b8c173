"""The event log: ``/events`` and ``/events/{id}`` pages, ``/api/events`` JSON."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from ax3l.reports import event_contents
from ax3l.reports.deps import (
    CyclesDep,
    DatabaseDep,
    MonitorDep,
    OrchestratorDep,
    PageDep,
    SettingsDep,
)
from ax3l.reports.models.events import (
    EventDetail,
    EventPage,
    EventPageQuery,
    EventQuery,
)
from ax3l.reports.queries.events import event_detail, event_page
from ax3l.reports.status_report import build_status
from ax3l.shared.db.report_reads import EventFilter
from ax3l.shared.events import CATEGORIES, Category
from ax3l.shared.registry import PARAMETER_ORDER

router = APIRouter(prefix="/api/events", tags=["events"])
pages = APIRouter(tags=["pages"])

EventId = Annotated[int, Path(ge=1, le=2**63 - 1, description="the event's id")]


@router.get("", response_model=EventPage)
async def list_events(
    query: Annotated[EventQuery, Query()], db: DatabaseDep, settings: SettingsDep
) -> EventPage:
    """Events newest first, one page at a time.

    Filters combine: `category`, `event` (a name; it must belong to `category` when both are
    given), `parameter` (prompts record theirs) and `process`. Page with the returned
    cursors: `before=older_before` for older events, `after=newer_after` for newer ones.
    """
    where = EventFilter(
        category=None if query.category is None else str(query.category),
        name=query.event,
        parameter=query.parameter,
        process_id=query.process,
    )
    return await event_page(
        db, where, limit=query.limit or settings.page_size, before=query.before, after=query.after
    )


@router.get("/{event_id}", response_model=EventDetail)
async def get_event(event_id: EventId, db: DatabaseDep) -> EventDetail:
    """One event with its whole content; replies also come parsed (tool calls, reasoning,
    token usage, llama-server timings). `parent` and `children` link prompts and replies."""
    detail = await event_detail(db, event_id)
    if detail is None:
        raise HTTPException(404, f"there is no event {event_id}")
    return detail


def page_links(request: Request, query: EventPageQuery, **changes: Any) -> str:
    """The URL of this page with some query values changed (None drops a value)."""
    values = {
        "category": None if query.category is None else str(query.category),
        "event": query.event,
        "parameter": query.parameter,
        "process": query.process,
        "limit": query.limit,
        "refresh": query.refresh,
    }
    values.update(changes)
    kept = {key: item for key, item in values.items() if item is not None}
    return request.url.path + ("?" + urlencode(kept) if kept else "")


@pages.get("/events", response_class=HTMLResponse, summary="Event log page")
async def event_log_page(
    query: Annotated[EventPageQuery, Query()],
    db: DatabaseDep,
    monitor: MonitorDep,
    orchestrator: OrchestratorDep,
    cycles: CyclesDep,
    settings: SettingsDep,
    page: PageDep,
) -> HTMLResponse:
    """The event log, newest first, with the status bar, filters and refresh selector."""
    found, status = await asyncio.gather(
        list_events(query, db, settings),
        build_status(db, monitor, cycles, settings.status_timeout, orchestrator),
    )
    category = None if query.category is None else Category(query.category)
    choices = [
        choice
        for choice in event_contents.event_choices()
        if category is None or choice[2] == category
    ]
    parameters = list(PARAMETER_ORDER)
    if query.parameter and query.parameter not in parameters:
        parameters.append(query.parameter)
    request = page.request
    return page.render(
        "events.html",
        {
            "query": query,
            "refresh": query.refresh,
            "rows": found.events,
            "page": found,
            "status": status,
            "categories": [str(c) for c in CATEGORIES],
            "event_choices": choices,
            "all_event_choices": event_contents.event_choices(),
            "parameters": parameters,
            "show_parameter": query.event == "prompt_sent" or query.parameter is not None,
            "newest_url": page_links(request, query),
            "newer_url": page_links(request, query, after=found.newer_after)
            if found.newer_after
            else None,
            "older_url": page_links(request, query, before=found.older_before)
            if found.older_before
            else None,
        },
        headers={"Cache-Control": "no-store"},
    )


@pages.get("/events/{event_id}", response_class=HTMLResponse, summary="Event detail page")
async def event_page_detail(event_id: EventId, db: DatabaseDep, page: PageDep) -> HTMLResponse:
    """A prompt (source, parameter, the exact text sent), a reply (tool call, reasoning,
    usage, timings) or any other event's content."""
    detail = await get_event(event_id, db)
    return page.render(
        "event_detail.html",
        {
            "detail": detail,
            "event": detail.event,
            "pretty_content": event_contents.pretty(detail.content)
            if detail.content is not None
            else None,
            "run_links": event_contents.run_links(detail.content),
        },
    )
