"""``ax3l-reports``: serve the report pages and JSON API with uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn
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
    uvicorn.run(
        create_app(settings),
        host=args.host or settings.http_host,
        port=args.port or settings.reports_port,
        log_level=args.log_level,
        access_log=args.log_level == "debug",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
