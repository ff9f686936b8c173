"""The comparison's one-sentence conclusion, and ``ax3l-compare --help`` saying what it does."""

from __future__ import annotations

import subprocess
import sys

from ax3l.shared.comparison_conclusion import MIN_REPEATS, conclusion
from ax3l.shared.comparison_stats import PairedDifference


def pair(a: str, b: str, repeats: int, median: float, low: float, high: float) -> PairedDifference:
    return PairedDifference(a, b, repeats, median, low, high, 0.5)


def test_two_repeats_conclude_nothing_and_say_how_many_to_run() -> None:
    """The review's case: 2 repeats, an interval of one point, P = 0.75: no conclusion."""
    said = conclusion([pair("tpe", "default", 2, 0.17, 0.0, 0.33)])
    assert said == "With 2 repeats nothing can be concluded; run at least 10 (--repeats 10)."


def test_an_interval_touching_zero_supports_nothing_and_one_excluding_it_names_the_winner() -> None:
    n = MIN_REPEATS
    assert "No proposer is supported" in conclusion([pair("tpe", "default", n, 0.2, 0.0, 0.33)])
    said = conclusion(
        [pair("tpe", "default", n, 2.5, 0.4, 4.0), pair("random", "tpe", n + 2, -1.5, -3.0, -0.5)]
    )
    assert said == (
        "Over 10 repeats tpe beats default by +2.50 (95% interval [+0.40, +4.00]);"
        " tpe beats random by +1.50 (95% interval [+0.50, +3.00])."
    )
    mixed = conclusion([pair("tpe", "default", n, 2.5, 0.4, 4.0), pair("a", "b", n, 0, -1, 1)])
    assert mixed.endswith("; the other pairs' intervals include 0.")


def test_help_describes_the_command_in_whole_sentences() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ax3l.compare", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    described = " ".join(done.stdout.split("\n\n")[1].split())
    assert described.startswith("ax3l-compare: does a proposer beat another on this problem?")
    assert described.endswith("paired by repeat."), described
    assert "``" not in described
