"""A comparison's arms: a proposer, optionally with its promotion policy as a suffix.

``--proposers tpe,tpe@confirm`` runs ``tpe`` twice side by side: the orchestrator of a
``tpe@confirm`` repeat gets ``AX3L_PROMOTION=confirm`` (a run that beats the golden is promoted
only after candidate and golden ran on ``AX3L_CONFIRM_SEEDS`` more seeds), that of ``tpe`` gets
``AX3L_PROMOTION=single`` (the spec's rule), whatever the user exported. ``X@single`` is ``X``.
The arm's name, suffix included, is what the verdict, the paired tables, the CSV, the stored
rows and ``/comparison`` show. The control arm ``default`` is never tuned, so no policy applies
to it: ``default@confirm`` is refused (``default@single`` is ``default``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ax3l.shared.comparison_stats import CONTROL

SINGLE, CONFIRM = "single", "confirm"
POLICIES = (SINGLE, CONFIRM)  # AX3L_PROMOTION's values
SUFFIX = "@"


class ArmError(ValueError):
    """An arm name with an unknown policy, or a policy where none applies."""


@dataclass(frozen=True)
class Arm:
    name: str  # what every table and row shows: ``tpe``, ``tpe@confirm``
    proposer: str  # AX3L_PROPOSER
    promotion: str  # AX3L_PROMOTION


def parse_arm(text: str) -> Arm:
    """``X`` and ``X@single`` are ``X`` under the spec's rule, ``X@confirm`` under confirm."""
    text = text.strip()
    proposer, suffix, policy = text.partition(SUFFIX)
    if not suffix:
        return Arm(text, text, SINGLE)
    if policy not in POLICIES:
        raise ArmError(
            f"{text}: unknown promotion policy {policy!r} (after {SUFFIX!r}: {', '.join(POLICIES)})"
        )
    if policy == SINGLE:
        return Arm(proposer, proposer, SINGLE)
    if proposer == CONTROL:
        raise ArmError(
            f"{text}: the control arm {CONTROL} is never tuned, so it promotes nothing and no"
            f" promotion policy applies; use {CONTROL}"
        )
    return Arm(f"{proposer}{SUFFIX}{CONFIRM}", proposer, CONFIRM)


def policy_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """``(X@confirm, X)`` for every confirm arm whose single arm runs too."""
    arms = [parse_arm(name) for name in names]
    singles = {a.proposer for a in arms if a.promotion == SINGLE}
    return [(a.name, a.proposer) for a in arms if a.promotion == CONFIRM and a.proposer in singles]
