"""``/api-reference``: the JSON API, read from this app's own OpenAPI document, offline.

FastAPI's ``/docs`` loads Swagger UI from a CDN, so without internet it stays blank. This
page is rendered by the server from the same OpenAPI document, with no script at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import PageDep

pages = APIRouter(tags=["pages"])

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Parameter:
    name: str
    where: str
    required: bool
    kind: str
    rules: str
    description: str


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    description: str
    parameters: list[Parameter]
    response: str
    fields: list[tuple[str, str]] = field(default_factory=list)


def schema_text(schema: dict[str, Any]) -> str:
    """A short type for a parameter or field: ``integer``, ``string | null``, ``Event[]``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(schema_text(option) for option in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"{schema_text(schema.get('items', {}))}[]"
    return str(kind)


def rules_text(schema: dict[str, Any]) -> str:
    """Bounds, choices and default of a parameter, in words."""
    options = [schema, *schema.get("anyOf", [])]
    parts: list[str] = []
    for option in options:
        if "enum" in option:
            parts.append("one of " + ", ".join(str(v) for v in option["enum"]))
        for key, word in (("minimum", "≥"), ("maximum", "≤"), ("maxLength", "length ≤")):
            if key in option:
                parts.append(f"{word} {option[key]}")
        if "pattern" in option:
            parts.append(f"pattern {option['pattern']}")
    if "default" in schema and schema["default"] is not None:
        parts.append(f"default {schema['default']}")
    return "; ".join(parts)


def operations(document: dict[str, Any]) -> list[Operation]:
    """Every JSON operation of the document (pages, assets and the docs themselves left out)."""
    schemas = document.get("components", {}).get("schemas", {})
    found: list[Operation] = []
    for path, item in document.get("paths", {}).items():
        if not (path.startswith("/api/") or path in ("/health", "/ready")):
            continue
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            content = op.get("responses", {}).get("200", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema", {})
            response = schema_text(schema) if schema else "–"
            target = schemas.get(response, {})
            fields = [
                (name, schema_text(sub)) for name, sub in target.get("properties", {}).items()
            ]
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    summary=str(op.get("summary", "")),
                    description=str(op.get("description", "")),
                    parameters=[
                        Parameter(
                            name=str(p.get("name", "")),
                            where=str(p.get("in", "")),
                            required=bool(p.get("required", False)),
                            kind=schema_text(p.get("schema", {})),
                            rules=rules_text(p.get("schema", {})),
                            description=str(
                                p.get("description", p.get("schema", {}).get("description", ""))
                            ),
                        )
                        for p in op.get("parameters", [])
                    ],
                    response=response,
                    fields=fields,
                )
            )
    return found


@pages.get("/api-reference", response_class=HTMLResponse, summary="JSON API reference page")
async def api_reference_page(page: PageDep) -> HTMLResponse:
    """Every JSON endpoint with its parameters and response fields, from `/openapi.json`."""
    document = page.request.app.openapi()
    return page.render(
        "api_reference.html",
        {"operations": operations(document), "title": document.get("info", {}).get("title")},
    )
