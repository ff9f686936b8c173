"""A comparison's conclusion in one sentence, with the sample-size caveat when it applies:
what ``ax3l-compare`` prints after its paired differences and ``/comparison`` leads with.

A pair is a supported difference when the 95% interval of its median paired difference
excludes 0 (both ends above 0, or both below); an interval touching 0, such as [+0.00, +0.33],
is not. Below ``MIN_REPEATS`` repeats the bootstrap intervals are too rough to read (with 2
repeats a proposer's interval is often one point), so nothing is concluded then.
"""

from __future__ import annotations

from collections.abc import Sequence

from ax3l.shared.comparison_stats import PairedDifference

MIN_REPEATS = 10


def _supported(pair: PairedDifference) -> str | None:
    """``A beats B by +d (95% interval [l, h])``, the winner first; None for no support."""
    if pair.low > 0:
        winner, loser, sign = pair.a, pair.b, 1.0
    elif pair.high < 0:
        winner, loser, sign = pair.b, pair.a, -1.0
    else:
        return None
    low, high = sorted((sign * pair.low, sign * pair.high))
    return (
        f"{winner} beats {loser} by {sign * pair.median_difference:+.2f}"
        f" (95% interval [{low:+.2f}, {high:+.2f}])"
    )


def conclusion(pairs: Sequence[PairedDifference]) -> str:
    """One sentence on the paired differences of held-out means."""
    if not pairs:
        return "Nothing can be concluded: no two proposers share a re-tested repeat."
    repeats = min(pair.repeats for pair in pairs)
    if repeats < MIN_REPEATS:
        return (
            f"With {repeats} repeat{'s' if repeats != 1 else ''} nothing can be concluded;"
            f" run at least {MIN_REPEATS} (--repeats {MIN_REPEATS})."
        )
    supported = [found for pair in pairs if (found := _supported(pair)) is not None]
    if not supported:
        return (
            f"No proposer is supported as better than another over {repeats} repeats: every"
            " paired difference's 95% interval includes 0."
        )
    rest = "" if len(supported) == len(pairs) else "; the other pairs' intervals include 0"
    return f"Over {repeats} repeats " + "; ".join(supported) + rest + "."
