"""``ax3l-reports``: serve the report pages and JSON API with uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError

from ax3l.reports.app import create_app
from ax3l.reports.settings import ReportsSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ax3l-reports", description="Ax3l's report pages and JSON API (read-only)."
    )
    parser.add_argument("--host", help="listen address (default AX3L_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="listen port (default AX3L_REPORTS_PORT)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    args = parser.parse_args(argv)
    try:
        settings = ReportsSettings()
    except ValidationError as exc:
        print(f"ax3l-reports: invalid settings: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    try:
        uvicorn.run(
            app,
            host=args.host or settings.http_host,
            port=args.port or settings.reports_port,
            log_level=args.log_level,
            access_log=args.log_level == "debug",
        )
    except SystemExit:
        if _fatal_database_error(app) is None:
            raise
    fatal = _fatal_database_error(app)
    if fatal is not None:
        # No wait can fix it (credentials, privileges, the database's name): say what to do.
        print(f"ax3l-reports: {fatal}", file=sys.stderr)
        return 2
    return 0


def _fatal_database_error(app: FastAPI) -> str | None:
    watch = getattr(app.state, "database_watch", None)
    return str(watch.fatal) if watch is not None and watch.fatal is not None else None


if __name__ == "__main__":
    sys.exit(main())
