"""Static files served by the report server itself (no CDN: the pages work offline): plotly.js
and the pages' small script.

plotly.js is the strict bundle (``static/plotly-strict.min.js``, npm's
``plotly.js-strict-dist-min``, MIT, ``static/plotly-strict.LICENSE``), the same plotly.js as
the installed ``plotly`` package's but with its WebGL shader code precompiled: the regular
bundle builds that code with ``new Function``, which the pages' Content-Security-Policy (no
``unsafe-eval``) forbids, so its WebGL plots (``scattergl``, ``parcoords``) would not draw.
Without the file, the installed package's bundle serves.

The dashboard's small history plot is SVG (``scatter``) and loads the basic bundle instead
(``static/plotly-basic.min.js``, npm's ``plotly.js-basic-dist-min`` of the same version, MIT,
``static/plotly-basic.LICENSE``: scatter, bar and pie traces, no WebGL and no ``eval``): 1.2 MB
instead of 5.2 MB, which the browser evaluates on every load in a fraction of the time.

Pages link each asset with its version (``?v=``, from its ETag): such a request may be cached
for a year (``immutable``); a request without it, for a day. Both answer ``If-None-Match``
with 304 and send gzip to clients that accept it.

Hand-written on purpose: Starlette's ``StaticFiles`` behind ``GZipMiddleware`` reads and
compresses the file at every request, 328 ms against 19 ms a load of the strict bundle and
3.5 ms against 0.8 ms a revalidation (``bench/bench_assets.py``), and has no ``immutable``.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import plotly
from fastapi import APIRouter, Request
from fastapi.responses import Response

router = APIRouter(prefix="/static", tags=["assets"], include_in_schema=False)
icon_router = APIRouter(tags=["assets"], include_in_schema=False)

STATIC = Path(__file__).parent.parent / "static"
CACHE = "public, max-age=86400"
VERSIONED_CACHE = "public, max-age=31536000, immutable"
STRICT_PLOTLY = STATIC / "plotly-strict.min.js"
BASIC_PLOTLY = STATIC / "plotly-basic.min.js"
JAVASCRIPT = "text/javascript; charset=utf-8"
SVG = "image/svg+xml"


@dataclass(frozen=True)
class Asset:
    body: bytes
    packed: bytes | None
    etag: str
    media_type: str

    @property
    def version(self) -> str:
        return self.etag.strip('"')[:12]


def _asset(body: bytes, pack: bool, media_type: str = JAVASCRIPT) -> Asset:
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    packed = gzip.compress(body, compresslevel=6) if pack else None
    return Asset(body, packed, etag, media_type)


@lru_cache(maxsize=1)
def plotly_js() -> Asset:
    """plotly.js, plain and gzipped (read once): the strict bundle, else the package's."""
    if STRICT_PLOTLY.is_file():
        return _asset(STRICT_PLOTLY.read_bytes(), pack=True)
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if bundled.is_file():
        return _asset(bundled.read_bytes(), pack=True)
    from plotly.offline import get_plotlyjs

    return _asset(get_plotlyjs().encode("utf-8"), pack=True)


@lru_cache(maxsize=1)
def plotly_basic_js() -> Asset:
    """plotly.js's basic bundle (SVG traces only), plain and gzipped (read once); the full
    bundle where the file is missing."""
    if BASIC_PLOTLY.is_file():
        return _asset(BASIC_PLOTLY.read_bytes(), pack=True)
    return plotly_js()


@lru_cache(maxsize=1)
def reports_js() -> Asset:
    return _asset((STATIC / "reports.js").read_bytes(), pack=True)


@lru_cache(maxsize=1)
def favicon() -> Asset:
    return _asset((STATIC / "favicon.svg").read_bytes(), pack=False, media_type=SVG)


def _send(request: Request, asset: Asset) -> Response:
    versioned = request.query_params.get("v") == asset.version
    headers = {
        "Cache-Control": VERSIONED_CACHE if versioned else CACHE,
        "ETag": asset.etag,
        "Vary": "Accept-Encoding",
    }
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    if asset.packed is not None and "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(asset.packed, media_type=asset.media_type, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def _serve(on: APIRouter, path: str, asset: Callable[[], Asset]) -> None:
    async def send(request: Request) -> Response:
        return _send(request, asset())

    on.add_api_route(path, send, methods=["GET"], name=path.lstrip("/"))


ASSETS: dict[str, Callable[[], Asset]] = {
    "plotly.min.js": plotly_js,
    "plotly-basic.min.js": plotly_basic_js,
    "reports.js": reports_js,
    "favicon.svg": favicon,
}


def static_url(name: str) -> str:
    """The versioned URL of a static asset (``/static/plotly.min.js?v=...``) for pages."""
    return f"/static/{name}?v={ASSETS[name]().version}"


_serve(router, "/plotly.min.js", plotly_js)
_serve(router, "/plotly-basic.min.js", plotly_basic_js)
_serve(router, "/reports.js", reports_js)
_serve(router, "/favicon.svg", favicon)
# Browsers ask for it whatever the page says; the SVG serves.
_serve(icon_router, "/favicon.ico", favicon)
