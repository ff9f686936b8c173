"""Serving the report server's static files (``ax3l.reports.routes.assets``: plotly.js and the
pages' script, read and gzipped once, an ETag from their content) against Starlette's
``StaticFiles`` behind ``GZipMiddleware`` (a file read and compressed at every request, an
ETag from its size and time). In process, over httpx's ASGI transport, for the 5.2 MB strict
plotly bundle and the 14 kB ``reports.js``: a first load (gzip accepted) and a revalidation
(``If-None-Match``, 304). Prints the median time of a request of each.

    .venv/bin/python bench/bench_assets.py              # 7 rounds
    .venv/bin/python bench/bench_assets.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ax3l.reports.routes import assets

# (what is measured, the product's path, the same file's path under StaticFiles)
FILES = (
    ("plotly.js 5.2 MB", "/static/plotly.min.js", "/static/plotly-strict.min.js"),
    ("reports.js 14 kB", "/static/reports.js", "/static/reports.js"),
)


def product_app() -> ASGIApp:
    app = FastAPI()
    app.include_router(assets.router)
    return app


def library_app() -> ASGIApp:
    return Starlette(
        routes=[Mount("/static", StaticFiles(directory=assets.STATIC))],
        middleware=[Middleware(GZipMiddleware, compresslevel=6)],
    )


async def timings(app: ASGIApp, path: str, rounds: int) -> tuple[float, float]:
    """Median seconds of a first load and of a revalidation of ``path``."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        gzip = {"Accept-Encoding": "gzip"}
        first = await client.get(path, headers=gzip)  # warm: the product reads its files once
        assert first.status_code == 200 and first.headers["content-encoding"] == "gzip"
        etag = first.headers["etag"]
        loads, checks = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            reply = await client.get(path, headers=gzip)
            loads.append(time.perf_counter() - start)
            assert reply.status_code == 200
            start = time.perf_counter()
            reply = await client.get(path, headers={**gzip, "If-None-Match": etag})
            checks.append(time.perf_counter() - start)
            assert reply.status_code == 304
    return statistics.median(loads), statistics.median(checks)


async def measure(rounds: int) -> None:
    for name, ours, theirs in FILES:
        for label, app, path in (
            ("assets.py", product_app(), ours),
            ("StaticFiles + GZipMiddleware", library_app(), theirs),
        ):
            load, check = await timings(app, path, rounds)
            print(f"{name}, {label}: load {load * 1e3:.2f} ms, revalidation {check * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(measure(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
