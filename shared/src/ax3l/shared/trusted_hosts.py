"""The Host allow-list of Ax3l's HTTP servers (``AX3L_ALLOWED_HOSTS``): the report server and
the orchestrator's and the broker's status APIs answer only requests whose Host header names
one of the configured hosts, so a web page cannot reach them through a name it controls
(DNS rebinding). Any other Host gets 400 before a route runs."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware


def host_patterns(text: str) -> list[str]:
    """The comma-separated host names of ``text``: a name, an address (``[::1]`` for IPv6),
    ``*.example.org`` (its subdomains) or ``*`` (any host). Anything else is a ValueError."""
    patterns = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not patterns:
        raise ValueError("name at least one host (or * for any)")
    for pattern in patterns:
        wildcard = pattern == "*" or (pattern.startswith("*.") and "*" not in pattern[2:])
        if "*" in pattern and not wildcard:
            raise ValueError(f"{pattern!r}: a wildcard is only * or *.domain")
        if any(char in pattern for char in " /:@") and not pattern.startswith("["):
            raise ValueError(f"{pattern!r} is not a host name (no scheme, port or path)")
    return patterns


def allow_only(app: Starlette, hosts: str) -> None:
    """Put ``app`` behind the allow-list ``hosts`` (see ``host_patterns``): call it after the
    app's other middleware, so that the check runs first."""
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=host_patterns(hosts), www_redirect=False
    )
