"""A comparison's arms: a proposer, optionally with suffixes that set how its loop promotes.

``--proposers tpe,tpe@confirm,model@race@follow`` runs three loops side by side. A suffix after
``@`` is one of:

* a promotion policy (``AX3L_PROMOTION``): ``single`` (the spec's rule, the default),
  ``confirm`` (a run that beats the golden is promoted only after candidate and golden ran on
  ``AX3L_CONFIRM_SEEDS`` more seeds) or ``race`` (only after a paired win in a race on up to
  ``AX3L_RACE_MAX_SEEDS`` seeds);
* ``follow``: the golden follows the model of every run (``AX3L_GOLDEN=model``) instead of
  the spec's rule (``AX3L_GOLDEN=spec``).

Each arm's orchestrator gets its own values, whatever the user exported. ``X@single`` is ``X``;
the arm's name keeps its other suffixes in this order (policy, then ``follow``), and it is what
the verdict, the paired tables, the CSV, the JSON, the stored rows and ``/comparison`` show.
The control arm ``default`` is never tuned, so no suffix applies to it (``default@single`` is
``default``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ax3l.shared.comparison_stats import CONTROL

SINGLE, CONFIRM, RACE = "single", "confirm", "race"
POLICIES = (SINGLE, CONFIRM, RACE)  # AX3L_PROMOTION's values
FOLLOW = "follow"  # AX3L_GOLDEN=model
SPEC_GOLDEN, MODEL_GOLDEN = "spec", "model"  # AX3L_GOLDEN's values
SUFFIX = "@"


class ArmError(ValueError):
    """An arm name with an unknown suffix, or a suffix where none applies."""


@dataclass(frozen=True)
class Arm:
    name: str  # what every table and row shows: ``tpe``, ``tpe@confirm``, ``model@race@follow``
    proposer: str  # AX3L_PROPOSER
    promotion: str  # AX3L_PROMOTION
    golden: str = SPEC_GOLDEN  # AX3L_GOLDEN

    @property
    def plain(self) -> bool:
        """Whether the arm runs its proposer under the spec's rules."""
        return self.promotion == SINGLE and self.golden == SPEC_GOLDEN


def parse_arm(text: str) -> Arm:
    """``X``, ``X@single``: X under the spec's rules; ``X@confirm``, ``X@race`` under that
    policy; ``@follow`` (alone or after the policy) with ``AX3L_GOLDEN=model``."""
    text = text.strip()
    proposer, *suffixes = text.split(SUFFIX)
    policies = [s for s in suffixes if s in POLICIES]
    unknown = [s for s in suffixes if s not in POLICIES and s != FOLLOW]
    if unknown:
        raise ArmError(
            f"{text}: unknown promotion policy {unknown[0]!r} (after {SUFFIX!r}:"
            f" {', '.join(POLICIES)}, or {FOLLOW} for AX3L_GOLDEN=model)"
        )
    if len(policies) > 1 or suffixes.count(FOLLOW) > 1:
        raise ArmError(f"{text}: at most one promotion policy and one {FOLLOW}")
    policy = policies[0] if policies else SINGLE
    golden = MODEL_GOLDEN if FOLLOW in suffixes else SPEC_GOLDEN
    if proposer == CONTROL and (policy != SINGLE or golden != SPEC_GOLDEN):
        raise ArmError(
            f"{text}: the control arm {CONTROL} is never tuned, so it promotes nothing and no"
            f" promotion policy applies; use {CONTROL}"
        )
    name = proposer + "".join(
        f"{SUFFIX}{part}"
        for part, on in ((policy, policy != SINGLE), (FOLLOW, golden == MODEL_GOLDEN))
        if on
    )
    return Arm(name, proposer, policy, golden)


def policy_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """``(X@..., X)`` for every arm with a suffix whose plain arm runs too."""
    arms = [parse_arm(name) for name in names]
    plain = {a.proposer for a in arms if a.plain}
    return [(a.name, a.proposer) for a in arms if not a.plain and a.proposer in plain]
