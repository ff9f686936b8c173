"""Errors as the reader expects them: HTML pages for pages, JSON for the API, never a 500
for bad input (422 with a message) or a database outage (503)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException

from ax3l.shared.db.errors import DatabaseError

log = logging.getLogger(__name__)

JSON_PREFIXES = ("/api/", "/health", "/ready", "/openapi", "/docs", "/static/")


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(JSON_PREFIXES)


def validation_messages(errors: list[dict[str, Any]]) -> list[str]:
    """One readable line per problem: ``where: what``."""
    messages = []
    for error in errors:
        where = ".".join(
            str(part) for part in error.get("loc", ()) if part not in ("query", "path")
        )
        what = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        messages.append(f"{where}: {what}" if where else what)
    return messages


def error_page(request: Request, status: int, title: str, messages: list[str]) -> Response:
    templates: Jinja2Templates = request.app.state.resources.templates
    return templates.TemplateResponse(
        request, "error.html", {"title": title, "messages": messages}, status_code=status
    )


async def on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = jsonable_encoder(exc.errors())
    messages = validation_messages(errors)
    if wants_json(request):
        return JSONResponse({"message": "; ".join(messages), "detail": errors}, status_code=422)
    return error_page(request, 422, "That request cannot be shown", messages)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if wants_json(request):
        return JSONResponse(
            {"message": str(exc.detail), "detail": exc.detail},
            status_code=exc.status_code,
            headers=exc.headers,
        )
    title = "Not found" if exc.status_code == 404 else "Cannot show this page"
    return error_page(request, exc.status_code, title, [str(exc.detail)])


async def on_database_error(request: Request, exc: Exception) -> Response:
    # The error's text names the server, the database and the login: the log's, not a page's
    # (the pages need no login).
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    message = "The database is unavailable or failed; the report server's log says why."
    if wants_json(request):
        return JSONResponse({"message": message, "detail": message}, status_code=503)
    return error_page(request, 503, "Database unavailable", [message])


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(DatabaseError, on_database_error)
