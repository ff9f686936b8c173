"""The report server's ``/metrics``: Prometheus text with its own requests and its database."""

from __future__ import annotations

import random
import string

import httpx
from prometheus_client.parser import text_string_to_metric_families


async def test_reports_metrics_count_its_requests_and_see_its_database(
    client: httpx.AsyncClient,
) -> None:
    """After a page and an API call, ``/metrics`` has their timings under the route templates
    with service ``reports``, and the database up."""
    assert (await client.get("/health")).status_code == 200
    assert (await client.get("/api/events", params={"limit": 1})).status_code == 200
    response = await client.get("/metrics")
    assert response.status_code == 200
    samples = {
        (sample.name, sample.labels.get("route")): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.labels.get("service") == "reports"
    }
    assert samples[("ax3l_database_up", None)] == 1
    assert samples[("ax3l_http_request_seconds_count", "/health")] >= 1
    assert samples[("ax3l_http_request_seconds_count", "/api/events")] >= 1


async def test_a_thousand_made_up_methods_leave_the_method_label_bounded(
    client: httpx.AsyncClient,
) -> None:
    """M3: requests with 1,000 made-up method tokens (h11, the report image's HTTP parser,
    accepts any token) on a route and off every route are timed under ``other``: the method
    label keeps to the standard methods, so no request can add a series to ``/metrics``."""
    rng = random.Random(3)
    for n in range(1000):
        method = f"M{n:04d}" + "".join(rng.choice(string.ascii_uppercase) for _ in range(8))
        path = "/health" if n % 2 else f"/no-such-{n}"
        assert (await client.request(method, path)).status_code in (404, 405)
    response = await client.get("/metrics")
    methods = {
        sample.labels["method"]
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if family.name == "ax3l_http_request_seconds" and sample.labels.get("service") == "reports"
    }
    assert methods <= {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"}
    assert "other" in methods
