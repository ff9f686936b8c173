"""Validating a config against SnakeLab's schema (``ConfigSchema.errors``), what SnakeLab and
the toolbroker do for every submission: a valid config takes the "certainly valid" fast path
(``ax3l.shared.schema_fast_path``), an invalid one goes to jsonschema for its messages. Prints
the median time of one check of each, and the fast path's one-off compile time.

    .venv/bin/python bench/bench_config_validation.py          # 20 rounds of 1,000 checks
    .venv/bin/python bench/bench_config_validation.py --rounds 5
"""

from __future__ import annotations

import argparse
import copy
import statistics
from collections.abc import Callable
from functools import partial

from ax3l.shared.config_schema import load_schema
from ax3l.shared.schema_fast_path import compile_schema
from ax3l.testing.timing import per_call


def timed(call: Callable[[], object], rounds: int, calls: int) -> float:
    return statistics.median(per_call(call, rounds, calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    schema = load_schema()
    valid = schema.default_config()
    invalid = copy.deepcopy(valid)
    invalid["model"]["hidden_size"] = 70  # not a multiple of 16
    assert schema.errors(valid) == [] and schema.errors(invalid)
    compile_seconds = timed(lambda: compile_schema(schema.document), 3, 10)
    for name, config in (("valid", valid), ("invalid", invalid)):
        seconds = timed(partial(schema.errors, config), args.rounds, args.calls)
        print(f"errors(), a {name} config: median {seconds * 1e6:.1f} us")
    print(f"compile_schema (once a schema): {compile_seconds * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
