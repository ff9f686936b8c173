"""The dashboard's one-sentence conclusion: how the golden did on fresh seeds, with the caveat
below three of them; and the dashboard over the replayed history shows it and the record."""

from __future__ import annotations

import itertools
from datetime import datetime

from ax3l.reports.experiment_conclusion import MIN_FRESH_SEEDS, fresh_seeds
from ax3l.reports.models.highscores import HighscorePoint


def _point(n: int, score: int, seed: int, kind: str | None = None) -> HighscorePoint:
    return HighscorePoint(
        event_id=n,
        occurred_at=datetime(2026, 12, 4),
        simulations=n,
        score=score,
        seed=seed,
        run_id=f"run-{n}",
        reason=None,
        kind=kind,
    )


# The review's experiment: the defaults 45 on 1970, the golden 50, then 38, 39 and 33 on
# each fresh seed (each time after the golden had climbed back to 50, 47, 45).
REVIEWED = [
    _point(1, 45, 1970, "seeding"),
    _point(2, 50, 1970),
    _point(3, 38, 1971, "seed_rotation"),
    _point(4, 50, 1971),
    _point(5, 39, 1972, "seed_rotation"),
    _point(6, 47, 1972),
    _point(7, 33, 1973, "seed_rotation"),
    _point(8, 45, 1973),
]


def test_the_conclusion_waits_for_fresh_seeds_then_weighs_them_against_the_defaults():
    """No golden, no rotation, fewer than three and three rotations each get their sentence;
    the review's numbers conclude that the golden is not above the defaults."""
    assert fresh_seeds([]).conclusion == (
        "Nothing to conclude yet: the experiment has no golden configuration."
    )
    unrotated = fresh_seeds(REVIEWED[:2])
    assert unrotated.rotations == []
    assert unrotated.conclusion == (
        "The golden configuration scored 50 on seed 1970, the seed it was chosen on, against"
        " the untuned defaults' 45; it has not been re-run on a fresh seed yet, so nothing can"
        " be concluded: part of a high score chosen as the best of many runs is luck."
    )
    two = fresh_seeds(REVIEWED[:5])
    assert [(f.seed, f.previous_score, f.score, f.fall) for f in two.rotations] == [
        (1971, 50, 38, 12),
        (1972, 50, 39, 11),
    ]
    assert two.conclusion == (
        "On 2 fresh seeds the golden configuration scored 38, 39 where it had scored 50, 50;"
        f" with 2 fresh seeds nothing can be concluded: wait for at least {MIN_FRESH_SEEDS}"
        " seed rotations."
    )
    three = fresh_seeds(REVIEWED)
    assert (three.mean_fresh, three.mean_fall) == (110 / 3, (12 + 11 + 14) / 3)
    assert three.conclusion == (
        "On 3 fresh seeds the golden configuration scored 36.7 on average, 12.3 below its"
        " scores on the seeds it was chosen on: not above the untuned defaults' 45 on seed"
        " 1970 (a single run)."
    )
    better = fresh_seeds([_point(1, 30, 1970), *REVIEWED[1:]])
    assert better.conclusion.endswith("above the untuned defaults' 30 on seed 1970 (a single run).")
    adopted = fresh_seeds([_point(1, 30, 1970, "adopted"), *REVIEWED[1:]])
    assert "above the first golden's 30" in adopted.conclusion


async def test_the_dashboard_leads_with_the_conclusion_and_shows_the_fresh_seed_record(
    client, experiment
):
    """Over the replayed history (its rotations re-run the golden on seeds 1971, 1972...) the
    dashboard opens with the sentence and lists each rotation's fall, newest first."""
    goldens = [(run.seed, run.high_score, run.run_id) for _, run, _ in experiment.replay.goldens]
    fresh = [
        (after[0], before[1], after[1], after[2])
        for before, after in itertools.pairwise(goldens)
        if after[0] != before[0]
    ]
    assert len(fresh) >= 1
    page = (await client.get("/")).text
    said = page[page.index('id="dash-conclusion">') :].split("</p>")[0]
    points = (await client.get("/api/highscores")).json()["points"]
    expected = fresh_seeds([HighscorePoint.model_validate(p) for p in points]).conclusion
    assert said.endswith(expected.replace("'", "&#39;"))
    assert f"On {len(fresh)} fresh seed" in said
    table = page[page.index('id="dash-fresh-seeds"') :].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert len(rows) == min(len(fresh), 10)
    seed, previous, score, run_id = fresh[-1]
    assert f'<td class="num">{seed}</td>' in rows[0]
    assert f"{previous} <span" in rows[0] and f">{score}</a>" in rows[0]
    assert f"/simulations/{run_id}" in rows[0]
    assert "the seed it was chosen on" in page
