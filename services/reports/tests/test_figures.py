"""The Plotly figures: the high-score step line, its extension, seed marks, escaped hovers."""

from __future__ import annotations

from datetime import datetime

from ax3l.reports.figures import (
    EXTENSION_TRACE,
    GOLDEN_TRACE,
    SEED_TRACE,
    highscore_figure,
    highscore_hover,
    score_figure,
)
from ax3l.reports.models.golden import Confirmation, ConfirmationRun
from ax3l.reports.models.highscores import HighscorePoint


def point(sims: int, score: int, seed: int, reason: str = "r") -> HighscorePoint:
    return HighscorePoint(
        event_id=sims,
        occurred_at=datetime(2026, 1, 1),
        simulations=sims,
        score=score,
        seed=seed,
        run_id=f"run-{sims}",
        reason=reason,
    )


def test_step_line_is_the_points_and_stays_flat_to_the_current_count():
    """The golden trace is the rows as an hv step line; a flat segment reaches the current count."""
    points = [point(1, 38, 1970), point(4, 40, 1970), point(9, 37, 1971), point(12, 39, 1971)]
    figure = highscore_figure(points, current=20)
    traces = {trace["name"]: trace for trace in figure["data"]}
    golden = traces[GOLDEN_TRACE]
    assert (golden["x"], golden["y"], golden["line"]["shape"]) == (
        [1, 4, 9, 12],
        [38, 40, 37, 39],
        "hv",
    )
    assert (traces[EXTENSION_TRACE]["x"], traces[EXTENSION_TRACE]["y"]) == ([12, 20], [39, 39])
    assert (traces[SEED_TRACE]["x"], traces[SEED_TRACE]["y"]) == ([9], [37])
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [9]
    assert figure["layout"]["annotations"][0]["text"] == "seed 1971"


def test_no_extension_when_nothing_was_submitted_since():
    """When the last acceptance is at the current count there is no extra segment."""
    figure = highscore_figure([point(1, 38, 1970)], current=1)
    assert [trace["name"] for trace in figure["data"]] == [GOLDEN_TRACE]


def test_empty_history_is_an_empty_line():
    """A fresh installation plots nothing (and does not fail)."""
    figure = highscore_figure([], current=0)
    assert figure["data"][0]["x"] == [] and len(figure["data"]) == 1


def test_hover_shows_seed_run_and_escaped_reason():
    """Hover text names seed, run and reason; markup in the reason is escaped for Plotly."""
    hover = highscore_hover(point(3, 41, 1970, reason="<a href='javascript:alert(1)'>x</a> ok"))
    assert "Seed: 1970" in hover and "Run: run-3" in hover
    assert "<a href" not in hover and "&lt;a href=&#x27;javascript:alert(1)&#x27;&gt;" in hover


def test_hover_of_a_confirmed_golden_adds_its_mean_and_seeds():
    """A golden confirmed on more seeds shows its mean over them; a plain one does not."""
    runs = (
        ConfirmationRun(seed=1970, score=41, run_id="run-3"),
        ConfirmationRun(seed=1001971, score=40, run_id="c-2"),
        ConfirmationRun(seed=None, score=None, run_id=None),
    )
    confirmed = point(3, 41, 1970).model_copy(
        update={"confirmation": Confirmation(mean_high_score=40.5, runs=runs)}
    )
    assert "Mean: 40.5 over seeds 1970, 1001971, –" in highscore_hover(confirmed)
    assert "Mean" not in highscore_hover(point(3, 41, 1970))


def test_score_histogram_has_one_bar_per_score():
    """The histogram bars are the bins as given."""
    figure = score_figure([(2, 1), (38, 5), (40, 7)])
    assert (figure["data"][0]["x"], figure["data"][0]["y"]) == ([2, 38, 40], [1, 5, 7])
