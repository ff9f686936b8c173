"""What each run tried and who chose it, why: its golden configuration of its time, the
difference from it, the proposer (a seat by name), the model's reasoning, the ``model``
proposer's prediction, a fallback's cause, on ``/api/runs``, ``/runs``, the dashboard and the
run's page (with its events in sentences and its learning curve beside its golden's), over the
small experiment of ``run_story``."""

from __future__ import annotations

from typing import Any

from run_story import REASONING, write_story


async def test_rows_say_what_each_run_tried_against_its_golden_and_why(
    snakelab_tables, make_client
):
    """/api/runs names each run's golden of its time, the score difference and what differs
    (the seed for a rotation), its proposer (a seat by name) and why it was chosen; /runs and
    the dashboard show it, escaped, the changed value marked."""
    story = await write_story(snakelab_tables)
    runs = story.runs
    async with make_client(snakelab_tables) as http:
        listed = (await http.get("/api/runs")).json()["runs"]
        rows = {run["run_id"]: run for run in listed}

        def row(name: str) -> dict[str, Any]:
            return rows[runs[name].run_id]

        assert row("seeding")["golden_run_id"] is None
        assert row("seeding")["changes"] is None
        llm = row("llm")
        assert (llm["golden_run_id"], llm["golden_high_score"], llm["score_difference"]) == (
            runs["seeding"].run_id,
            40,
            -2,
        )
        assert llm["changes"] == "training.gamma: 0.96 -> 0.97"
        assert llm["changed"] == ["training_gamma"]
        assert llm["proposer"] == "llm"
        assert llm["reason"].startswith("“Gamma 0.97 should value the food further ahead.")
        model = row("model")
        assert model["reason"] == (
            "predicted 44.12 ± 2.3 against the best predicted 41"
            " (expected improvement 1.2, of 129 choices, 5 runs fitted)"
        )
        assert model["changes"] == "training.learning_rate: 0.0021 -> 0.0011"
        seat = row("seat")
        assert (seat["proposer"], seat["seat"], seat["reason"]) == (
            "external",
            "alice",
            "seat alice",
        )
        assert (seat["golden_run_id"], seat["score_difference"]) == (runs["model"].run_id, -2)
        assert seat["changes"] == "model.hidden_size: 224 -> 256"
        fallback = row("fallback")
        assert fallback["proposer"] == "tpe"
        assert (
            fallback["reason"] == "tpe proposed for batch_size after 3 failed model conversations"
        )
        assert fallback["score_difference"] == 1
        rotation = row("rotation")
        assert (rotation["proposer"], rotation["entry"]) == ("ax3l", "seed_rotation")
        assert (rotation["golden_run_id"], rotation["score_difference"]) == (
            runs["model"].run_id,
            -10,
        )
        assert rotation["changes"] == "seed: 1970 -> 1971"
        assert rotation["reason"] is None

        by_difference = (
            await http.get("/api/runs", params={"sort": "score_difference", "order": "asc"})
        ).json()["runs"]
        assert [run["score_difference"] for run in by_difference] == [-10, -2, -2, 1, 3, None]

        page = (await http.get("/runs")).text
        line = page[page.index(f'data-run-id="{runs["llm"].run_id}"') :].split("</tr>")[0]
        assert '<td class="num changed" title="training.gamma: 0.96 -&gt; 0.97">0.97</td>' in line
        assert '<td class="num difference worse"' in line and "−2</td>" in line
        assert "&lt;script&gt;window.__pwned" in line and "<script>window" not in page
        assert '<svg class="sparkline"' in line
        seat_line = page[page.index(f'data-run-id="{runs["seat"].run_id}"') :].split("</tr>")[0]
        assert '<span class="seat">(alice)</span>' in seat_line

        dashboard = (await http.get("/")).text
        last = dashboard[dashboard.index('id="dash-last-runs"') :]
        assert "seed: 1970 -&gt; 1971" in last and "−10</td>" in last
        assert "tpe proposed for batch_size after 3 failed model conversations" in last


async def test_a_run_page_shows_its_golden_its_chooser_and_its_events_in_sentences(
    snakelab_tables, make_client
):
    """The run page says what the run tried against its golden of its time, who chose it
    (reasoning, prediction, seat) and its events as sentences; its curve has the golden's."""
    story = await write_story(snakelab_tables)
    runs = story.runs
    async with make_client(snakelab_tables) as http:
        found = (await http.get(f"/api/simulations/{runs['llm'].run_id}")).json()
        assert found["reason"]["reasoning"] == REASONING
        assert found["reason"]["reply_event_id"] == story.reply_id
        assert found["reason"]["conversation_id"] == story.conversations["llm"]
        assert found["row"]["score_difference"] == -2
        said = {event["name"]: event["summary"] for event in found["events"]}
        assert (
            said["proposal_accepted"]
            == f"Proposal accepted: gamma = 0.97 (run {runs['llm'].run_id[:8]})"
        )
        assert said["simulation_completed"].endswith("completed: high score 38")

        page = (await http.get(f"/simulations/{runs['llm'].run_id}")).text
        tried = page[page.index('id="run-tried"') :].split("</table>")[0]
        assert '<th class="mono">training.gamma</th><td class="num">0.96</td>' in tried
        assert '<td class="num changed">0.97</td>' in tried
        assert 'id="run-difference">−2</strong>' in page
        assert '<a href="/proposers">llm</a>' in page
        assert "&lt;script&gt;window.__pwned" in page and "<script>window" not in page
        assert f'href="/events/{story.reply_id}"' in page
        assert "Proposal accepted: gamma = 0.97" in page
        assert '"dash": "dash"' in page or '"dash":"dash"' in page  # the golden's curve

        model_page = (await http.get(f"/simulations/{runs['model'].run_id}")).text
        figures = model_page[model_page.index('id="run-model"') :].split("</dl>")[0]
        assert '<dt>predicted mean</dt><dd class="mono">44.12</dd>' in figures
        assert '<dt>expected improvement</dt><dd class="mono">1.2</dd>' in figures

        seat_page = (await http.get(f"/simulations/{runs['seat'].run_id}")).text
        assert 'seat <span id="run-seat">alice</span>' in seat_page

        rotation_page = (await http.get(f"/simulations/{runs['rotation'].run_id}")).text
        assert '<th class="mono">seed</th><td class="num">1970</td>' in rotation_page
        assert 'id="run-difference">−10</strong>' in rotation_page
        assert "The loop submitted it itself (seed_rotation)." in rotation_page

        seeding_page = (await http.get(f"/simulations/{runs['seeding'].run_id}")).text
        assert "The experiment's first run" in seeding_page
