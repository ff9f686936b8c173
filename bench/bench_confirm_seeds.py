"""How often a promotion under AX3L_PROMOTION=confirm really raises the expected score, by R.

On the reference SnakeLab's surrogate (deterministic per configuration and seed, with its
noise-free expected score), without running any service: 25 goldens (the defaults and 24 with
three settings changed), 60 one-setting candidates each. A candidate that beats its golden on
the current seed is promoted under R confirmation seeds when its sum over the current seed and
seed + 1,000,000 + k (k = 1..R) is strictly higher than the golden's over the same seeds (R = 0
is the spec's single rule). For each R it prints the promotions and the share whose expected
score is higher than the golden's, overall and among pairs whose expected scores differ by at
least 1 point. Surrogate only: a real SnakeLab has no expected score.

    uv run python bench/bench_confirm_seeds.py [--goldens 25] [--candidates 60] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from ax3l.orchestrator.racing import confirmation_seeds
from ax3l.shared.config_schema import ConfigSchema, Leaf, load_schema
from snakelab.trainers.surrogate import expected_high_score, predict_high_score

SEED = 1970
RS = (0, 1, 2, 4, 8, 16)


def tunable(schema: ConfigSchema) -> list[Leaf]:
    return [
        leaf
        for leaf in schema.leaves
        if leaf.path != "epochs"
        and leaf.minimum is not None
        and leaf.maximum is not None
        and leaf.minimum != leaf.maximum
    ]


def draw(leaf: Leaf, rng: random.Random) -> Any:
    assert leaf.minimum is not None and leaf.maximum is not None
    if leaf.multiple_of:
        steps = int((leaf.maximum - leaf.minimum) // leaf.multiple_of)
        value = leaf.minimum + leaf.multiple_of * rng.randint(0, steps)
        return int(value) if leaf.type == "integer" else value
    return round(rng.uniform(leaf.minimum, leaf.maximum), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--goldens", type=int, default=25)
    parser.add_argument("--candidates", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    schema = load_schema(None)
    leaves = tunable(schema)
    rng = random.Random(args.seed)
    seeds = [SEED, *confirmation_seeds(SEED, max(RS))]

    def on(config: dict[str, Any], seed: int) -> dict[str, Any]:
        return schema.validate(schema.with_values(config, {"seed": seed}))

    base = schema.validate(schema.default_config())
    tally = {r: [0, 0, 0, 0] for r in RS}  # promoted, raised, promoted (|diff| >= 1), raised
    for number in range(args.goldens):
        changes = {leaf.path: draw(leaf, rng) for leaf in rng.sample(leaves, 3)}
        golden = base if number == 0 else schema.validate(schema.with_values(base, changes))
        golden_expected = expected_high_score(on(golden, SEED))
        golden_scores = [predict_high_score(on(golden, seed)) for seed in seeds]
        for _ in range(args.candidates):
            leaf = rng.choice(leaves)
            candidate = schema.validate(schema.with_values(golden, {leaf.path: draw(leaf, rng)}))
            first = predict_high_score(on(candidate, SEED))
            if first <= golden_scores[0]:
                continue
            scores = [first] + [predict_high_score(on(candidate, seed)) for seed in seeds[1:]]
            difference = expected_high_score(on(candidate, SEED)) - golden_expected
            for r in RS:
                if sum(scores[: r + 1]) > sum(golden_scores[: r + 1]):
                    counts = tally[r]
                    counts[0] += 1
                    counts[1] += difference > 0
                    if abs(difference) >= 1:
                        counts[2] += 1
                        counts[3] += difference > 0
    print(f"{args.goldens} goldens x {args.candidates} one-setting candidates (surrogate only)")
    print(" R promotions raised expected   |diff| >= 1: promotions raised")
    for r, (promoted, raised, clear, clear_raised) in tally.items():
        print(
            f"{r:2d} {promoted:10d} {raised / max(promoted, 1):15.0%}"
            f" {clear:25d} {clear_raised / max(clear, 1):6.0%}"
        )
    print(
        "not shown: a real SnakeLab; candidates of other shapes (a proposer's, several settings"
        " at once); what the runs spent on confirmations would have bought as proposals"
    )


if __name__ == "__main__":
    main()
