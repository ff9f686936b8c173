"""The report server's ``/metrics``: Prometheus text with its own requests and its database."""

from __future__ import annotations

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
