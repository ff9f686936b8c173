"""Runs side by side (``/api/runs/compare``, ``/runs/compare``) over the user's real runs and the
replayed history: the rows in the order asked, the columns in which they differ, the curves."""

from __future__ import annotations

from reports_history import expected_rows

from ax3l.reports.figures import moving_average
from ax3l.reports.models.runs import TUNED_COLUMNS


async def test_compared_runs_come_in_order_with_their_differences_and_curves(client, experiment):
    """Three runs (two with episodes) come back in the asked order as /api/runs has them, with
    the columns whose values differ among them and each curve's 50-episode average."""
    expected = {row["run_id"]: row for row in expected_rows(experiment)}
    with_episodes = [run.run_id for run in experiment.runs[:2]]  # insert_runs gives 3 episodes
    picked = [experiment.runs[40].run_id, *with_episodes]
    response = await client.get("/api/runs/compare", params={"run": picked})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [run["run_id"] for run in body["runs"]] == picked
    listed = {r["run_id"]: r for r in (await client.get("/api/runs?limit=1000")).json()["runs"]}
    assert body["runs"] == [listed[run_id] for run_id in picked]
    differ = [
        column
        for column in ("seed", *TUNED_COLUMNS)
        if len({expected[run_id][column] for run_id in picked}) > 1
    ]
    assert differ and body["differing"] == differ
    assert [curve["run_id"] for curve in body["curves"]] == with_episodes
    first = experiment.runs[0]
    scores = [(e * first.high_score) // 1500 for e in range(1, 1501)]  # as insert_runs wrote
    assert body["curves"][0]["episodes"] == list(range(1, 1501))
    assert body["curves"][0]["average"] == moving_average(scores)

    page = (await client.get("/runs/compare", params={"run": picked})).text
    assert page.count('<th class="num compared"') == 3
    for column in differ:
        assert f'data-column="{column}"' in page
        row = page[page.index(f'data-column="{column}"') - 30 :].split("</tr>")[0]
        assert 'class="value differs"' in row
    same = next(c for c in TUNED_COLUMNS if c not in differ)
    row = page[page.index(f'data-column="{same}"') - 30 :].split("</tr>")[0]
    assert "differs" not in row
    assert 'id="compare-curves-figure"' in page


async def test_comparing_nothing_too_many_or_unknown_runs_is_refused(client, experiment):
    """No run, nine runs and an id SnakeLab does not hold answer 422 with a message."""
    nine = [run.run_id for run in experiment.runs[:9]]
    for params, said in (
        ({}, "choose 1 to 8 runs"),
        ({"run": nine}, "9 runs chosen: compare at most 8"),
        ({"run": [nine[0], "no-such-run"]}, "SnakeLab holds no run no-such-run"),
    ):
        response = await client.get("/api/runs/compare", params=params)
        assert response.status_code == 422, params
        assert said in response.json()["message"]
    page = await client.get("/runs/compare", params={"run": nine})
    assert page.status_code == 422 and "compare at most 8" in page.text
