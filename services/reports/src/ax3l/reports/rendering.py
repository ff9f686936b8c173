"""The Jinja environment: autoescaping on for every template, and display filters."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.templating import Jinja2Templates

from ax3l.reports.event_contents import label, pretty
from ax3l.reports.models.events import REFRESH_CHOICES
from ax3l.reports.routes.assets import static_url
from ax3l.shared.db.event_reads import parse_message

TEMPLATES = Path(__file__).parent / "templates"


def when(value: datetime | None) -> str:
    """A stored time (UTC) to the second."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def number(value: Any, digits: int = 2) -> str:
    """Integers as they are, other numbers rounded for reading; missing values as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def ago(seconds: float | None) -> str:
    """A duration in the past for reading: ``12 s ago``, ``3 min ago``, ``2 h ago``."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"{int(seconds)} s ago"
    if seconds < 90 * 60:
        return f"{int(seconds // 60)} min ago"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def value(item: Any) -> str:
    """A config value or any JSON scalar as compact text."""
    if item is None:
        return "–"
    if isinstance(item, float) and item.is_integer():
        return str(item)
    return str(item)


def parse_pretty(content: str | None) -> str:
    """A stored content for reading: indented JSON when it is JSON, else the text."""
    return "" if content is None else pretty(parse_message(content))


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        # Every template escapes: contents come from the LLM, prompts and configs.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=when,
        number=number,
        label=label,
        pretty=pretty,
        parse_pretty=parse_pretty,
        ago=ago,
        value=value,
    )
    env.globals["static_url"] = static_url
    # The refresh selector's periods (``_filters.refresh_select``) on every page that has one.
    env.globals["refresh_choices"] = REFRESH_CHOICES
    return Jinja2Templates(env=env)
