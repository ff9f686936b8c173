"""What the seats' endpoint lets through before any token is looked at, and how often.

* ``HostCheck``: the ``Host`` header must be one the endpoint answers (127.0.0.1, localhost and
  [::1] on any port, plus ``AX3L_SEATS_ALLOWED_HOSTS``), and an ``Origin`` header, when sent,
  must be ``http(s)://`` one of them: DNS-rebinding protection that holds whatever the bind
  address (the MCP SDK's own check is off for ``0.0.0.0``).
* ``client_address``: the socket's peer, or, only when that peer is one of
  ``AX3L_SEATS_TRUSTED_PROXIES``, the right-most ``X-Forwarded-For`` address no trusted proxy
  added.
* ``Buckets``: token buckets, each with a second's worth of burst twice over. Requests
  without an active seat's token share one (``AX3L_SEATS_RATE_GLOBAL`` requests a second) and
  take one per client address too (``AX3L_SEATS_RATE_PER_ADDRESS``; an IPv6 address by its
  /64, what one host is usually given); each seat has one of its own at the per-address rate
  that only its token draws on, so no stranger and no other seat can empty it. The
  per-address table is bounded (``MAX_ADDRESSES``, the idlest dropped).
* ``RateLimiter``: a seat's tool calls, at most ``AX3L_SEAT_RATE_LIMIT`` in any 60 s. The first
  call over it gets a tool error that says so; until the window frees, the seat's further
  requests get 429 at the door, before the MCP layer reads them.
* ``RefusalCounter``: refused requests are counted by reason, never written to the database,
  and logged at most once per ``LOG_EVERY`` seconds per reason with the latest client address.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

RATE_WINDOW = 60.0
MAX_ADDRESSES = 10_000
LOG_EVERY = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class RateLimiter:
    """At most ``limit`` calls per seat in any 60 s window."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.clock = clock
        self.calls: dict[str, deque[float]] = {}

    def admit(self, seat: str) -> float | None:
        """None when the call may go ahead (and it is counted), else the seconds until it
        could."""
        wait = self.peek(seat)
        if wait is None:
            self.calls[seat].append(self.clock())
        return wait

    def peek(self, seat: str) -> float | None:
        """As ``admit``, without counting a call."""
        now = self.clock()
        calls = self.calls.setdefault(seat, deque())
        while calls and calls[0] <= now - RATE_WINDOW:
            calls.popleft()
        if len(calls) >= self.limit:
            return calls[0] + RATE_WINDOW - now
        return None


@dataclass
class _Bucket:
    tokens: float
    at: float


class Buckets:
    """The token buckets of the door; ``admit_stranger`` and ``admit_seat`` say whether a
    request may go ahead (and take its tokens) or how many seconds until one would be there."""

    def __init__(
        self,
        global_rate: float,
        address_rate: float,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ):
        self.global_rate, self.address_rate = global_rate, address_rate
        self.clock = clock
        self.max_addresses = max_addresses
        self.strangers = _Bucket(2 * global_rate, clock())
        self.addresses: dict[str, _Bucket] = {}
        self.seats: dict[str, _Bucket] = {}

    @staticmethod
    def _fill(bucket: _Bucket, rate: float, now: float) -> None:
        bucket.tokens = min(2 * rate, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now

    def admit_stranger(self, address: str) -> float | None:
        """A request without an active seat's token, from ``address``: its address's bucket
        and the strangers' shared one."""
        now = self.clock()
        key = address_key(address)
        mine = self.addresses.get(key)
        if mine is None:
            if len(self.addresses) >= self.max_addresses:
                self._prune(now)
            mine = self.addresses[key] = _Bucket(2 * self.address_rate, now)
        self._fill(mine, self.address_rate, now)
        self._fill(self.strangers, self.global_rate, now)
        if mine.tokens < 1:
            return (1 - mine.tokens) / self.address_rate
        if self.strangers.tokens < 1:
            return (1 - self.strangers.tokens) / self.global_rate
        mine.tokens -= 1
        self.strangers.tokens -= 1
        return None

    def admit_seat(self, seat: str) -> float | None:
        """A request with ``seat``'s active token: the seat's own bucket only."""
        now = self.clock()
        mine = self.seats.setdefault(seat, _Bucket(2 * self.address_rate, now))
        self._fill(mine, self.address_rate, now)
        if mine.tokens < 1:
            return (1 - mine.tokens) / self.address_rate
        mine.tokens -= 1
        return None

    def _prune(self, now: float) -> None:
        """Drop the buckets that are full again (they hold nothing), else the idlest half."""
        for address, bucket in list(self.addresses.items()):
            self._fill(bucket, self.address_rate, now)
            if bucket.tokens >= 2 * self.address_rate:
                del self.addresses[address]
        if len(self.addresses) >= self.max_addresses:
            idlest = sorted(self.addresses, key=lambda a: self.addresses[a].at)
            for address in idlest[: len(idlest) // 2 + 1]:
                del self.addresses[address]


def address_key(address: str) -> str:
    """The rate limit's key of a client address: an IPv6 address by its /64 (one host usually
    holds a whole /64 and could rotate through it), an IPv4 address (mapped or not) as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_networks(text: str) -> list[Network]:
    """``AX3L_SEATS_TRUSTED_PROXIES``: comma-separated addresses or networks (CIDR)."""
    networks = []
    for item in split_list(text):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ValueError(
                f"AX3L_SEATS_TRUSTED_PROXIES: {item!r} is not an address: {exc}"
            ) from None
    return networks


def _within(address: str, networks: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(peer: str | None, forwarded_for: str | None, trusted: list[Network]) -> str:
    """Who sent a request: the peer, unless the peer is a trusted proxy; then the right-most
    address of ``X-Forwarded-For`` that is not itself a trusted proxy."""
    address = peer or "unknown"
    if not trusted or not forwarded_for or not _within(address, trusted):
        return address
    for hop in reversed(forwarded_for.split(",")):
        hop = hop.strip()
        if not hop:
            continue
        if not _within(hop, trusted):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return address  # a garbled header: the proxy's own address
        address = hop
    return address


@dataclass(frozen=True)
class HostCheck:
    """The Host and Origin headers the endpoint answers; everything else is refused."""

    hosts: tuple[str, ...]

    @classmethod
    def from_setting(cls, extra: str) -> HostCheck:
        hosts = [f"{host}:*" for host in LOOPBACK_HOSTS] + list(LOOPBACK_HOSTS)
        return cls(tuple(hosts + [h.lower() for h in split_list(extra)]))

    def host_allowed(self, host: str | None) -> bool:
        if not host:
            return False
        host = host.lower()
        for allowed in self.hosts:
            if host == allowed:
                return True
            if allowed.endswith(":*"):
                base, _, port = host.rpartition(":")
                if base == allowed[:-2] and port.isdigit():
                    return True
        return False

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser's cross-site request
        scheme, sep, rest = origin.lower().partition("://")
        return bool(sep) and scheme in ("http", "https") and self.host_allowed(rest)

    def allowed_hosts(self) -> list[str]:
        return list(self.hosts)

    def allowed_origins(self) -> list[str]:
        return [f"{s}://{h}" for h in self.hosts for s in ("http", "https")]


@dataclass
class RefusalCounter:
    """Requests refused at the door, counted by reason; a log line per reason at most every
    ``LOG_EVERY`` seconds, with the count since the last line and the latest address."""

    clock: Callable[[], float] = time.monotonic
    counts: Counter[str] = field(default_factory=Counter)
    _unlogged: Counter[str] = field(default_factory=Counter)
    _logged_at: dict[str, float] = field(default_factory=dict)

    def count(self, reason: str, address: str) -> None:
        self.counts[reason] += 1
        self._unlogged[reason] += 1
        now = self.clock()
        if now - self._logged_at.get(reason, -LOG_EVERY) >= LOG_EVERY:
            logger.warning(
                "seat endpoint: refused %d request(s) (%s) since the last report; latest from %s",
                self._unlogged[reason],
                reason,
                address,
            )
            self._logged_at[reason] = now
            self._unlogged[reason] = 0
