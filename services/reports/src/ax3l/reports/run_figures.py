"""Plotly figures of the runs table (plain data the page hands to the served plotly.js).

History, slice and parallel coordinates draw every run from the in-memory runs table
(``queries/runs.py``). Optuna's visualization module builds its figures from a study's trials;
building a study of 100,000 runs on every request costs seconds, so these figures are drawn
from the table directly, in the shapes optuna-dashboard users know (one parameter per slice
plot with a parameter selector, a parallel coordinates plot coloured by the objective). The
importance page uses Optuna's own evaluator (``queries/importance.py``).

Large scatter plots use ``scattergl`` (WebGL): 100,000 points stay interactive. Hover texts
carry no untrusted text: only numbers, the proposer and the entry, escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from ax3l.reports.figures import (
    LAYOUT_BASE,
    LINE_COLOUR,
    MAX_SEED_LINES,
    SEED_COLOUR,
    escape,
    seed_changes,
    vertical_line,
)
from ax3l.reports.models.highscores import HighscorePoint

RUN_COLOUR = "#94a3b8"
FAILED_COLOUR = "#dc2626"
HISTORY_RUNS = "Runs"
HISTORY_GOLDEN = "Golden score"
HISTORY_OTHER = "Runs not completed"
SLICE_EARLIER = "earlier seeds"
SLICE_SEEDS = 10  # seeds with a colour of their own on the slice plot, the most recent
SEED_PALETTE = (
    "#2563eb",
    "#16a34a",
    "#9333ea",
    "#dc2626",
    "#0891b2",
    "#db2777",
    "#65a30d",
    "#7c3aed",
    "#ea580c",
    "#0f766e",
)
SLICE_GOLDEN = "Golden configuration"


def _seed_lines(points: Sequence[HighscorePoint], by_time: bool) -> list[dict[str, Any]]:
    changes = seed_changes(points)
    if len(changes) > MAX_SEED_LINES:
        return []
    return [vertical_line(p.occurred_at.isoformat() if by_time else p.simulations) for p in changes]


def history_figure(
    frame: pl.DataFrame,
    points: Sequence[HighscorePoint],
    *,
    by_time: bool = False,
    height: int | None = None,
    webgl: bool = True,
) -> dict[str, Any]:
    """Every run's high score against its run number (or its submission time), the golden
    score as a step line and seed changes as dotted lines. ``webgl=False`` draws the runs as
    SVG: for the dashboard's few thousand points it draws sooner than a WebGL context starts
    (which is software rendering on a machine without a GPU)."""
    markers = "scattergl" if webgl else "scatter"
    axis = "created_at" if by_time else "id"
    scored = frame.filter(pl.col("high_score").is_not_null())
    completed = scored.filter(pl.col("status") == "completed")
    other = scored.filter(pl.col("status") != "completed")

    def xs(part: pl.DataFrame) -> list[Any]:
        if by_time:
            return [None if t is None else t.isoformat() for t in part[axis].to_list()]
        return part[axis].to_list()

    data: list[dict[str, Any]] = [
        {
            "type": markers,
            "mode": "markers",
            "name": HISTORY_RUNS,
            "x": xs(completed),
            "y": completed["high_score"].to_list(),
            "customdata": completed["seed"].to_list(),
            "marker": {"size": 4, "color": RUN_COLOUR, "opacity": 0.7},
            "hovertemplate": "Run %{x}: score %{y}, seed %{customdata}<extra></extra>"
            if not by_time
            else "%{x}: score %{y}, seed %{customdata}<extra></extra>",
        }
    ]
    if other.height:
        data.append(
            {
                "type": markers,
                "mode": "markers",
                "name": HISTORY_OTHER,
                "x": xs(other),
                "y": other["high_score"].to_list(),
                "marker": {"size": 5, "color": FAILED_COLOUR, "symbol": "x"},
                "hovertemplate": "%{x}: score %{y} (not completed)<extra></extra>",
            }
        )
    if points:
        golden_x: list[Any] = [
            p.occurred_at.isoformat() if by_time else p.simulations for p in points
        ]
        golden_y = [p.score for p in points]
        end: Any = None
        if frame.height:
            end = frame[axis].max()
            if by_time and end is not None:
                end = end.isoformat()
        if end is not None and (by_time or end > points[-1].simulations):
            golden_x.append(end)
            golden_y.append(points[-1].score)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": HISTORY_GOLDEN,
                "x": golden_x,
                "y": golden_y,
                "line": {"shape": "hv", "color": LINE_COLOUR, "width": 2.5},
                "hovertemplate": "Golden score %{y}<extra></extra>",
            }
        )
    layout: dict[str, Any] = {
        **LAYOUT_BASE,
        "xaxis": {
            "title": {"text": "Submitted (UTC)" if by_time else "Run number (SnakeLab's id)"},
        },
        "yaxis": {"title": {"text": "High score"}, "rangemode": "tozero"},
        "shapes": _seed_lines(points, by_time),
    }
    if height is not None:
        layout["height"] = height
        layout["margin"] = {"l": 50, "r": 10, "t": 10, "b": 40}
        layout["legend"] = {"orientation": "h", "y": -0.25}
    return {"data": data, "layout": layout}


def slice_figure(
    frame: pl.DataFrame, column: str, path: str, golden_value: float | None
) -> dict[str, Any]:
    """Score against one tuned value for every completed run, one colour per seed (the
    ``SLICE_SEEDS`` most recent; earlier seeds share grey), with the golden configuration's
    value as a vertical line. One trace per seed, not a colour per point: plotly draws 100,000
    points about three times faster that way."""
    done = frame.filter(
        (pl.col("status") == "completed")
        & pl.col("high_score").is_not_null()
        & pl.col(column).is_not_null()
    )
    seeds = sorted((s for s in done["seed"].unique().to_list() if s is not None), reverse=True)
    recent = seeds[:SLICE_SEEDS]
    groups: list[tuple[str, pl.DataFrame, str]] = [
        (f"seed {seed}", done.filter(pl.col("seed") == seed), SEED_PALETTE[number])
        for number, seed in enumerate(recent)
    ]
    earlier = done.filter(~pl.col("seed").is_in(recent) | pl.col("seed").is_null())
    if earlier.height:
        groups.append((SLICE_EARLIER, earlier, RUN_COLOUR))
    data: list[dict[str, Any]] = [
        {
            "type": "scattergl",
            "mode": "markers",
            "name": name,
            "x": part[column].to_list(),
            "y": part["high_score"].to_list(),
            "customdata": part["id"].to_list(),
            "marker": {"size": 5, "opacity": 0.75, "color": colour},
            "hovertemplate": (
                f"{escape(path)} %{{x}}: score %{{y}}<br>{name}, run %{{customdata}}<extra></extra>"
            ),
        }
        for name, part, colour in groups
    ]
    shapes: list[dict[str, Any]] = []
    if golden_value is not None:
        shapes.append(vertical_line(golden_value, width=2, dash="dash"))
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": SLICE_GOLDEN,
                "x": [golden_value, golden_value],
                "y": [None, None],
                "line": {"color": SEED_COLOUR, "width": 2, "dash": "dash"},
                "hoverinfo": "skip",
            }
        )
    layout = {
        **LAYOUT_BASE,
        "xaxis": {"title": {"text": escape(path)}},
        "yaxis": {"title": {"text": "High score"}},
        "shapes": shapes,
        "annotations": []
        if golden_value is None
        else [
            {
                "x": golden_value,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "showarrow": False,
                "text": f"golden {golden_value:g}",
                "font": {"color": SEED_COLOUR, "size": 11},
            }
        ],
    }
    return {"data": data, "layout": layout}


def axis_label(path: str) -> str:
    """A short axis name that still says which value: ``hidden_size``, ``closer_to_food``,
    but ``epsilon.initial`` (its last part alone, ``initial``, says nothing)."""
    return path if path.startswith("epsilon.") else path.rsplit(".", 1)[-1]


def parallel_figure(
    frame: pl.DataFrame, columns: Sequence[str], paths: dict[str, str]
) -> dict[str, Any]:
    """Parallel coordinates of the tuned values and the score, lines coloured by score:
    plotly's ``parcoords`` (WebGL: axes can be brushed to select a range; seconds to draw on a
    machine that renders WebGL in software)."""
    done = frame.filter(pl.col("status") == "completed").drop_nulls([*columns, "high_score"])
    dimensions = [
        {"label": escape(axis_label(paths[column])), "values": done[column].to_list()}
        for column in columns
    ]
    scores = done["high_score"].to_list()
    dimensions.append({"label": "high score", "values": scores})
    data = [
        {
            "type": "parcoords",
            "name": "Runs",
            "dimensions": dimensions,
            "line": {
                "color": scores,
                "colorscale": "Viridis",
                "showscale": True,
                "colorbar": {"title": {"text": "score"}},
            },
        }
    ]
    layout = {**LAYOUT_BASE, "margin": {"l": 70, "r": 70, "t": 60, "b": 30}}
    return {"data": data, "layout": layout}


# Score bands of the parallel lines, low to high (Viridis at eight stops).
BAND_COLOURS = (
    "#440154",
    "#46327e",
    "#365c8d",
    "#277f8e",
    "#1fa187",
    "#4ac16d",
    "#a0da39",
    "#fde725",
)


def _tick(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def _span(values: pl.Series) -> tuple[float, float]:
    """The lowest and highest of ``values`` (0 and 1 when there are none)."""
    if values.is_empty():
        return 0.0, 1.0
    low, high = values.min(), values.max()
    return float(low), float(high)  # type: ignore[arg-type]


def parallel_lines_figure(
    frame: pl.DataFrame, columns: Sequence[str], paths: dict[str, str]
) -> dict[str, Any]:
    """Parallel coordinates drawn as SVG lines (plotly's basic bundle, no WebGL): each axis
    scaled from its lowest to its highest value (both written at its ends), one line per
    completed run, coloured by its score's band (``BAND_COLOURS``; a legend entry each, so a
    click hides a band). A tenth of a second where ``parcoords`` takes seconds without a GPU;
    ``parallel_figure`` is the interactive one."""
    done = frame.filter(pl.col("status") == "completed").drop_nulls([*columns, "high_score"])
    axes = [*columns, "high_score"]
    labels = [axis_label(paths[column]) for column in columns] + ["high score"]
    spans = [_span(done[column]) for column in axes]
    scaled = done.select(
        [
            ((pl.col(column) - low) / (high - low) if high > low else pl.lit(0.5))
            .round(4)
            .alias(column)
            for column, (low, high) in zip(axes, spans, strict=True)
        ]
    )
    low_score, high_score = spans[-1]
    width = math.ceil((high_score - low_score + 1) / len(BAND_COLOURS))  # whole scores a band
    bands = math.ceil((high_score - low_score + 1) / width)
    band = ((done["high_score"] - low_score) / width).floor().cast(pl.Int64).to_list()
    rows = scaled.rows()
    data = []
    for b in range(bands):
        xs: list[int | None] = []
        ys: list[float | None] = []
        for row, own in zip(rows, band, strict=True):
            if own == b:
                xs += [*range(len(axes)), None]
                ys += [*row, None]
        start = low_score + b * width
        top = min(low_score + (b + 1) * width - 1, high_score)
        colour = BAND_COLOURS[round(b * (len(BAND_COLOURS) - 1) / max(bands - 1, 1))]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"score {_tick(start)}" + (f"–{_tick(top)}" if top > start else ""),
                "x": xs,
                "y": ys,
                "line": {"color": colour, "width": 1},
                "opacity": 0.7,
                "hoverinfo": "skip",
            }
        )
    annotations = [
        {
            "x": i,
            "y": y,
            "xref": "x",
            "yref": "y",
            "yanchor": anchor,
            "showarrow": False,
            "text": _tick(value),
            "font": {"size": 11},
        }
        for i, (low, high) in enumerate(spans)
        for y, anchor, value in ((1.0, "bottom", high), (0.0, "top", low))
    ]
    ends = [
        {"label": label, "low": low, "high": high}
        for label, (low, high) in zip(labels, spans, strict=True)
    ]
    layout = {
        **LAYOUT_BASE,
        "margin": {"l": 30, "r": 30, "t": 40, "b": 60},
        "xaxis": {
            "tickvals": list(range(len(axes))),
            "ticktext": [escape(label) for label in labels],
            "tickangle": -30,
            "automargin": True,
            "range": [-0.6, len(axes) - 0.4],  # room for the first and last axes' labels
            "showgrid": True,
            "zeroline": False,
        },
        "yaxis": {"visible": False, "range": [-0.08, 1.08]},
        "legend": {"title": {"text": "high score"}},
        "annotations": annotations,
        "meta": {"axes": ends},  # the axes' ends, to read values back (a test, a script)
    }
    return {"data": data, "layout": layout}


def bar_figure(
    labels: Sequence[str], values: Sequence[float], axis_title: str, hover: str
) -> dict[str, Any]:
    """Horizontal bars, the first label on top."""
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": axis_title,
                "x": list(values),
                "y": [escape(label) for label in labels],
                "marker": {"color": LINE_COLOUR},
                "hovertemplate": hover,
            }
        ],
        "layout": {
            **LAYOUT_BASE,
            "height": 120 + 34 * len(labels),
            "showlegend": False,
            "xaxis": {"title": {"text": axis_title}},
            "yaxis": {"autorange": "reversed", "automargin": True},
        },
    }


EFFECT_COLOUR = "#2563eb"
EFFECT_RUNS = "runs"
EFFECT_ALONG = "runs that change this value alone"


def effect_figure(effect: Any) -> dict[str, Any]:
    """One tuned value's effect curve (``queries/run_model.Effect``): the predicted mean as the
    value varies, a band of two sds, every run's score against the value (those that differ
    from the recommendation in this value alone darker) and the recommendation's value."""
    upper = [m + 2 * s for m, s in zip(effect.means, effect.sds, strict=True)]
    lower = [m - 2 * s for m, s in zip(effect.means, effect.sds, strict=True)]
    along = [i for i, only in enumerate(effect.run_varies_only_this) if only]
    others = [i for i, only in enumerate(effect.run_varies_only_this) if not only]
    path = escape(effect.path)
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": name,
            "x": [effect.run_values[i] for i in rows],
            "y": [effect.run_scores[i] for i in rows],
            "marker": {"size": size, "opacity": opacity, "color": colour},
            "hovertemplate": f"{path} %{{x}}: score %{{y}}<extra></extra>",
        }
        for name, rows, size, opacity, colour in (
            (EFFECT_RUNS, others, 4, 0.35, RUN_COLOUR),
            (EFFECT_ALONG, along, 6, 0.8, SEED_COLOUR),
        )
        if rows
    ]
    data += [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "mean + 2 sd",
            "x": effect.values,
            "y": upper,
            "line": {"width": 0, "color": EFFECT_COLOUR},
            "showlegend": False,
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "± 2 sd",
            "x": effect.values,
            "y": lower,
            "fill": "tonexty",
            "fillcolor": "rgba(37, 99, 235, 0.15)",
            "line": {"width": 0, "color": EFFECT_COLOUR},
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "predicted mean",
            "x": effect.values,
            "y": effect.means,
            "line": {"width": 2, "color": EFFECT_COLOUR},
            "hovertemplate": f"{path} %{{x}}: predicted %{{y:.1f}}<extra></extra>",
        },
    ]
    shapes = [] if effect.recommended is None else [vertical_line(effect.recommended, 2, "dash")]
    return {
        "data": data,
        "layout": {
            **LAYOUT_BASE,
            "height": 260,
            "margin": {"l": 50, "r": 10, "t": 30, "b": 40},
            "title": {"text": path, "font": {"size": 13}},
            "xaxis": {
                "title": {"text": f"{path} ({escape(effect.scale)} scale)"},
                **({"type": "log"} if effect.scale == "log" else {}),
            },
            "yaxis": {"title": {"text": "High score"}},
            "shapes": shapes,
            "showlegend": False,
        },
    }
