"""A tuned repeat's promotions, read from its own database before it is dropped.

Within the budget (a golden counts when ``Golden.known_after(budget)``: its run among the
budget's runs, written while SnakeLab held at most that many; a run counts when it is one of
the budget's runs):

* ``promotions``: the ``golden_config_created`` events of kind ``promotion``;
* ``confirmation_runs``: the runs spent on confirmations (``simulation_submitted`` with purpose
  ``confirmation``: a candidate's and its golden's runs on the confirmation seeds, and a
  seeding or rotation baseline's, under ``AX3L_PROMOTION=confirm``; 0 under ``single``);
* ``confirmations``: the ``promotion_confirmation_decided`` events by decision (``promoted``,
  ``retained``), those whose runs are all among the budget's;
* ``checks`` (the surrogate trainer only): for every promotion, the surrogate's noise-free
  expected high score of the new golden's configuration and of the golden it replaced (the one
  before it in event order). Whether a promotion really improved the configuration is known
  only there; a real SnakeLab has no such figure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ax3l.compare.retest import Golden
from ax3l.shared.db.event_reads import select_on
from snakelab.trainers.surrogate import expected_high_score

PROMOTION = "promotion"
CONFIRMATION_PURPOSE = "confirmation"  # simulation_submitted's purpose for confirmation runs


@dataclass(frozen=True)
class PromotionCheck:
    """One promotion judged by the surrogate's expected score (ground truth, surrogate only)."""

    run_id: str
    replaced_run_id: str
    expected_score: float
    replaced_expected_score: float

    @property
    def improved(self) -> bool:
        """The new golden's expected score is strictly higher than the replaced one's."""
        return self.expected_score > self.replaced_expected_score


@dataclass
class PromotionFigures:
    policy: str  # AX3L_PROMOTION of the repeat's orchestrator
    promotions: int = 0
    confirmation_runs: int = 0
    confirmations: dict[str, int] = field(default_factory=dict)
    checks: list[PromotionCheck] | None = None  # None off the surrogate

    @property
    def improved(self) -> int | None:
        return None if self.checks is None else sum(c.improved for c in self.checks)

    def content(self) -> dict[str, Any]:
        """What a repeat row's ``content`` keeps of them (under ``promotion``)."""
        found = asdict(self)
        if self.checks is None:
            del found["checks"]
        else:
            found["improved"] = self.improved
        return found


def promotion_figures(
    policy: str,
    goldens: Sequence[Golden],
    run_ids: Sequence[str],
    submitted: Sequence[Mapping[str, Any]],
    decided: Sequence[Mapping[str, Any]],
    *,
    surrogate: bool,
) -> PromotionFigures:
    """The figures of a repeat whose budget's runs are ``run_ids`` (in submission order), from
    its goldens (event order), its ``simulation_submitted`` and its
    ``promotion_confirmation_decided`` contents."""
    budget = len(run_ids)
    position = {run_id: k for k, run_id in enumerate(run_ids, start=1)}
    promoted = [
        (k, g)
        for k, g in enumerate(goldens)
        if g.kind == PROMOTION and k > 0 and g.known_after(budget, position)
    ]
    counted = {
        str(s.get("run_id"))
        for s in submitted
        if s.get("purpose") == CONFIRMATION_PURPOSE and s.get("run_id") in position
    }
    decisions: Counter[str] = Counter()
    for d in decided:
        runs = [*(d.get("candidate_runs") or []), *(d.get("golden_runs") or [])]
        if all(run in position for run in runs):
            decisions[str(d.get("decision"))] += 1
    checks = None
    if surrogate:
        checks = [
            PromotionCheck(
                g.run_id,
                goldens[k - 1].run_id,
                expected_high_score(g.config),
                expected_high_score(goldens[k - 1].config),
            )
            for k, g in promoted
        ]
    return PromotionFigures(
        policy, len(promoted), len(counted), dict(sorted(decisions.items())), checks
    )


def read_promotion_figures(
    cur: Any, policy: str, goldens: Sequence[Golden], run_ids: Sequence[str], *, surrogate: bool
) -> PromotionFigures:
    """``promotion_figures`` from the repeat's events (``cur``: a cursor on its database)."""
    contents: dict[str, list[Mapping[str, Any]]] = {
        "simulation_submitted": [],
        "promotion_confirmation_decided": [],
    }
    for event in select_on(cur, tuple(contents)):
        if isinstance(event.content, dict):
            contents[event.name].append(event.content)
    return promotion_figures(
        policy,
        goldens,
        run_ids,
        contents["simulation_submitted"],
        contents["promotion_confirmation_decided"],
        surrogate=surrogate,
    )
