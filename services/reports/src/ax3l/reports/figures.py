"""Plotly figures as plain data (the page hands them to the served plotly.js).

Hover texts carry untrusted strings (reasons, run ids); Plotly renders a subset of HTML in
them, so every such string is HTML-escaped here and shows as text.
"""

from __future__ import annotations

import html
import itertools
import textwrap
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ax3l.reports.models.golden import Confirmation
from ax3l.reports.models.highscores import HighscorePoint
from ax3l.reports.models.simulations import Episode

GOLDEN_TRACE = "Accepted golden scores"
EXTENSION_TRACE = "Since the last acceptance"
SEED_TRACE = "Golden on a fresh seed"
LINE_COLOUR = "#2563eb"
SEED_COLOUR = "#d97706"
AVERAGE_OF = 50  # episodes per point of a learning curve's moving average
# Beyond this many seed changes, dotted lines and labels would hide the line: diamonds remain.
MAX_SEED_LINES = 40

LAYOUT_BASE: dict[str, Any] = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#f8fafc",
    "hovermode": "closest",
    "legend": {"orientation": "h", "y": -0.2},
    "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
}


def vertical_line(x: Any, width: int = 1, dash: str = "dot") -> dict[str, Any]:
    """A line at ``x`` across the plot's height."""
    line = {"color": SEED_COLOUR, "width": width, "dash": dash}
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": line,
    }


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def _wrapped(text: str, width: int = 70) -> str:
    return "<br>".join(escape(line) for line in textwrap.wrap(text, width) or [""])


@lru_cache(maxsize=50_000)
def highscore_hover(point: HighscorePoint) -> str:
    lines = [
        f"<b>Score {point.score}</b> at {point.simulations:,} simulations",
        f"Seed: {escape(str(point.seed)) if point.seed is not None else '–'}",
        f"Run: {escape(point.run_id) if point.run_id else '–'}",
    ]
    if point.confirmation is not None:
        lines.append(_confirmation_hover(point.confirmation))
    if point.reason:
        lines.append(f"Reason: {_wrapped(point.reason)}")
    return "<br>".join(lines)


def _confirmation_hover(confirmation: Confirmation) -> str:
    """``Mean 40.3 over seeds 1970, 1001971``: a confirmed golden's mean and its seeds."""
    mean = confirmation.mean_high_score
    seeds = ", ".join("–" if r.seed is None else str(r.seed) for r in confirmation.runs)
    return f"Mean: {'–' if mean is None else f'{mean:.1f}'}" + (
        f" over seeds {seeds}" if seeds else ""
    )


def _fresh_hover(before: HighscorePoint, point: HighscorePoint) -> str:
    """A seed rotation's point: the golden's score where it was chosen and on the fresh seed."""
    fall = before.score - point.score
    said = f"fell {fall}" if fall > 0 else f"rose {-fall}" if fall < 0 else "held"
    head = (
        f"It scored {before.score} on seed {escape(str(before.seed))}, {point.score} on seed"
        f" {escape(str(point.seed))}: {said}"
    )
    return head + "<br>" + highscore_hover(point)


def seed_changes(points: Sequence[HighscorePoint]) -> list[HighscorePoint]:
    """The points whose seed differs from the previous point's."""
    return [point for previous, point in itertools.pairwise(points) if point.seed != previous.seed]


def highscore_figure(points: Sequence[HighscorePoint], current: int) -> dict[str, Any]:
    """The step line of accepted scores, flat to ``current`` runs, with seed changes marked."""
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "name": GOLDEN_TRACE,
            "mode": "lines+markers",
            "x": [p.simulations for p in points],
            "y": [p.score for p in points],
            "line": {"shape": "hv", "color": LINE_COLOUR, "width": 2.5},
            "marker": {"size": 7, "color": LINE_COLOUR},
            "text": [highscore_hover(p) for p in points],
            "hovertemplate": "%{text}<extra></extra>",
        }
    ]
    if points and current > points[-1].simulations:
        last = points[-1]
        data.append(
            {
                "type": "scatter",
                "name": EXTENSION_TRACE,
                "mode": "lines",
                "x": [last.simulations, current],
                "y": [last.score, last.score],
                "line": {"shape": "hv", "color": LINE_COLOUR, "width": 2.5},
                "hovertemplate": (
                    f"Golden score {last.score} still holds at %{{x:,}} simulations<extra></extra>"
                ),
                "showlegend": False,
            }
        )
    changes_with_before = [
        (before, point) for before, point in itertools.pairwise(points) if point.seed != before.seed
    ]
    changes = [point for _, point in changes_with_before]
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if changes:
        data.append(
            {
                "type": "scatter",
                "name": SEED_TRACE,
                "mode": "markers",
                "x": [p.simulations for p in changes],
                "y": [p.score for p in changes],
                "marker": {"symbol": "diamond", "size": 13, "color": SEED_COLOUR},
                "text": [_fresh_hover(before, p) for before, p in changes_with_before],
                "hovertemplate": "<b>Golden on a fresh seed</b><br>%{text}<extra></extra>",
            }
        )
        for point in changes if len(changes) <= MAX_SEED_LINES else []:
            shapes.append(vertical_line(point.simulations))
            annotations.append(
                {
                    "x": point.simulations,
                    "y": 1,
                    "xref": "x",
                    "yref": "paper",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "text": f"seed {escape(str(point.seed))}",
                    "font": {"color": SEED_COLOUR, "size": 11},
                }
            )
    layout = {
        **LAYOUT_BASE,
        "xaxis": {"title": {"text": "SnakeLab simulations (total runs)"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": "Golden high score"}},
        "shapes": shapes,
        "annotations": annotations,
    }
    return {"data": data, "layout": layout}


def score_figure(bins: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """A histogram of run high scores (one bar per score)."""
    return {
        "data": [
            {
                "type": "bar",
                "name": "Runs",
                "x": [score for score, _ in bins],
                "y": [runs for _, runs in bins],
                "marker": {"color": LINE_COLOUR},
                "hovertemplate": "Score %{x}: %{y:,} runs<extra></extra>",
            }
        ],
        "layout": {
            **LAYOUT_BASE,
            "xaxis": {"title": {"text": "High score"}, "dtick": 5},
            "yaxis": {"title": {"text": "Runs"}},
            "bargap": 0.1,
        },
    }


def moving_average(scores: Sequence[int], window: int = AVERAGE_OF) -> list[float]:
    """The mean of each score and the ``window - 1`` before it (fewer at the start)."""
    average: list[float] = []
    total = 0
    for i, score in enumerate(scores):
        total += score
        if i >= window:
            total -= scores[i - window]
        average.append(round(total / min(i + 1, window), 2))
    return average


def episodes_figure(
    episodes: Sequence[Episode], golden: tuple[str, Sequence[Episode]] | None = None
) -> dict[str, Any]:
    """The run's learning curve: score per episode with its 50-episode moving average, and
    ``golden`` (its golden configuration of its time: a name and its episodes) as a dashed
    average to compare with."""
    x = [e.episode for e in episodes]
    y = [e.score for e in episodes]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Score",
            "x": x,
            "y": y,
            "marker": {"size": 3, "color": "#94a3b8"},
            "hovertemplate": "Episode %{x}: score %{y}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"Average of {AVERAGE_OF}",
            "x": x,
            "y": moving_average(y),
            "line": {"color": LINE_COLOUR, "width": 2},
            "hovertemplate": "Episode %{x}: average %{y}<extra></extra>",
        },
    ]
    if golden is not None and golden[1]:
        name, theirs = golden
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": escape(name),
                "x": [e.episode for e in theirs],
                "y": moving_average([e.score for e in theirs]),
                "line": {"color": SEED_COLOUR, "width": 2, "dash": "dash"},
                "hovertemplate": "Episode %{x}: golden's average %{y}<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": {
            **LAYOUT_BASE,
            "xaxis": {"title": {"text": "Episode"}},
            "yaxis": {"title": {"text": "Score"}},
        },
    }


def curves_figure(
    curves: Sequence[tuple[int, str, Sequence[int], Sequence[float]]],
) -> dict[str, Any]:
    """Runs' learning curves overlaid (``curves``: each one's place among the compared runs,
    name, episodes and 50-episode moving average), each in its place's colour of
    ``COMPARED_COLOURS``, as its column is."""
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": escape(name),
            "x": list(episodes),
            "y": list(average),
            "line": {"color": COMPARED_COLOURS[i % len(COMPARED_COLOURS)], "width": 2},
            "hovertemplate": f"{escape(name)}: episode %{{x}}, average %{{y}}<extra></extra>",
        }
        for i, name, episodes, average in curves
    ]
    return {
        "data": data,
        "layout": {
            **LAYOUT_BASE,
            "xaxis": {"title": {"text": "Episode"}},
            "yaxis": {"title": {"text": f"Score (average of {AVERAGE_OF} episodes)"}},
        },
    }


# Eight runs compared side by side, each in its colour (its column's too).
COMPARED_COLOURS = (
    "#2563eb",
    "#d97706",
    "#16a34a",
    "#dc2626",
    "#9333ea",
    "#0891b2",
    "#db2777",
    "#65a30d",
)


# One colour per proposer of a comparison, in the comparison's order.
PROPOSER_COLOURS = ("#64748b", "#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626")


def _rgba(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _band(
    group: str, x: list[Any], points: Sequence[Any], line: dict[str, Any], hover: bool
) -> list[dict[str, Any]]:
    """A proposer's 95% band: its 97.5% edge (``high``), then its 2.5% edge (``low``) with the
    area between them filled; ``hover`` names each edge's value on hover, else none shows."""
    filled = {"fill": "tonexty", "fillcolor": _rgba(line["color"], 0.15)}
    edges: list[dict[str, Any]] = []
    for edge, y, fill in (
        ("97.5%", [p.high for p in points], {}),
        ("2.5%", [p.low for p in points], filled),
    ):
        edges.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{group} {edge}",
                "legendgroup": group,
                "showlegend": False,
                "x": x,
                "y": y,
                **fill,
                "line": line,
                **(
                    {"hovertemplate": f"{group} {edge}: %{{y}} after %{{x}} runs<extra></extra>"}
                    if hover
                    else {"hoverinfo": "skip"}
                ),
            }
        )
    return edges


def comparison_figure(
    curves: Sequence[tuple[str, Sequence[Any]]], budget: int, target: float | None
) -> dict[str, Any]:
    """Per proposer the median best-so-far against simulations, inside its 95% band (a filled
    area between the 2.5th and 97.5th percentiles over repeats); the picked score as a line.

    ``curves`` is ``(proposer, points)`` with points having ``simulations``, ``median``,
    ``low``, ``high`` and ``repeats`` (``comparison_stats.CurvePoint``).
    """
    data: list[dict[str, Any]] = []
    for number, (proposer, points) in enumerate(curves):
        colour = PROPOSER_COLOURS[number % len(PROPOSER_COLOURS)]
        name = escape(proposer)
        x = [p.simulations for p in points]
        data += _band(name, x, points, {"width": 0, "shape": "hv", "color": colour}, hover=True)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{name} median",
                "legendgroup": name,
                "x": x,
                "y": [p.median for p in points],
                "customdata": [p.repeats for p in points],
                "line": {"width": 2.5, "shape": "hv", "color": colour},
                "hovertemplate": (
                    f"<b>{name}</b>: median best %{{y}} after %{{x}} runs"
                    " (%{customdata} repeats)<extra></extra>"
                ),
            }
        )
    shapes: list[dict[str, Any]] = []
    if target is not None:
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "yref": "y",
                "x0": 0,
                "x1": 1,
                "y0": target,
                "y1": target,
                "line": {"color": SEED_COLOUR, "width": 1, "dash": "dot"},
            }
        )
    layout = {
        **LAYOUT_BASE,
        "xaxis": {
            "title": {"text": "SnakeLab simulations (seeding is run 1)"},
            "range": [1, budget],
        },
        "yaxis": {"title": {"text": "Best high score so far"}},
        "shapes": shapes,
    }
    return {"data": data, "layout": layout}


PAIR_COLOUR = "#2563eb"


def pair_label(a: str, b: str) -> str:
    """A paired comparison's row label on the paired-differences plot."""
    return f"{a} − {b}"


def paired_figure(pairs: Sequence[Any]) -> dict[str, Any]:
    """Each pair's median paired difference of held-out means (A − B) as a point with its 95%
    bootstrap interval as error bars, one row per pair, and a line at 0 (no difference).

    ``pairs`` have ``a``, ``b``, ``repeats``, ``median_difference``, ``low``, ``high`` and
    ``p_a_beats_b`` (``comparison_stats.PairedDifference``).
    """
    labels = [escape(pair_label(p.a, p.b)) for p in pairs]
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "median paired difference",
            "x": [p.median_difference for p in pairs],
            "y": labels,
            "error_x": {
                "type": "data",
                "symmetric": False,
                "array": [p.high - p.median_difference for p in pairs],
                "arrayminus": [p.median_difference - p.low for p in pairs],
                "color": PAIR_COLOUR,
                "thickness": 2,
            },
            "customdata": [[p.low, p.high, p.p_a_beats_b, p.repeats] for p in pairs],
            "marker": {"size": 10, "color": PAIR_COLOUR},
            "hovertemplate": (
                "<b>%{y}</b>: median difference %{x:+.2f}, 95% interval"
                " [%{customdata[0]:+.2f}, %{customdata[1]:+.2f}], P(A beats B)"
                " %{customdata[2]:.2f} over %{customdata[3]} repeats<extra></extra>"
            ),
        }
    ]
    layout = {
        **LAYOUT_BASE,
        "height": 140 + 48 * len(pairs),
        "showlegend": False,
        "xaxis": {"title": {"text": "Held-out mean high score, A − B (median over repeats)"}},
        "yaxis": {"autorange": "reversed", "automargin": True},
        "shapes": [vertical_line(0)],
    }
    return {"data": data, "layout": layout}


def retest_curve_figure(curves: Sequence[tuple[str, Sequence[Any]]], budget: int) -> dict[str, Any]:
    """Per proposer the held-out IQM against the runs spent, with its bootstrap interval as a
    band (``--retest-at``). ``curves`` is ``(proposer, points)`` with points having
    ``at_runs``, ``iqm``, ``low``, ``high`` and ``repeats`` (``models.comparison.RetestPoint``).
    """
    data: list[dict[str, Any]] = []
    for number, (proposer, points) in enumerate(curves):
        colour = PROPOSER_COLOURS[number % len(PROPOSER_COLOURS)]
        name = escape(proposer)
        x = [p.at_runs for p in points]
        data += _band(name, x, points, {"width": 0, "color": colour}, hover=False)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{name} held-out IQM",
                "legendgroup": name,
                "x": x,
                "y": [p.iqm for p in points],
                "customdata": [[p.low, p.high, p.repeats] for p in points],
                "line": {"width": 2.5, "color": colour},
                "hovertemplate": (
                    f"<b>{name}</b>: held-out IQM %{{y:.2f}} after %{{x}} runs"
                    " [%{customdata[0]:.2f}, %{customdata[1]:.2f}],"
                    " %{customdata[2]} repeats<extra></extra>"
                ),
            }
        )
    layout = {
        **LAYOUT_BASE,
        "xaxis": {
            "title": {"text": "SnakeLab runs spent (the recommendation then)"},
            "range": [0, budget],
        },
        "yaxis": {"title": {"text": "Held-out mean high score (IQM over repeats)"}},
    }
    return {"data": data, "layout": layout}
