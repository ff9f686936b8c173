"""The history invariants of ``ax3l.testing.invariants`` that a chaos run can break, on hand-made
histories (fast: part of `make test`).

The histories written here hold only what these invariants read; the invariants about complete
histories (every stage logged, decisions, snapshots with run counts, the cycle count) are
checked on real ones, by every end-to-end test's ``check_history``, so ``failing`` reports the
ones named below."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import datetime
from typing import Any

import pytest

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.invariants import (
    Check,
    Ev,
    check,
    check_invariants,
    decisions_follow_the_strictly_higher_rule,
    goldens_have_their_snapshots,
    proposals_match_their_turn,
    stages_logged_once_per_run,
    steps_in_round_robin_order,
)
from ax3l.testing.invariants import History as InMemoryHistory

SCHEMA = cached_schema()
CONFIG_COLUMNS = tuple(SCHEMA.flatten(SCHEMA.default_config()))  # SnakeLab's configuration columns

UNIQUE = (
    "no configuration stored twice in SnakeLab (retry after a never-started run, or a"
    " recorded baseline attempt after a failed one, excepted)"
)
ONCE = "no run submitted twice"
ACCOUNTED = "every SnakeLab run accounted for by an Ax3l event"
AT_MOST_ONE = "each checkpoint followed by at most one completed step (its own)"
ADVANCE = "consecutive checkpoints advance by one entry after a completed step, else not"
COMPARED = "every accepted proposal compared exactly once"
GOLDEN = "golden scores strictly increasing within a seed"
COMPLETED_ONCE = (
    "every accepted proposal whose SnakeLab run completed compared exactly once"
    " (the newest may be pending)"
)
ROLE = "every SnakeLab run is a proposal's, a baseline's or a retry's (no run unaccounted for)"
CHECKED = {UNIQUE, ONCE, ACCOUNTED, AT_MOST_ONE, ADVANCE, COMPARED, GOLDEN, COMPLETED_ONCE, ROLE}


def _given(**values: Any) -> dict[str, Any]:
    """``values`` but those not given (None)."""
    return {k: v for k, v in values.items() if v is not None}


class History:
    """Writes events and SnakeLab runs straight into the test databases."""

    def __init__(self, databases: Any):
        self.databases = databases
        self.conn = databases.connect("admin", databases.ax3l_db)

    def run(
        self,
        hidden_size: int,
        status: str = "completed",
        started: bool = True,
        episodes: int = 1,
        score: int = 40,
        submitted: bool = True,
        run_id: str | None = None,
        seed: int = 1,
        attempt: int | None = None,
        purpose: str | None = "seeding",
        parent: int | None = None,
        columns: dict[str, Any] | None = None,
        **submitted_content: Any,
    ) -> str:
        """A SnakeLab run and (``submitted``) its ``simulation_submitted`` event: a baseline's
        by default (``purpose``), the broker's with ``purpose=None`` and its proposal as
        ``parent``, a retry's with ``reason="retry"``; its configuration is all ones but
        ``hidden_size``, ``seed`` and ``columns``."""
        run_id = run_id or str(uuid.uuid4())
        db = self.databases.snakelab_db
        now = datetime.now()
        values = {c: 1 for c in CONFIG_COLUMNS} | {"model_hidden_size": hidden_size, "seed": seed}
        values |= columns or {}
        with self.conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO `{db}`.simulation_runs (run_id, project_version, config_hash,"
                " status, high_score, created_at, started_at)"
                " VALUES (%s, 'v', 'h', %s, %s, %s, %s)",
                # SnakeLab's high score is NULL until the first episode ends.
                (run_id, status, score if episodes else None, now, now if started else None),
            )
            cur.execute(
                f"INSERT INTO `{db}`.configurations (run_id, {', '.join(CONFIG_COLUMNS)})"
                f" VALUES (%s, {', '.join(['%s'] * len(CONFIG_COLUMNS))})",
                (run_id, *(values[c] for c in CONFIG_COLUMNS)),
            )
            cur.executemany(
                f"INSERT INTO `{db}`.simulation_episodes (run_id, episode, score, steps)"
                " VALUES (%s, %s, 1, 1)",
                [(run_id, episode) for episode in range(episodes)],
            )
        if submitted:
            given = _given(attempt=attempt, purpose=purpose)
            content = {"run_id": run_id, **submitted_content, **given}
            self.event("simulation_submitted", content, run_id, parent)
        return run_id

    def event(
        self,
        name: str,
        content: dict[str, Any],
        process_id: str | None = None,
        parent: int | None = None,
    ) -> int:
        with self.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO events (occurred_at, name, category, log_level, process_id,"
                " parent_event_id) VALUES (%s, %s, 'test', 'INFO', %s, %s)",
                (datetime.now(), name, process_id, parent),
            )
            event_id = int(cur.lastrowid)
            cur.execute(
                "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
                (event_id, json.dumps(content)),
            )
        return event_id

    def golden(self, run_id: str, score: int, seed: int = 1) -> None:
        content = {"run_id": run_id, "high_score": score, "seed": seed}
        event_id = self.event("golden_config_created", content)
        with self.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO experiment_highscores (event_id, simulations, score, seed)"
                " VALUES (%s, 1, %s, %s)",
                (event_id, score, seed),
            )

    def checkpoint(self, index: int) -> int:
        return self.event("round_robin_checkpoint", {"index": index})

    def step(self, index: int, hidden_size: int, score: int, golden_score: int) -> str:
        """A checkpoint, an accepted proposal, its run and its comparison."""
        self.checkpoint(index)
        run_id = self.accept(hidden_size, score)
        self.compare(run_id, index)
        if score > golden_score:
            self.golden(run_id, score)
        return run_id

    def accept(
        self,
        hidden_size: int,
        score: int = 40,
        checkpoint: int | None = None,
        adopted: bool = False,
        **run: Any,
    ) -> str:
        """An accepted proposal and its run, recorded as the broker records them (the
        proposal, then its ``simulation_submitted`` child); ``checkpoint`` is the turn it names."""
        run_id = str(uuid.uuid4())
        given = _given(checkpoint_event_id=checkpoint, adopted=adopted or None)
        self.last_proposal = self.event("proposal_accepted", {"run_id": run_id, **given}, run_id)
        return self.run(
            hidden_size, score=score, run_id=run_id, purpose=None, parent=self.last_proposal, **run
        )

    def retry(self, run_id: str, hidden_size: int, **run: Any) -> str:
        """The orchestrator's retry of the last proposal's step after ``run_id`` never trained."""
        return self.run(
            hidden_size,
            purpose="retry",
            parent=self.last_proposal,
            reason="retry",
            retry_of=run_id,
            **run,
        )

    def compare(self, run_id: str, index: int) -> None:
        self.event("configuration_compared", {"latest_run_id": run_id, "index": index}, run_id)

    def failing(self) -> dict[str, list[str]]:
        with self.databases.connect("admin", self.databases.ax3l_db) as conn:
            invariants, _ = check_invariants(conn, self.databases.snakelab_db)
        return {i.name: i.violations for i in invariants if not i.passed and i.name in CHECKED}


@pytest.fixture
def history(snakelab_tables: Any) -> Any:
    """A clean history: seeding, a promoted step 0, a retained step 1, checkpoint 2 open."""
    made = History(snakelab_tables)
    made.golden(made.run(224, score=40), 40)
    made.step(0, 240, score=45, golden_score=40)
    made.step(1, 256, score=30, golden_score=45)
    made.checkpoint(2)
    yield made
    made.conn.close()


def test_a_clean_history_keeps_every_invariant(history: History) -> None:
    """Seeding, a promotion, a retention and an open checkpoint violate nothing."""
    assert history.failing() == {}


def test_a_pending_proposal_and_a_retried_never_started_run_are_allowed(history: History) -> None:
    """The open turn's run (not compared yet) and the retry of a run that never trained, with
    the same configuration, are not violations."""
    history.accept(272, status="failed", started=False, episodes=0)
    history.accept(272)
    assert history.failing() == {}


def test_a_configuration_stored_twice_is_found(history: History) -> None:
    """A second run of a configuration that trained (and was not a retry) is reported."""
    history.run(240)
    failing = history.failing()
    assert set(failing) == {UNIQUE}
    assert "stored 2x" in failing[UNIQUE][0]


def test_a_recorded_baseline_attempt_after_a_failed_run_is_allowed(history: History) -> None:
    """A baseline that failed after training may run again as the loop's recorded attempt 2
    (issue 11 item 5); the same repeat without the attempt is a violation."""
    history.run(600, status="failed", episodes=3)
    history.run(600, attempt=2)
    assert history.failing() == {}
    history.run(600)
    assert set(history.failing()) == {UNIQUE}


def test_two_accepted_proposals_in_one_turn_are_found(history: History) -> None:
    """Two accepted proposals after one checkpoint is a step submitted twice (and the first
    one's completed run, no longer the newest, is never compared)."""
    history.accept(272)
    history.accept(288)
    assert set(history.failing()) == {ONCE, COMPLETED_ONCE}


def test_a_snakelab_run_without_an_event_is_found(history: History) -> None:
    """A run SnakeLab holds that no Ax3l event names is unaccounted for (and has no role)."""
    history.run(400, submitted=False)
    failing = history.failing()
    assert set(failing) == {ACCOUNTED, ROLE}
    assert "events naming it: none" in failing[ROLE][0]


def test_checkpoints_that_skip_or_repeat_are_found(history: History) -> None:
    """A checkpoint that moves on without a completed step breaks the round robin."""
    history.checkpoint(3)
    assert set(history.failing()) == {ADVANCE}


def test_a_checkpoint_completed_twice_is_found(history: History) -> None:
    """Two completed steps after one checkpoint (and a comparison of another index)."""
    run_id = history.accept(272)
    history.compare(run_id, 2)
    history.event("parameter_space_exhausted", {"index": 2})
    assert set(history.failing()) == {AT_MOST_ONE}


def test_a_proposal_compared_twice_is_found(history: History) -> None:
    """A second comparison of a run already compared."""
    first = history.databases.query(
        "SELECT process_id FROM events WHERE name = 'configuration_compared' ORDER BY event_id"
    )[0][0]
    history.compare(first, 0)
    assert COMPARED in history.failing()


def test_a_golden_score_that_does_not_rise_is_found(history: History) -> None:
    """Within one seed a new golden must beat the last; a new seed may start lower."""
    history.golden(history.run(512, score=44), 44)
    assert set(history.failing()) == {GOLDEN}


def test_a_lower_baseline_on_a_new_seed_is_allowed(history: History) -> None:
    """A seed rotation's fresh baseline may be lower than the last golden."""
    history.golden(history.run(224, score=20, seed=2), 20, seed=2)
    assert history.failing() == {}


# -- issue 21: completed runs compared exactly once, every run with a role ----------------------


def test_a_late_adopted_proposal_never_compared_is_found(history: History) -> None:
    """The freezes' finding: a proposal adopted late under an older checkpoint, whose run
    completed, is never compared while the loop goes on (the turn got a second run)."""
    open_turn = 2  # the fixture's open checkpoint
    query = "SELECT MAX(event_id) FROM events WHERE name = 'round_robin_checkpoint'"
    checkpoint = int(history.databases.query(query)[0][0])
    second = history.accept(272, checkpoint=checkpoint)
    history.compare(second, open_turn)
    orphan = history.accept(288, checkpoint=checkpoint, adopted=True)
    history.step(3, 304, score=30, golden_score=45)
    failing = history.failing()
    assert COMPLETED_ONCE in failing
    (violation,) = failing[COMPLETED_ONCE]
    assert orphan in violation and "compared 0x" in violation and "adopted" in violation
    assert f"#{checkpoint} checkpoint index 2" in violation


def test_the_newest_completed_proposal_may_be_pending_but_no_other(history: History) -> None:
    """The newest accepted proposal's completed run not compared yet is the open turn; once a
    newer proposal exists it is a violation."""
    history.accept(272)
    assert history.failing() == {}
    history.checkpoint(3)
    history.accept(288)
    failing = history.failing()
    assert COMPLETED_ONCE in failing
    assert "compared 0x" in failing[COMPLETED_ONCE][0]


def test_a_completed_run_compared_twice_is_found(history: History) -> None:
    """Two comparisons naming one completed run, even the newest proposal's."""
    run_id = history.accept(272)
    history.compare(run_id, 2)
    assert history.failing() == {}
    history.compare(run_id, 2)
    failing = history.failing()
    assert COMPLETED_ONCE in failing
    assert "compared 2x" in failing[COMPLETED_ONCE][0]


def test_a_failed_run_need_not_be_compared_but_a_completed_retry_must(history: History) -> None:
    """Only completed runs count: a never-started run retried is not compared; its retry,
    completed and not the newest proposal's, must be."""
    failed = history.accept(272, status="failed", started=False, episodes=0)
    retry = history.retry(failed, 272)
    assert history.failing() == {}
    history.checkpoint(3)
    history.accept(288)
    failing = history.failing()
    assert set(failing) >= {COMPLETED_ONCE}
    assert retry in failing[COMPLETED_ONCE][0]
    history.compare(retry, 2)
    assert COMPLETED_ONCE not in history.failing()


def test_baselines_and_retries_have_a_role(history: History) -> None:
    """Seeding and seed-rotation baselines and a retry of a proposal's step are known runs."""
    history.golden(history.run(224, score=20, seed=2, purpose="seed_rotation"), 20, seed=2)
    failed = history.accept(272, status="failed", started=False, episodes=0)
    history.retry(failed, 272)
    assert history.failing() == {}


def test_a_run_with_an_event_but_no_role_is_found(history: History) -> None:
    """A ``simulation_submitted`` alone (no purpose, no proposal, no retry of one) accounts for
    the run as far as the older invariant goes, but gives it no role."""
    run_id = history.run(400, purpose=None)
    failing = history.failing()
    assert set(failing) == {ROLE}
    assert run_id in failing[ROLE][0] and "simulation_submitted #" in failing[ROLE][0]
    history.run(416, purpose=None, reason="retry", parent=None)
    assert len(history.failing()[ROLE]) == 2  # a retry of no proposal has no role either


def test_an_orphan_run_names_the_intent_with_its_configuration(history: History) -> None:
    """A run nobody recorded is reported with the submission intent whose configuration it has
    (what an abandoned intent's late run looks like)."""
    config = SCHEMA.default_config()
    flat = SCHEMA.flatten(config)
    history.run(int(flat["model_hidden_size"]), submitted=False, columns=flat)
    with history.conn.cursor() as cur:
        cur.execute(
            "INSERT INTO submission_intents (created_at, state, entry, fingerprint, content)"
            " VALUES (%s, 'abandoned', 'model.hidden_size', 'f', %s)",
            (datetime.now(), json.dumps({"config": config})),
        )
    failing = history.failing()
    assert ROLE in failing
    assert "(abandoned, model.hidden_size, run None" in failing[ROLE][0]


# -- the invariants about complete histories, on histories built in memory -----------------------


def _ev(event_id: int, name: str, content: dict[str, Any], **ids: Any) -> Ev:
    """An event as stored, with its ``process_id`` and ``parent`` as given (else None)."""
    return Ev(event_id, name, "INFO", ids.get("process_id"), ids.get("parent"), None, None, content)


def _complete_history() -> InMemoryHistory:
    """Seeding golden (run s, 40), checkpoint 0, proposal p for hidden_size scoring 45,
    compared and promoted."""
    order = list(PARAMETER_ORDER)
    run = {"status": "completed", "episodes": 1, "episode_count": 1, "started": True, "error": None}
    runs = [
        {**run, "id": 1, "run_id": "s", "high_score": 40, "config": (("seed", 1.0),)},
        {**run, "id": 2, "run_id": "p", "high_score": 45, "config": (("seed", 1.0), ("h", 2.0))},
    ]
    compared = {"latest_run_id": "p", "index": 0, "state": "completed", "high_score": 45}
    compared |= {"golden_high_score": 40, "current_golden_run_id": "s"}

    def golden(run_id: str, score: int, simulations: int) -> dict[str, Any]:
        return {"run_id": run_id, "high_score": score, "seed": 1, "simulations": simulations}

    events = [
        _ev(1, "simulation_submitted", {"purpose": "seeding"}, process_id="s"),
        _ev(2, "golden_config_created", golden("s", 40, 1)),
        _ev(3, "round_robin_checkpoint", {"parameter_order": order, "index": 0}),
        _ev(4, "proposal_accepted", {"run_id": "p", "parameter": "hidden_size"}, process_id="p"),
        _ev(5, "simulation_submitted", {}, process_id="p", parent=4),
        _ev(6, "simulation_completed", {}, process_id="p"),
        _ev(7, "configuration_compared", compared, process_id="p"),
        _ev(8, "golden_config_created", golden("p", 45, 2), parent=7),
    ]
    return InMemoryHistory(events, runs, {2: (40, 1), 8: (45, 1)}, {2: 1, 8: 2})


def _replaced(history: InMemoryHistory, event_id: int, **content: Any) -> InMemoryHistory:
    events = [
        dataclasses.replace(e, content={**e.content, **content}) if e.event_id == event_id else e
        for e in history.events
    ]
    return InMemoryHistory(events, history.runs, history.snapshots, history.simulations)


def test_a_complete_history_keeps_every_invariant() -> None:
    """The in-memory complete history breaks none of the invariants."""
    assert [i.name for i in check(_complete_history()) if not i.passed] == []


def test_a_run_ended_twice_is_found() -> None:
    """Two terminal events for one run is a stage logged twice."""
    history = _complete_history()
    history.events.insert(6, _ev(6, "simulation_failed", {}, process_id="p"))
    assert not stages_logged_once_per_run(history).passed


@pytest.mark.parametrize(
    ("event_id", "change", "invariant"),
    [
        # A comparison at an equal score that promoted breaks the strictly-higher rule.
        (7, {"high_score": 40}, decisions_follow_the_strictly_higher_rule),
        # A first completed step of index 1 is out of order.
        (7, {"index": 1}, steps_in_round_robin_order),
        # A gamma proposal under hidden_size's checkpoint is not its turn's.
        (4, {"parameter": "gamma"}, proposals_match_their_turn),
        # The snapshot's run count must be the golden's.
        (8, {"simulations": 5}, goldens_have_their_snapshots),
    ],
)
def test_a_complete_history_with_one_event_changed_breaks_its_invariant(
    event_id: int, change: dict[str, Any], invariant: Check
) -> None:
    """The complete history with one event's content changed breaks the invariant named."""
    assert not invariant(_replaced(_complete_history(), event_id, **change)).passed


@pytest.mark.parametrize(("policy", "kept"), [("race", True), ("confirm", False)])
def test_a_raced_comparison_follows_its_race_not_the_means(policy: str, kept: bool) -> None:
    """A candidate whose mean over the race's seeds is higher can still lose its race (the paired
    test decides): retaining it keeps the rule under ``race`` and breaks it under ``confirm``,
    where the means decide."""
    history = _complete_history()
    means = {"candidate_mean": 41.25, "golden_mean": 40.5, "decision": "retained"}
    compared = dataclasses.replace(
        history.events[6], content={**history.events[6].content, **means}
    )
    started = _ev(9, "promotion_confirmation_started", {"policy": policy}, process_id="p")
    retained = _ev(10, "golden_config_retained", {}, parent=7)
    events = [*history.events[:6], started, compared, retained]
    changed = InMemoryHistory(events, history.runs, {2: (40, 1)}, {2: 1})
    assert decisions_follow_the_strictly_higher_rule(changed).passed is kept
