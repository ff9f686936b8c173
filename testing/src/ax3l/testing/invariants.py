"""The history invariants: what every Ax3l history keeps, whatever crashed or froze where.

One small function per invariant, registered in ``INVARIANTS`` by ``@invariant(name)``, each
over a ``History`` read from the databases alone (``read_history``) and returning an
``Invariant`` (how often it was checked, each violation) instead of stopping at the first failed
assertion. They are built on the product's own rules: a run that never trained is
``ax3l.orchestrator.attempts.never_trained``, terminal states are
``ax3l.shared.wire.TERMINAL_STATES``, a proposal belongs to the checkpoint it names, else to the
latest before it (``ax3l.shared.turn_state``), and step completions are ``ax3l.shared.cycles``'s.

The chaos tier, the soak (``check_invariants``) and every end-to-end test (through
``ax3l.testing.stack.check_history``) run the same ``INVARIANTS``. Test-only.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ax3l.orchestrator.attempts import never_trained
from ax3l.shared.cycles import COMPLETIONS, count_cycles
from ax3l.shared.db.snakelab_reads import episode_counts, runs_with_configurations
from ax3l.shared.event_models import EventContent, read_content
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.shared.wire import TERMINAL_STATES

STEP_EVENTS = tuple(sorted(COMPLETIONS))
RUN_ENDS = tuple(f"simulation_{state}" for state in sorted(TERMINAL_STATES))
DECISIONS = ("golden_config_created", "golden_config_retained")
T = TypeVar("T")


@dataclass
class Invariant:
    """One invariant: how many cases were checked and what violated it."""

    name: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        self.checked += 1
        if not ok:
            self.violations.append(problem)

    @property
    def passed(self) -> bool:
        return not self.violations


@dataclass(frozen=True)
class Ev:
    """An event as stored."""

    event_id: int
    name: str
    level: str
    process_id: str | None
    parent: int | None
    source_name: str | None
    parameter: str | None
    content: Any

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the content as stored (malformed rows included)."""
        return self.content.get(key, default) if isinstance(self.content, dict) else default

    @property
    def model(self) -> EventContent:
        """The content as its event's model, read as the product's typed reads read it
        (``ax3l.shared.event_models.read_content``)."""
        return read_content(self.name, self.content)


def _records(conn: Any, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts by column name."""
    with conn.cursor() as cur:
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_events(conn: Any) -> list[Ev]:
    """Every event with its content (JSON parsed, else the text), oldest first."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT e.event_id, e.name, e.log_level, e.process_id, e.parent_event_id,"
            " e.source_name, e.parameter, m.content FROM events e"
            " LEFT JOIN event_messages m ON m.event_id = e.event_id ORDER BY e.event_id"
        )
        rows = cur.fetchall()
    found = []
    for event_id, name, level, process_id, parent, source, parameter, content in rows:
        if content is not None:
            with contextlib.suppress(ValueError):
                content = json.loads(content)
        parent = None if parent is None else int(parent)
        found.append(Ev(int(event_id), name, level, process_id, parent, source, parameter, content))
    return found


Run = dict[str, Any]  # a SnakeLab run as ``read_runs`` reads it


def read_runs(conn: Any, snakelab_db: str) -> list[Run]:
    """SnakeLab's runs in submission order, with their configuration tuple and episode count."""
    with conn.cursor() as cur:
        runs = runs_with_configurations(cur, snakelab_db)
        episodes = episode_counts(cur, snakelab_db)
    return [
        {
            "id": int(r["id"]),
            "run_id": r["run_id"],
            "status": r["status"],
            "high_score": r["high_score"],
            "started": r["started_at"] is not None,
            "episodes": episodes.get(r["run_id"], 0),
            "episode_count": r["episode_count"],
            "error": r["error_message"],
            "config": None
            if r["config"] is None
            else tuple((c, float(v)) for c, v in r["config"].items()),
        }
        for r in runs
    ]


def never_started(run: Run) -> bool:
    """A run SnakeLab failed (or lost) before its first episode: the product's rule."""
    return never_trained(run["status"], run["high_score"], run["episode_count"] or run["episodes"])


@dataclass(frozen=True)
class History:
    """What the databases hold: events, SnakeLab's runs, score snapshots, submission intents."""

    events: list[Ev]
    runs: list[Run]
    snapshots: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # golden: score, seed
    simulations: dict[int, Any] = field(default_factory=dict)  # golden: run count at the time
    intents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def by_run_id(self) -> dict[str, Run]:
        return {run["run_id"]: run for run in self.runs}

    def named(self, *names: str) -> list[Ev]:
        return [e for e in self.events if e.name in names]


def read_history(conn: Any, snakelab_db: str) -> History:
    """The whole history, read through ``conn`` (an admin connection to Ax3l's database)."""
    scores = _records(conn, "SELECT * FROM experiment_highscores ORDER BY event_id")
    return History(
        read_events(conn),
        read_runs(conn, snakelab_db),
        {int(r["event_id"]): (r["score"], r["seed"]) for r in scores},
        {int(r["event_id"]): r["simulations"] for r in scores},
        read_intents(conn),
    )


Check = Callable[[History], Invariant]
INVARIANTS: list[Check] = []


def invariant(name: str) -> Callable[[Callable[[History, Invariant], None]], Check]:
    """Registers an invariant in ``INVARIANTS``: the decorated function checks a history into
    a fresh ``Invariant`` called ``name``, which the registered function returns."""

    def register(body: Callable[[History, Invariant], None]) -> Check:
        @functools.wraps(body)
        def checked(history: History) -> Invariant:
            found = Invariant(name)
            body(history, found)
            return found

        INVARIANTS.append(checked)
        return checked

    return register


def _grouped(items: Iterable[T], key: Callable[[T], Any]) -> dict[Any, list[T]]:
    """``items`` by ``key``, in order."""
    found: dict[Any, list[T]] = {}
    for item in items:
        found.setdefault(key(item), []).append(item)
    return found


def _run_of(event: Ev) -> Any:
    return event.get("run_id") or event.process_id


def _is_retry(event: Ev) -> bool:
    return "retry" in (event.get("reason"), event.get("purpose"))


def _proposal_runs(events: list[Ev]) -> dict[int, list[str]]:
    """Each accepted proposal's runs, by its event id: its own, then its retries' (the
    orchestrator's ``simulation_submitted`` children of the proposal with reason ``retry``)."""
    runs = {e.event_id: [_run_of(e)] for e in events if e.name == "proposal_accepted"}
    for event in events:
        if event.name == "simulation_submitted" and event.parent in runs and _is_retry(event):
            runs[event.parent].append(_run_of(event))
    return runs


def _turn_story(events: list[Ev], checkpoint_id: Any) -> str:
    """What a turn stored, from the checkpoint ``checkpoint_id`` until the step completed:
    the checkpoints of its index (a failed attempt checkpoints it again), the proposals naming
    them or written under them, the comparisons and exhausted turns, in order."""
    if not isinstance(checkpoint_id, int):
        return "no checkpoint named"
    told: list[str] = []
    index: Any = None
    turn: set[int] = set()  # the turn's checkpoints so far
    current: int | None = None
    for event in events:
        if event.event_id < checkpoint_id:
            if event.name == "round_robin_checkpoint":
                current = event.event_id
            continue
        if event.name == "round_robin_checkpoint":
            if event.event_id == checkpoint_id:
                index = event.get("index")
            elif event.get("index") != index:
                break  # the turn moved on
            current = event.event_id
            turn.add(current)
            told.append(f"#{event.event_id} checkpoint index {event.get('index')}")
            continue
        named = event.get("checkpoint_event_id")
        if event.name == "proposal_accepted" and (named in turn or current in turn):
            told.append(
                f"#{event.event_id} proposal_accepted run {str(_run_of(event))[:8]}"
                + (" adopted" if event.get("adopted") else "")
                + (f" for checkpoint #{named}" if isinstance(named, int) else "")
                + ("" if named == current else f" (written under checkpoint #{current})")
            )
        elif event.name == "configuration_compared" and current in turn:
            told.append(
                f"#{event.event_id} configuration_compared run"
                f" {str(_run_of_compared(event))[:8]} {event.get('decision')}"
            )
            break
        elif event.name == "parameter_space_exhausted" and current in turn:
            told.append(f"#{event.event_id} parameter_space_exhausted")
            break
    return "; ".join(told) or f"checkpoint #{checkpoint_id} not found"


def _run_of_compared(event: Ev) -> Any:
    return event.get("latest_run_id") or event.process_id


BASELINE_PURPOSES = ("seeding", "seed_rotation")
CONFIRMATION_PURPOSE = "confirmation"


def run_roles(events: list[Ev]) -> dict[Any, str]:
    """What Ax3l recorded each run as: ``proposal`` (a ``proposal_accepted`` names it, the
    broker's record), ``baseline`` (a seeding or seed-rotation ``simulation_submitted``),
    ``confirmation`` (a run on a confirmation seed under ``AX3L_PROMOTION=confirm``) or
    ``retry`` (the orchestrator's ``simulation_submitted`` retrying a proposal's step)."""
    proposals = {e.event_id for e in events if e.name == "proposal_accepted"}
    roles: dict[Any, str] = {}
    for event in events:
        if event.name == "proposal_accepted":
            roles.setdefault(_run_of(event), "proposal")
        elif event.name == "simulation_submitted":
            of_proposal = event.parent in proposals or event.get("proposal_event_id") in proposals
            if event.get("purpose") in BASELINE_PURPOSES:
                roles.setdefault(_run_of(event), "baseline")
            elif event.get("purpose") == CONFIRMATION_PURPOSE:
                roles.setdefault(_run_of(event), "confirmation")
            elif _is_retry(event) and of_proposal:
                roles.setdefault(_run_of(event), "retry")
    return roles


def _same_columns(config: dict[str, float], columns: dict[str, float]) -> bool:
    return all(
        config.get(c) is not None and math.isclose(config[c], v, rel_tol=1e-9, abs_tol=1e-12)
        for c, v in columns.items()
    )


def read_intents(conn: Any) -> list[dict[str, Any]]:
    """The submission intents, each with its configuration as SnakeLab's columns (``columns``,
    floats, like ``read_runs``'s configuration tuples)."""
    from ax3l.shared.config_schema import cached_schema

    schema = cached_schema()
    intents = _records(
        conn,
        "SELECT intent_id, state, entry, run_id, created_at, content FROM submission_intents"
        " ORDER BY intent_id",
    )
    for intent in intents:
        intent["intent_id"] = int(intent["intent_id"])
        content, intent["columns"] = intent.pop("content"), {}
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            flat = schema.flatten(json.loads(content)["config"])
            intent["columns"] = {c: float(v) for c, v in flat.items()}
    return intents


# -- the invariants ---------------------------------------------------------------------------


def _attempts(history: History) -> dict[Any, Any]:
    return {_run_of(e): e.get("attempt") for e in history.named("simulation_submitted")}


def _repeat_kind(earlier: list[Run], run: Run, attempt: Any) -> str:
    if all(never_started(r) for r in earlier):
        return "after a never-started run"
    scoreless = all(
        r["status"] in ("failed", "cancelled") or r["high_score"] is None for r in earlier
    )
    if scoreless and attempt == len(earlier) + 1:
        return "recorded attempt after a failed run"
    return "VIOLATION"


@invariant(
    "no configuration stored twice in SnakeLab (retry after a never-started run, or a"
    " recorded baseline attempt after a failed one, excepted)"
)
def no_configuration_stored_twice(history: History, unique: Invariant) -> None:
    """No configuration stored twice, except the loop's own rerun after a run that failed: the
    retry of a run that never trained, or a baseline run again after a failure, recorded as
    ``attempt`` n on its submission."""
    attempts = _attempts(history)
    for group in _grouped(history.runs, lambda run: run["config"]).values():
        if len(group) == 1:
            unique.check(True, "")
            continue
        stored = ", ".join(
            f"{r['run_id'][:8]} {r['status']} started={r['started']}"
            f" episodes={r['episodes']} attempt={attempts.get(r['run_id'])}"
            f" error={(r['error'] or '')[:80]!r}"
            for r in group
        )
        for position, run in enumerate(group[1:], start=1):
            kind = _repeat_kind(group[:position], run, attempts.get(run["run_id"]))
            unique.check(kind != "VIOLATION", f"config stored {len(group)}x: {stored}")


def _checkpoint_of(history: History) -> dict[int, Ev]:
    """Each event after the first checkpoint: the latest checkpoint before it."""
    found: dict[int, Ev] = {}
    current: Ev | None = None
    for event in history.events:
        if event.name == "round_robin_checkpoint":
            current = event
        elif current is not None:
            found[event.event_id] = current
    return found


def _proposals_by_checkpoint(history: History) -> dict[int, list[Ev]]:
    """Accepted proposals by the checkpoint they belong to: the one they name, else the latest
    before them (``ax3l.shared.turn_state``'s rule)."""
    checkpoint_of = _checkpoint_of(history)
    found: dict[int, list[Ev]] = {}
    for event in history.named("proposal_accepted"):
        named = event.get("checkpoint_event_id")
        before = checkpoint_of.get(event.event_id)
        owner = named if isinstance(named, int) else (before.event_id if before else None)
        if owner is not None:
            found.setdefault(owner, []).append(event)
    return found


@invariant("no run submitted twice")
def no_run_submitted_twice(history: History, once: Invariant) -> None:
    """One ``simulation_submitted`` per run; one accepted proposal per checkpoint (a second one
    only after a never-started run)."""
    submitted = Counter(_run_of(e) for e in history.named("simulation_submitted"))
    for run_id, n in submitted.items():
        once.check(n == 1, f"run {run_id} has {n} simulation_submitted events")
    by_run_id = history.by_run_id
    for checkpoint_id, accepted in _proposals_by_checkpoint(history).items():
        earlier_runs = [by_run_id.get(_run_of(a)) for a in accepted[:-1]]
        once.check(
            all(r is not None and never_started(r) for r in earlier_runs),
            f"checkpoint {checkpoint_id} has {len(accepted)} accepted proposals: "
            + ", ".join(
                f"{a.event_id}:{(a.get('run_id') or '')[:8]}:{a.get('parameter')}" for a in accepted
            ),
        )


@invariant("every SnakeLab run accounted for by an Ax3l event")
def every_run_accounted_for(history: History, accounted: Invariant) -> None:
    """Every SnakeLab run has its ``simulation_submitted`` event."""
    known = {_run_of(e) for e in history.named("simulation_submitted")}
    for run in history.runs:
        accounted.check(
            run["run_id"] in known,
            f"run {run['run_id']} ({run['status']}, SnakeLab id {run['id']})"
            " has no simulation_submitted event",
        )


def _completions_after(history: History) -> dict[int, list[Ev]]:
    checkpoint_of = _checkpoint_of(history)
    found: dict[int, list[Ev]] = {c.event_id: [] for c in history.named("round_robin_checkpoint")}
    for event in history.named(*STEP_EVENTS):
        if event.event_id in checkpoint_of:
            found[checkpoint_of[event.event_id].event_id].append(event)
    return found


@invariant("each checkpoint followed by at most one completed step (its own)")
def one_completed_step_per_checkpoint(history: History, at_most_one: Invariant) -> None:
    """Each checkpoint is followed by at most one completed step, of its own index."""
    completions = _completions_after(history)
    for checkpoint in history.named("round_robin_checkpoint"):
        done = completions[checkpoint.event_id]
        at_most_one.check(
            len(done) <= 1 and all(d.get("index") == checkpoint.get("index") for d in done),
            f"checkpoint {checkpoint.event_id} (index {checkpoint.get('index')}) followed by "
            + ", ".join(f"{d.name}#{d.event_id}(index {d.get('index')})" for d in done),
        )


@invariant("consecutive checkpoints advance by one entry after a completed step, else not")
def checkpoints_advance_after_a_step(history: History, advance: Invariant) -> None:
    """The next checkpoint is one entry further after a completed step, the same otherwise."""
    completions = _completions_after(history)
    entries = len(PARAMETER_ORDER)
    for first, second in itertools.pairwise(history.named("round_robin_checkpoint")):
        completed = bool(completions[first.event_id])
        expected = (first.get("index") + 1) % entries if completed else first.get("index")
        advance.check(
            second.get("index") == expected,
            f"checkpoint {first.event_id} index {first.get('index')} ->"
            f" {second.event_id} index {second.get('index')}"
            f" ({'after' if completed else 'without'} a completed step)",
        )


@invariant("every accepted proposal compared exactly once")
def proposals_compared_once(history: History, compared_exactly_once: Invariant) -> None:
    """Every accepted proposal whose run SnakeLab holds is compared exactly once (the last may
    still be pending; a never-started run that was retried is not compared). A proposal whose
    run SnakeLab does not hold (a run that vanished, a stray event) has nothing to compare: the
    loop logs it as vanished and retries it, or ignores it."""
    comparisons = Counter(_run_of_compared(e) for e in history.named("configuration_compared"))
    by_run_id = history.by_run_id
    last_completion = max((e.event_id for e in history.named(*STEP_EVENTS)), default=0)
    # Runs the loop retried (its comparison names the retry): one failed at the run deadline
    # may still read "running" in SnakeLab's table, which could not store its end.
    submitted = history.named("simulation_submitted")
    retried = {e.get("retry_of") for e in submitted if e.get("reason") == "retry"}
    for proposal in history.named("proposal_accepted"):
        run_id = _run_of(proposal)
        n = comparisons.get(run_id, 0)
        proposal_run = by_run_id.get(run_id)
        pending = proposal.event_id > last_completion and n == 0
        skipped_retry = n == 0 and (
            run_id in retried or (proposal_run is not None and never_started(proposal_run))
        )
        compared_exactly_once.check(
            n == 1 or pending or skipped_retry or (n == 0 and proposal_run is None),
            f"proposal for run {run_id}"
            f" ({proposal_run['status'] if proposal_run else 'no SnakeLab run'}) compared {n}x",
        )


@invariant("golden scores strictly increasing within a seed")
def goldens_rise_within_a_seed(history: History, increasing: Invariant) -> None:
    """Golden scores strictly increase within a seed, and so do golden means over the same
    confirmation seeds (``AX3L_PROMOTION=confirm``); a seed never comes back, and each golden
    has its matching score snapshot."""
    previous: Ev | None = None
    seen_seeds: list[Any] = []
    for golden in history.named("golden_config_created"):
        seed = golden.get("seed")
        snapshot = history.snapshots.get(golden.event_id)
        increasing.check(
            snapshot == (golden.get("high_score"), seed),
            f"golden {golden.event_id} score/seed {golden.get('high_score')}/"
            f"{golden.get('seed')} but snapshot {snapshot}",
        )
        if golden.get("kind") == "model":
            pass  # AX3L_GOLDEN=model: the golden follows the model, whatever its run's score
        elif previous is not None and previous.get("seed") == seed:
            increasing.check(
                golden.get("high_score") > previous.get("high_score"),
                f"seed {golden.get('seed')}: golden {golden.event_id}"
                f" ({golden.get('kind')}) score {golden.get('high_score')} after"
                f" {previous.event_id} score {previous.get('high_score')}",
            )
            means = (golden.get("mean_high_score"), previous.get("mean_high_score"))
            same_seeds = golden.get("confirmation_seeds") == previous.get("confirmation_seeds")
            if None not in means and same_seeds:
                increasing.check(
                    means[0] > means[1],
                    f"seed {seed}: golden {golden.event_id} mean {means[0]} after"
                    f" {previous.event_id} mean {means[1]} over the same seeds",
                )
        elif previous is not None:
            increasing.check(
                seed not in seen_seeds, f"seed {golden.get('seed')} came back at {golden.event_id}"
            )
        seen_seeds.append(seed)
        previous = golden


@invariant(
    "every accepted proposal whose SnakeLab run completed compared exactly once"
    " (the newest may be pending)"
)
def completed_runs_compared_once(history: History, compared_once: Invariant) -> None:
    """Every accepted proposal whose run completed in SnakeLab is compared exactly once: one
    ``configuration_compared`` naming that run as ``latest_run_id``. The newest accepted
    proposal may still be pending (no comparison yet); a comparison twice is never allowed. A
    retried proposal's runs are its own and its retries'; each of them that completed counts.
    """
    events, by_run_id = history.events, history.by_run_id
    comparisons = _grouped(history.named("configuration_compared"), _run_of_compared)
    proposals = {e.event_id: e for e in events if e.name == "proposal_accepted"}
    newest = max(proposals, default=None)
    for proposal_id, run_ids in _proposal_runs(events).items():
        proposal = proposals[proposal_id]
        for run_id in run_ids:
            run = by_run_id.get(run_id)
            if run is None or run["status"] != "completed":
                continue
            made = [c.event_id for c in comparisons.get(run_id, [])]
            pending = not made and proposal_id == newest
            compared_once.check(
                len(made) == 1 or pending,
                f"run {run_id} (SnakeLab id {run['id']}, completed, high score"
                f" {run['high_score']}) of proposal_accepted #{proposal_id}"
                f" ({proposal.get('parameter')}"
                + (", adopted" if proposal.get("adopted") else "")
                + f", checkpoint #{proposal.get('checkpoint_event_id')})"
                f" compared {len(made)}x"
                + (f" (#{', #'.join(str(m) for m in made)})" if made else "")
                + f"; that turn: {_turn_story(events, proposal.get('checkpoint_event_id'))}",
            )


@invariant("every SnakeLab run is a proposal's, a baseline's or a retry's (no run unaccounted for)")
def every_run_has_a_role(history: History, has_role: Invariant) -> None:
    """No SnakeLab run, whatever its status, is left unaccounted for: each is a proposal's run,
    a seeding or seed-rotation baseline or a retry of a proposal's step, as Ax3l recorded it
    (``run_roles``). A violation names the events that do mention the run, and the submission
    intents whose configuration it has (rows with a flattened ``columns`` dict)."""
    events, roles = history.events, run_roles(history.events)
    for run in history.runs:
        run_id = run["run_id"]
        if run_id in roles:
            has_role.check(True, "")
            continue
        naming = [
            f"{e.name} #{e.event_id}"
            + (f" (purpose {e.get('purpose')})" if e.get("purpose") else "")
            + (f" parent #{e.parent}" if e.parent else "")
            for e in events
            if run_id in (e.process_id, e.get("run_id"), e.get("latest_run_id"))
        ]
        config = dict(run["config"] or ())
        matching = [
            f"intent {i['intent_id']} ({i['state']}, {i['entry']}, run {i['run_id']},"
            f" created {i['created_at']})"
            for i in history.intents
            if i.get("columns") and _same_columns(config, i["columns"])
        ]
        has_role.check(
            False,
            f"run {run_id} (SnakeLab id {run['id']}, {run['status']}, high score"
            f" {run['high_score']}, {run['episodes']} episodes) has no role in Ax3l;"
            f" events naming it: {', '.join(naming) or 'none'};"
            f" intents with its configuration: {', '.join(matching) or 'none'}",
        )


@invariant("each run's stages logged once (submitted, started, ended, compared)")
def stages_logged_once_per_run(history: History, once: Invariant) -> None:
    """Each run: one ``simulation_submitted``, at most one start, one end, one comparison and
    one accepted proposal."""
    by_run = _grouped((e for e in history.events if e.process_id), lambda e: e.process_id)
    for run in history.runs:
        names = [e.name for e in by_run.get(run["run_id"], [])]
        once.check(
            names.count("simulation_submitted") == 1
            and names.count("simulation_started") <= 1
            and sum(names.count(n) for n in RUN_ENDS) <= 1
            and names.count("configuration_compared") <= 1
            and names.count("proposal_accepted") <= 1,
            f"run {run['run_id']}: {names}",
        )


@invariant("each comparison decided once, by the strictly-higher rule")
def decisions_follow_the_strictly_higher_rule(history: History, rule: Invariant) -> None:
    """Every comparison but the newest is decided once; only a completed run with a strictly
    higher score than the golden it was compared with is promoted (under confirm, with a
    strictly higher mean over the confirmation's seeds too; under race, only if it won its race,
    whose rule ``confirmations_decided_by_their_means`` checks); that golden is the latest
    before the comparison."""
    compared = history.named("configuration_compared")
    decisions = _grouped(history.named(*DECISIONS), lambda e: e.parent)
    goldens = history.named("golden_config_created")
    raced = {
        e.process_id for e in history.named("promotion_confirmation_started")
        if e.get("policy") == "race"
    }  # fmt: skip
    for position, compare in enumerate(compared):
        made = decisions.get(compare.event_id, [])
        newest = position == len(compared) - 1
        # A failed run keeps the high score it reached before it failed, but never wins.
        wins = (
            compare.get("state") == "completed"
            and compare.get("high_score") is not None
            and compare.get("high_score") > compare.get("golden_high_score")
        )
        if compare.get("confirmation_problem"):
            wins = False  # a confirmation run kept failing: the golden is retained
        elif compare.process_id in raced:
            # A race's mean may favour a loser: the paired test decides, not the means.
            wins = wins and compare.get("decision") == "promoted"
        elif compare.get("candidate_mean") is not None:
            wins = wins and compare.get("candidate_mean") > compare.get("golden_mean")
        expected = "golden_config_created" if wins else "golden_config_retained"
        golden = next((g for g in reversed(goldens) if g.event_id < compare.event_id), None)
        rule.check(
            (len(made) == 1 or (newest and not made))
            and all(d.name == expected for d in made)
            and golden is not None
            and compare.get("golden_high_score") == golden.get("high_score")
            and compare.get("current_golden_run_id") == golden.get("run_id"),
            f"comparison #{compare.event_id} {compare.content}: decisions"
            f" {[d.name for d in made]}, expected {expected}",
        )


@invariant("steps completed in round-robin order; cycles counted from them")
def steps_in_round_robin_order(history: History, order: Invariant) -> None:
    """Completed steps follow the round robin: indices 0, 1, ..., 6, 0, ... without a gap or a
    repeat, and the cycles counted from them are the complete passes."""
    steps = [e.get("index") for e in history.named(*STEP_EVENTS) if isinstance(e.get("index"), int)]
    entries = len(PARAMETER_ORDER)
    order.check(steps == [i % entries for i in range(len(steps))], f"steps out of order: {steps}")
    cycles = count_cycles((e.event_id, e.name, e.content) for e in history.events)
    order.check(
        cycles.complete == len(steps) // entries,
        f"{cycles.complete} cycles counted from {len(steps)} steps",
    )


@invariant("each accepted proposal is for its turn's entry and completes it")
def proposals_match_their_turn(history: History, match: Invariant) -> None:
    """An accepted proposal is for the entry of the checkpoint before it, and its comparison
    completes that checkpoint's index."""
    checkpoint_of = _checkpoint_of(history)
    compared = {_run_of_compared(e): e for e in history.named("configuration_compared")}
    for proposal in history.named("proposal_accepted"):
        checkpoint = checkpoint_of.get(proposal.event_id)
        index = checkpoint.get("index") if checkpoint else None
        comparison = compared.get(_run_of(proposal))
        match.check(
            isinstance(index, int)
            and proposal.get("parameter") == PARAMETER_ORDER[index]
            and (comparison is None or comparison.get("index") == index),
            f"proposal #{proposal.event_id} for {proposal.get('parameter')} under checkpoint"
            f" index {index}"
            + (f", compared as index {comparison.get('index')}" if comparison else ""),
        )


@invariant("each golden has its score snapshot, matching its run")
def goldens_have_their_snapshots(history: History, snapshot: Invariant) -> None:
    """Every golden has exactly its ``experiment_highscores`` row (score, seed, run count), and
    its run has that score and seed."""
    goldens = history.named("golden_config_created")
    snapshot.check(
        sorted(history.snapshots) == [g.event_id for g in goldens],
        f"snapshots {sorted(history.snapshots)} for goldens {[g.event_id for g in goldens]}",
    )
    by_run_id = history.by_run_id
    for golden in goldens:
        run = by_run_id.get(golden.get("run_id"))
        seed = dict(run["config"] or ()).get("seed") if run else None
        snapshot.check(
            history.snapshots.get(golden.event_id) == (golden.get("high_score"), golden.get("seed"))
            and history.simulations.get(golden.event_id) == golden.get("simulations")
            and run is not None
            and run["high_score"] == golden.get("high_score")
            and seed == golden.get("seed"),
            f"golden #{golden.event_id} {golden.content} snapshot"
            f" {history.snapshots.get(golden.event_id)} run {run and run['high_score']}",
        )


@invariant("each comparison's decision followed by the model at most once (AX3L_GOLDEN=model)")
def model_follows_each_decision_once(history: History, rule: Invariant) -> None:
    """A decision (a promotion's ``golden_config_created`` or a ``golden_config_retained``) has
    at most one follow-up of the model step: a golden of kind ``model`` or a
    ``model_recommendation``; a model golden's run ran on its seed and scored its high score."""
    follow_ups = _grouped(
        (
            e
            for e in history.events
            if e.name == "model_recommendation"
            or (e.name == "golden_config_created" and e.get("kind") == "model")
        ),
        lambda e: e.parent,
    )
    for parent, made in follow_ups.items():
        rule.check(len(made) == 1, f"decision #{parent} followed by {[e.event_id for e in made]}")
    by_run_id = history.by_run_id
    for golden in history.named("golden_config_created"):
        if golden.get("kind") != "model":
            continue
        run = by_run_id.get(golden.get("run_id"))
        rule.check(
            run is not None
            and run["high_score"] == golden.get("high_score")
            and dict(run["config"] or ()).get("seed") == golden.get("seed"),
            f"model golden #{golden.event_id}: run {golden.get('run_id')} is {run}",
        )


@invariant("each confirmation or race decided once, by its rule on shared seeds")
def confirmations_decided_by_their_means(history: History, rule: Invariant) -> None:
    """Under ``AX3L_PROMOTION=confirm``: each confirmation is decided at most once (only the
    newest may be undecided), over 1 + R scores per side that are its runs' high scores on its
    seeds, and promotes exactly when the candidate's mean is strictly higher; under ``race``,
    over the race seeds of its rounds, by the race's rule; each comparison that follows it says
    the same."""
    started = history.named("promotion_confirmation_started")
    decided = _grouped(history.named("promotion_confirmation_decided"), lambda e: e.parent)
    by_run_id = history.by_run_id
    compared = {e.process_id: e for e in history.named("configuration_compared")}
    for position, start in enumerate(started):
        made = decided.get(start.event_id, [])
        newest = position == len(started) - 1
        rule.check(
            len(made) == 1 or (newest and not made), f"confirmation #{start.event_id}: {made}"
        )
        for decision in made[:1]:
            problem = _confirmation_problem(decision, start, by_run_id)
            rule.check(problem is None, f"confirmation #{start.event_id}: {problem}")
            comparison = compared.get(start.process_id)
            if comparison is not None:
                rule.check(
                    comparison.get("decision") == decision.get("decision"),
                    f"comparison #{comparison.event_id} decided {comparison.get('decision')},"
                    f" its confirmation {decision.get('decision')}",
                )


def _confirmation_problem(decision: Ev, start: Ev, by_run_id: dict[str, Run]) -> str | None:
    if decision.get("problem"):
        return None if decision.get("decision") == "retained" else "promoted despite a problem"
    race = start.get("policy") == "race"
    seeds = list(start.get("seeds") or []) if race else [start.get("seed"), *start.get("seeds")]
    if race:
        seeds = seeds[: len(decision.get("seeds") or [])]
        if decision.get("seeds") != seeds or not seeds:
            return f"race seeds {decision.get('seeds')} are not a prefix of {start.get('seeds')}"
    sides = []
    for side in ("candidate", "golden"):
        runs, scores = decision.get(f"{side}_runs") or [], decision.get(f"{side}_scores") or []
        if decision.get("seeds") != seeds or len(runs) != len(seeds) or len(scores) != len(seeds):
            return f"{side}: {len(runs)} runs, {len(scores)} scores for seeds {seeds}"
        for run_id, score, seed in zip(runs, scores, seeds, strict=True):
            run = by_run_id.get(run_id)
            if run is None or run["high_score"] != score or dict(run["config"]).get("seed") != seed:
                return f"{side} run {run_id} on seed {seed}: stored {run and run['high_score']}"
        sides.append(scores)
    if race:
        return _race_problem(decision, start, sides[0], sides[1])
    promoted = sum(sides[0]) > sum(sides[1])
    if decision.get("decision") != ("promoted" if promoted else "retained"):
        return f"decided {decision.get('decision')} with scores {sides[0]} vs {sides[1]}"
    return None


def _race_problem(decision: Ev, start: Ev, ours: list[int], theirs: list[int]) -> str | None:
    """A race ends at a round's end (1, 3, 7... seeds); before, no round ended it; at its end a
    mean difference of 0 or less retains, a one-sided paired t-test p-value at or below alpha
    over the rounds that can promote (those of 3 seeds or more) promotes, and the seed cap
    retains. Recomputed here with scipy, not with the loop's code."""
    from scipy.stats import ttest_1samp

    cap = len(start.get("seeds") or [])
    alpha = float(start.get("alpha") or 0.1)
    ends, total, size = [], 0, 1
    while total < cap:
        total += min(size, cap - total)
        ends.append(total)
        size *= 2
    level = alpha / max(1, sum(1 for end in ends if end >= 3))

    def verdict(n: int) -> str | None:
        differences = [a - b for a, b in zip(ours[:n], theirs[:n], strict=True)]
        if sum(differences) <= 0:
            return "retained"
        if n >= 3:
            if len(set(differences)) == 1:
                return "promoted"
            if float(ttest_1samp(differences, 0.0, alternative="greater").pvalue) <= level:
                return "promoted"
        return "retained" if n >= cap else None

    n = len(ours)
    if n not in ends:
        return f"a race ended after {n} seeds, not at a round's end {ends}"
    early = [end for end in ends if end < n and verdict(end) is not None]
    if early:
        return f"the race should have ended after {early[0]} seeds"
    expected = verdict(n)
    if expected is None or decision.get("decision") != expected:
        said = decision.get("decision")
        return f"race decided {said}, its scores say {expected}: {ours} vs {theirs}"
    return None


def check(history: History) -> list[Invariant]:
    """Every invariant over ``history``."""
    return [invariant(history) for invariant in INVARIANTS]


def counts(history: History) -> dict[str, Any]:
    """Figures about a history, for the chaos and soak reports."""
    events, runs = history.events, history.runs
    roles = Counter(run_roles(events).values())
    attempts = _attempts(history)
    repeats: Counter[str] = Counter()
    by_config: dict[Any, list[Run]] = {}
    for run in runs:
        group = by_config.setdefault(run["config"], [])
        if group:
            repeats[_repeat_kind(group, run, attempts.get(run["run_id"]))] += 1
        group.append(run)
    checkpoint_of = _checkpoint_of(history)
    late = sum(
        1
        for e in history.named("proposal_accepted")
        if isinstance(e.get("checkpoint_event_id"), int)
        and e.event_id in checkpoint_of
        and e.get("checkpoint_event_id") != checkpoint_of[e.event_id].event_id
    )
    goldens = history.named("golden_config_created")
    return {
        "events": len(events),
        "snakelab_runs": len(runs),
        "runs_by_status": dict(Counter(r["status"] for r in runs)),
        "never_started_failed_runs": sum(1 for r in runs if never_started(r)),
        "configs_repeated": dict(repeats),
        "checkpoints": len(history.named("round_robin_checkpoint")),
        "completed_steps": len(history.named(*STEP_EVENTS)),
        "accepted_proposals": len(history.named("proposal_accepted")),
        "accepted_after_a_newer_checkpoint": late,
        "goldens": len(goldens),
        "seeds": sorted({g.get("seed") for g in goldens if g.get("seed") is not None}),
        "seed_rotations": len(history.named("seed_rotation_started")),
        "adopted_proposals": sum(1 for e in history.named("proposal_accepted") if e.get("adopted")),
        "retries": roles["retry"],
        "confirmations_by_decision": dict(
            Counter(e.get("decision") for e in history.named("promotion_confirmation_decided"))
        ),
        "confirmation_runs": roles["confirmation"],
        "intents_by_state": dict(Counter(i["state"] for i in history.intents)),
    }


def check_invariants(conn: Any, snakelab_db: str) -> tuple[list[Invariant], dict[str, Any]]:
    """Every invariant over the whole history in the databases, and some counts."""
    history = read_history(conn, snakelab_db)
    return check(history), counts(history)
