"""The event log over HTTP (in-process): keyset pages, filters, validation, details, escaping."""

from __future__ import annotations

import json
import re

import pytest
from stored_rows import stored_rows

from ax3l.shared.events import CATALOG, CATEGORIES, Category
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.plugin import free_port


def _ids(experiment, where: str = "1=1", args: tuple = ()) -> list[int]:
    """Event ids newest first, straight from SQL, to compare pages against."""
    sql = f"SELECT event_id FROM events WHERE {where} ORDER BY event_id DESC"
    return [row[0] for row in stored_rows(experiment.dbs, sql, args)]


async def _walk(client, params: dict) -> list[int]:
    seen: list[int] = []
    cursor = None
    while True:
        query = {**params, **({"before": cursor} if cursor else {})}
        page = (await client.get("/api/events", params=query)).json()
        seen += [event["event_id"] for event in page["events"]]
        cursor = page["older_before"]
        if cursor is None:
            return seen


async def test_pages_cover_every_event_once_newest_first(client, experiment):
    """Walking `older_before` cursors visits every event exactly once, newest first."""
    assert await _walk(client, {"limit": 97}) == _ids(experiment)


async def test_newer_cursor_walks_back_to_the_first_page(client, experiment):
    """From a deep page, `newer_after` leads back page by page to the newest events."""
    ids = _ids(experiment)
    deep = (await client.get("/api/events", params={"limit": 50, "before": ids[300]})).json()
    assert [e["event_id"] for e in deep["events"]] == ids[301:351]
    pages: list[list[int]] = []
    cursor = deep["newer_after"]
    while cursor is not None:
        page = (await client.get("/api/events", params={"limit": 50, "after": cursor})).json()
        pages.insert(0, [e["event_id"] for e in page["events"]])
        cursor = page["newer_after"]
    assert [i for page in pages for i in page] == ids[:301]


@pytest.mark.parametrize(
    ("params", "where", "args"),
    [
        ({"category": "Conversation"}, "category = %s", ("Conversation",)),
        ({"event": "prompt_sent"}, "name = %s", ("prompt_sent",)),
        (
            {"category": "Configuration", "event": "golden_config_created"},
            "name = %s",
            ("golden_config_created",),
        ),
        (
            {"event": "prompt_sent", "parameter": "gamma"},
            "name = %s AND parameter = %s",
            ("prompt_sent", "gamma"),
        ),
    ],
)
async def test_filters_select_exactly_the_matching_events(client, experiment, params, where, args):
    """Each filter (and combination) returns exactly the events SQL finds, across pages."""
    expected = _ids(experiment, where, args)
    assert expected, "the replayed history must contain matching events"
    assert await _walk(client, {**params, "limit": 200}) == expected


async def test_process_filter_lists_one_conversation(client, experiment):
    """`process` lists the events of one conversation (or run) only."""
    prompt = (await client.get(f"/api/events/{experiment.replay.prompt_ids[5]}")).json()
    process = prompt["event"]["process_id"]
    page = (await client.get("/api/events", params={"process": process})).json()
    names = [e["name"] for e in page["events"]]
    assert {e["process_id"] for e in page["events"]} == {process}
    assert "prompt_sent" in names and "reply_received" in names


async def test_injection_attempt_in_a_filter_is_just_a_value(client):
    """A filter value with SQL in it is bound as a parameter: it matches nothing, breaks nothing."""
    reply = await client.get(
        "/api/events", params={"parameter": "gamma' OR '1'='1", "event": "prompt_sent"}
    )
    assert reply.status_code == 200 and reply.json()["events"] == []


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"category": "Nope"}, "category"),
        ({"event": "not_an_event"}, "unknown event"),
        ({"category": "LLM", "event": "prompt_sent"}, "belongs to category Conversation"),
        ({"before": "abc"}, "before"),
        ({"before": "0"}, "before"),
        ({"before": "99999999999999999999999"}, "before"),
        ({"before": "5", "after": "3"}, "either before or after"),
        ({"limit": "501"}, "limit"),
        ({"parameter": "x" * 101}, "parameter"),
    ],
)
async def test_bad_query_values_get_422_with_a_message(client, params, fragment):
    """Bad filter or cursor values are answered 422 with a readable message, never 500."""
    reply = await client.get("/api/events", params=params)
    assert reply.status_code == 422
    assert fragment in reply.json()["message"]


async def test_bad_query_on_a_page_is_an_html_422(client):
    """The HTML page answers a bad filter with a 422 page that names the problem (escaped)."""
    reply = await client.get("/events", params={"event": "<script>x</script>"})
    assert reply.status_code == 422
    assert reply.headers["content-type"].startswith("text/html")
    assert "unknown event" in reply.text
    assert "<script>x</script>" not in reply.text and "&lt;script&gt;x&lt;/script&gt;" in reply.text


async def test_refresh_selector_accepts_only_its_choices(client):
    """refresh=30 asks the page's script for an in-place update every 30 s (no meta refresh, no
    inline script); an unlisted period is a 422."""
    page = await client.get("/events", params={"refresh": "30"})
    assert page.status_code == 200 and '<body data-refresh="30">' in page.text
    assert "http-equiv" not in page.text and "<script>" not in page.text
    assert "data-refresh" not in (await client.get("/events")).text
    bad = await client.get("/events", params={"refresh": "7"})
    assert bad.status_code == 422 and "refresh must be one of" in bad.text


async def test_event_choices_narrow_to_the_chosen_category(client):
    """With a category chosen, the Event filter offers only that category's events."""
    page = (await client.get("/events", params={"category": "SnakeLab"})).text
    event_select = page.split('id="filter-event"')[1].split("</select>")[0]
    for name in CATALOG:
        offered = f'value="{name}"' in event_select
        assert offered == (name in CATEGORIES[Category.SNAKELAB]), name


async def test_parameter_column_appears_only_for_prompts(client, experiment):
    """The Parameter column and filter show when the Event filter is Prompt, not otherwise."""
    prompts = (await client.get("/events", params={"event": "prompt_sent"})).text
    assert "<th>Parameter</th>" in prompts and 'id="filter-parameter"' in prompts
    cells = re.findall(r'<td class="parameter">([^<]*)</td>', prompts)
    assert len(cells) == 100 and set(cells) <= set(PARAMETER_ORDER)
    everything = (await client.get("/events")).text
    assert "<th>Parameter</th>" not in everything and 'id="filter-parameter"' not in everything


async def test_prompt_detail_keeps_source_parameter_and_exact_text(client, experiment):
    """A prompt's detail shows its source, parameter and the exact text sent (escaped)."""
    prompt_id = experiment.replay.hostile_prompt_id
    detail = (await client.get(f"/api/events/{prompt_id}")).json()
    assert detail["event"]["source_name"] == "ComparisonSingle"
    assert detail["event"]["parameter"] == "gamma"
    assert detail["content"].startswith("Choose gamma. <script>")
    page = (await client.get(f"/events/{prompt_id}")).text
    assert 'id="event-source">ComparisonSingle<' in page
    assert 'id="event-parameter">gamma<' in page
    assert "&lt;script&gt;window.__pwned = true&lt;/script&gt;" in page
    assert "<script>window" not in page


async def test_reply_detail_shows_tool_call_reasoning_usage_and_timings(client, experiment):
    """A reply's detail parses the llama-server JSON: tool call, reasoning, usage, timings."""
    reply_id = experiment.replay.reply_ids[3]
    detail = (await client.get(f"/api/events/{reply_id}")).json()
    reply = detail["reply"]
    assert reply["tool_calls"][0]["name"] in ("submit_single_value", "submit_pair_values")
    assert isinstance(reply["tool_calls"][0]["arguments"], dict)
    assert reply["reasoning"].startswith("Trying another")
    assert reply["usage"]["completion_tokens"] == 310
    assert reply["timings"]["predicted_per_second"] == 15.01
    assert detail["parent"]["name"] == "prompt_sent"
    page = (await client.get(f"/events/{reply_id}")).text
    for fragment in ('id="reply-usage"', 'id="reply-timings"', 'id="reply-reasoning"', "15.01"):
        assert fragment in page


async def test_script_in_a_reply_shows_as_text(client, experiment):
    """Markup in a reply's reasoning, message and tool arguments is escaped on every page."""
    reply_id = experiment.replay.hostile_reply_id
    page = (await client.get(f"/events/{reply_id}")).text
    assert "<script>window.__pwned" not in page and "<img src=x" not in page
    assert page.count("&lt;script&gt;window.__pwned = true&lt;/script&gt;") >= 3
    process = (await client.get(f"/api/events/{reply_id}")).json()["event"]["process_id"]
    log = (await client.get("/events", params={"process": process})).text
    assert "<script>window.__pwned" not in log and "&lt;script&gt;" in log


async def test_prompt_rows_link_to_their_detail(client, experiment):
    """In the list, a prompt row's content links to its detail page."""
    page = (await client.get("/events", params={"event": "prompt_sent"})).text
    newest_prompt = max([*experiment.replay.prompt_ids, experiment.replay.hostile_prompt_id])
    assert f'<td class="summary"><a href="/events/{newest_prompt}">' in page


async def test_unknown_event_is_a_404(client):
    """An id that does not exist is a 404 (page and API), a non-number a 422."""
    assert (await client.get("/api/events/999999999")).status_code == 404
    page = await client.get("/events/999999999")
    assert page.status_code == 404 and "there is no event" in page.text
    assert (await client.get("/events/abc")).status_code == 422


async def test_database_outage_is_a_503_not_a_500(experiment, make_client):
    """With the database unreachable, pages and API answer 503 and /ready says unavailable."""
    async with make_client(experiment.dbs, DB_PORT=free_port()) as http:
        assert (await http.get("/api/events")).status_code == 503
        page = await http.get("/events")
        assert page.status_code == 503 and "Database unavailable" in page.text
        # The error's text (server, port, login) is the log's, not a page's (L6).
        api = (await http.get("/api/runs")).text
        for shown in (page.text, api):
            assert str(experiment.dbs.port) not in shown and "Can't connect" not in shown
        ready = await http.get("/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "not ready"
        assert ready.json()["checks"] == {"database": False, "disk": True}
        assert ready.json()["problems"][0].startswith("database: ")
        assert (await http.get("/health")).json() == {"status": "ok"}


async def test_ready_when_both_databases_answer(client):
    """/ready pings Ax3l's database and SnakeLab's tables."""
    ready = await client.get("/ready")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": True, "disk": True},
        "problems": [],
    }


async def test_rows_read_as_sentences_with_the_json_one_click_away(client):
    """A comparison row shows its reason as the sentence and its JSON in a disclosure."""
    api = (await client.get("/api/events", params={"event": "configuration_compared"})).json()
    first = api["events"][0]
    reason = json.loads(first["content"])["reason"]
    assert first["summary"] == reason and reason.startswith("High score: ")
    page = (await client.get("/events", params={"event": "configuration_compared"})).text
    row = page[page.index(f'data-event-id="{first["event_id"]}"') :]
    row = row[: row.index("</tr>")]
    assert f"<summary>{reason}</summary>" in row.replace("&gt;", ">").replace("&lt;", "<")
    assert "<pre>{\n  &#34;golden_run_id&#34;" in row


async def test_a_cut_reply_shows_its_reasoning_and_finish_reason_escaped(databases, make_client):
    """A reply cut at max_tokens shows its finish reason and its reasoning in its own section,
    with the model's markup as text."""
    from ax3l.shared.db.database import Database
    from ax3l.shared.db.event_log import EventLog
    from ax3l.shared.event_models import ReplyReceived
    from ax3l.testing.scripted_llm import completion

    reasoning = "Thinking <script>window.__pwned = 1</script> about <b>gamma</b> & more"
    reply = completion(
        {"role": "assistant", "content": "<i>so</i>", "reasoning_content": reasoning},
        "length",
        usage={"prompt_tokens": 500, "completion_tokens": 4096, "total_tokens": 4596},
    )
    async with Database(databases.settings()) as db:
        reply_id = await EventLog(db).log(
            ReplyReceived.model_validate(reply), parameter="gamma", source_name="ModelServer"
        )
    async with make_client(databases) as http:
        detail = (await http.get(f"/api/events/{reply_id}")).json()
        assert detail["reply"]["reasoning"] == reasoning
        assert detail["reply"]["finish_reason"] == "length"
        page = (await http.get(f"/events/{reply_id}")).text
        listed = (await http.get("/api/events")).json()["events"][0]["summary"]
    assert "<script>window.__pwned" not in page and "<b>gamma</b>" not in page
    assert (
        "&lt;script&gt;window.__pwned = 1&lt;/script&gt; about &lt;b&gt;gamma&lt;/b&gt; &amp; more"
        in page
    )
    section = page[page.index('id="reply-reasoning-section"') :]
    assert section.index("<h2>Reasoning") < section.index('id="reply-reasoning"')
    assert "4,096 completion tokens" in section
    finish = page[page.index('id="reply-finish"') :]
    assert finish.startswith('id="reply-finish"><span class="mono">length</span>')
    assert "cut at max_tokens" in finish[:300]
    assert listed == "Model reply cut at max_tokens, without a tool call"


async def test_stored_replies_nested_thousands_deep_still_render(snakelab_tables, make_client):
    """M6: replies as a model could have them stored (tool call arguments nested 100,000
    deep, the text of a content nested 5,000 deep) leave the list, the JSON API and each
    detail page answering 200, the nested text shown as text."""
    from ax3l.shared.db.database import Database
    from ax3l.shared.db.event_log import EventLog
    from ax3l.shared.event_models import ReplyReceived
    from ax3l.testing.scripted_llm import completion, tool_call

    deep = "[" * 100_000 + "]" * 100_000
    arguments = '{"value": ' + deep + "}"
    reply = completion(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [tool_call("submit_single_value", arguments)],
        },
        "tool_calls",
    )
    async with Database(snakelab_tables.settings()) as db:
        log = EventLog(db)
        ids = [
            await log.log(ReplyReceived.model_validate(reply), parameter="gamma"),
            await log.log("llm_request_failed", "[" * 5000 + "]" * 5000, parameter="gamma"),
            await log.log("tool_request_received", {"text": '{"method": ' + deep + "}"}),
        ]
    async with make_client(snakelab_tables) as http:
        for path in [
            "/events",
            "/api/events",
            *(f"/events/{i}" for i in ids),
            *(f"/api/events/{i}" for i in ids),
        ]:
            answer = await http.get(path)
            assert answer.status_code == 200, (path, answer.text[:300])
        page = (await http.get(f"/events/{ids[1]}")).text
    assert "[[[[[[[[" in page


async def test_no_page_loads_a_script_from_elsewhere(client):
    """L6: Swagger UI and ReDoc (scripts from a CDN) are not served; /api-reference and
    /openapi.json describe the API from this server alone."""
    assert (await client.get("/docs")).status_code == 404
    assert (await client.get("/redoc")).status_code == 404
    assert (await client.get("/openapi.json")).status_code == 200
    reference = await client.get("/api-reference")
    assert reference.status_code == 200 and "cdn." not in reference.text
