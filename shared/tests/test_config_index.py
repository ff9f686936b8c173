import asyncio
import uuid
from fractions import Fraction

import pytest

from ax3l.shared import registry
from ax3l.shared.canonical import fingerprint
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.testing import snakelab_rows

SCHEMA = load_schema()


def insert_runs(dbs, *configs, **fields):
    return snakelab_rows.insert_runs(dbs, SCHEMA, *configs, **fields)


def snakelab_sql(dbs, sql, args=None):
    dbs.query(sql, args, user="snakelab")


def with_values(changes):
    return SCHEMA.with_values(SCHEMA.default_config(), changes)


DEFAULT = SCHEMA.default_config()


async def test_fingerprint_is_canonical_fingerprint():
    """The index's fingerprints are exactly canonical.fingerprint, for all and partial columns."""
    index = ConfigIndex(None, SCHEMA)  # type: ignore[arg-type]
    config = with_values({"training.gamma": 0.97, "seed": 1971})
    assert index.fingerprint(config) == fingerprint(SCHEMA, config)
    item = registry.entry("reward_pair")
    others = [c for c in SCHEMA.columns if c not in item.columns]
    assert index.context_fingerprint(item, config) == fingerprint(SCHEMA, config, others)


async def test_find_runs_is_canonical_and_ignores_status_and_version(snakelab_tables):
    """Equal configs match whatever status, version or number spelling; any change does not."""
    dbs = snakelab_tables
    first, second = insert_runs(dbs, DEFAULT, DEFAULT, status="failed", version="1.9.0")
    insert_runs(dbs, with_values({"seed": 1971}), with_values({"training.gamma": 0.961}))
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        spelled = with_values({"seed": 1970.0, "training.learning_rate": 21e-4, "epochs": 1500.0})
        assert await index.find_runs(spelled) == [first, second]
        assert await index.find_runs(with_values({"training.gamma": 0.962})) == []
        assert await index.find_runs(with_values({"seed": 1972})) == []


async def test_refresh_indexes_new_runs_of_any_writer_incrementally(snakelab_tables):
    """Each refresh indexes only what arrived since the last one."""
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA, batch_size=3)
        assert await index.refresh() == 0
        insert_runs(dbs, *[with_values({"model.hidden_size": 64 + 16 * i}) for i in range(7)])
        assert await index.refresh() == 7
        assert await index.refresh() == 0
        (late,) = insert_runs(dbs, with_values({"model.hidden_size": 384}))
        assert await index.find_runs(with_values({"model.hidden_size": 384})) == [late]
        assert await index.position() == 8


async def test_a_lower_id_committed_late_is_still_found(snakelab_tables):
    """A run whose transaction commits after a higher id was indexed is picked up later."""
    dbs = snakelab_tables
    slow = dbs.connect("snakelab", dbs.snakelab_db)
    slow.autocommit(False)
    try:
        with slow.cursor() as cur:
            slow_run = snakelab_rows.insert_run(cur, SCHEMA, with_values({"training.gamma": 0.91}))
        insert_runs(dbs, with_values({"training.gamma": 0.92}))
        async with Database(dbs.settings()) as db:
            index = ConfigIndex(db, SCHEMA)
            assert await index.find_runs(with_values({"training.gamma": 0.91})) == []
            holes = await db.fetchall("SELECT lo, hi FROM config_index_holes")
            assert [(r["lo"], r["hi"]) for r in holes] == [(1, 1)]
            slow.commit()
            assert await index.find_runs(with_values({"training.gamma": 0.91})) == [slow_run]
            assert await db.fetchall("SELECT lo FROM config_index_holes") == []
    finally:
        slow.close()


async def test_run_without_its_configuration_row_is_indexed_once_it_appears(snakelab_tables):
    """A writer that adds the configuration row separately is still seen once it does."""
    dbs = snakelab_tables
    run_id = str(uuid.uuid4())
    config = with_values({"training.batch_size": 10})
    snakelab_sql(
        dbs,
        "INSERT INTO simulation_runs (run_id, project_version, config_hash, status, created_at)"
        " VALUES (%s, '2.1.0', %s, 'queued', NOW(6))",
        (run_id, "0" * 64),
    )
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert await index.find_runs(config) == []
        flat = SCHEMA.flatten(config)
        snakelab_sql(
            dbs,
            f"INSERT INTO configurations (run_id, {', '.join(flat)})"
            f" VALUES (%s, {', '.join(['%s'] * len(flat))})",
            (run_id, *flat.values()),
        )
        assert await index.find_runs(config) == [run_id]


async def test_deleted_runs_stop_counting(snakelab_tables):
    """A run removed from SnakeLab no longer counts as stored or as a tested value."""
    dbs = snakelab_tables
    (run_id,) = insert_runs(dbs, with_values({"model.hidden_size": 80}))
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        item = registry.entry("hidden_size")
        assert (Fraction(80),) in await index.existing_values(item, DEFAULT)
        snakelab_sql(dbs, "DELETE FROM simulation_runs WHERE run_id = %s", (run_id,))
        assert await index.find_runs(with_values({"model.hidden_size": 80})) == []
        assert (Fraction(80),) not in await index.existing_values(item, DEFAULT)


async def test_a_recreated_snakelab_database_rebuilds_the_index(snakelab_tables):
    """When SnakeLab's ids start over with other runs, old answers are dropped."""
    dbs = snakelab_tables
    insert_runs(dbs, with_values({"training.gamma": 0.93}), with_values({"training.gamma": 0.94}))
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert await index.refresh() == 2
        snakelab_sql(dbs, "DELETE FROM simulation_runs")
        snakelab_sql(dbs, "ALTER TABLE simulation_runs AUTO_INCREMENT = 1")
        (fresh, _, _) = insert_runs(
            dbs,
            with_values({"training.gamma": 0.95}),
            with_values({"training.gamma": 0.951}),
            with_values({"training.gamma": 0.952}),
        )
        assert await index.find_runs(with_values({"training.gamma": 0.93})) == []
        assert await index.find_runs(with_values({"training.gamma": 0.95})) == [fresh]
        row = await db.fetchone("SELECT COUNT(*) AS n FROM config_index_runs")
        assert row == {"n": 3}


async def test_existing_values_hold_other_settings_equal_to_the_golden(snakelab_tables):
    """Only runs whose other 25 columns (seed included) equal the golden's count, any status."""
    dbs = snakelab_tables
    insert_runs(dbs, with_values({"model.hidden_size": 64}), status="cancelled")
    insert_runs(dbs, with_values({"model.hidden_size": 96}), status="queued")
    insert_runs(dbs, with_values({"model.hidden_size": 128, "seed": 1971}))
    insert_runs(dbs, with_values({"model.hidden_size": 144, "training.gamma": 0.97}))
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        values = await index.existing_values(registry.entry("hidden_size"), DEFAULT)
        assert values == {(Fraction(64),), (Fraction(96),)}
        pair = registry.entry("epsilon_pair")
        insert_runs(dbs, with_values({"epsilon.initial": 0.9, "epsilon.decay": 0.95}))
        assert await index.existing_values(pair, DEFAULT) == {(Fraction(9, 10), Fraction(95, 100))}


async def test_exhaustion_needs_every_legal_choice_with_the_current_seed(snakelab_tables):
    """A finite domain is exhausted only when every choice ran on the golden's seed."""
    dbs = snakelab_tables
    item = registry.entry("sequence_length")
    choices = [4 * k for k in range(1, 13)]
    insert_runs(dbs, *[with_values({"training.sequence_length": v}) for v in choices[:-1]])
    insert_runs(dbs, with_values({"training.sequence_length": choices[-1], "seed": 1969}))
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert not await index.is_exhausted(item, DEFAULT)
        insert_runs(dbs, with_values({"training.sequence_length": choices[-1]}), status="failed")
        assert await index.is_exhausted(item, DEFAULT)
        assert not await index.is_exhausted(item, with_values({"seed": 1969}))
        gamma = registry.entry("gamma")
        assert not await index.is_exhausted(gamma, DEFAULT)


async def test_reward_pair_exhaustion_covers_all_49_pairs(snakelab_tables):
    """The reward pair is exhausted once all 7 x 7 combinations exist."""
    dbs = snakelab_tables
    item = registry.entry("reward_pair")
    combos = [(a, b) for a in range(7) for b in range(-6, 1)]
    configs = [
        with_values({"game.rewards.closer_to_food": a, "game.rewards.further_from_food": b})
        for a, b in combos
    ]
    insert_runs(dbs, *configs[1:])
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert not await index.is_exhausted(item, DEFAULT)
        insert_runs(dbs, configs[0])
        assert await index.is_exhausted(item, DEFAULT)


async def test_concurrent_refreshes_index_each_run_once(snakelab_tables):
    """Two processes refreshing at once (broker and orchestrator) never double-index."""
    dbs = snakelab_tables
    insert_runs(
        dbs, *[with_values({"training.learning_rate": 0.001 + i * 1e-5}) for i in range(60)]
    )
    async with Database(dbs.settings()) as one, Database(dbs.settings()) as two:
        counts = await asyncio.gather(
            ConfigIndex(one, SCHEMA, batch_size=7).refresh(),
            ConfigIndex(two, SCHEMA, batch_size=5).refresh(),
        )
        assert sum(counts) == 60
        row = await one.fetchone("SELECT COUNT(*) AS n FROM config_index_contexts")
        assert row == {"n": 60 * len(registry.ENTRIES)}


@pytest.mark.parametrize("value", [True, "64", None])
async def test_fingerprint_refuses_non_numbers(value):
    """A config holding a boolean, string or null cannot be fingerprinted (never equal)."""
    index = ConfigIndex(None, SCHEMA)  # type: ignore[arg-type]
    config = with_values({"model.hidden_size": 64})
    config["model"]["hidden_size"] = value
    with pytest.raises((TypeError, ValueError)):
        index.fingerprint(config)


async def test_key_collisions_never_change_an_answer(snakelab_tables, monkeypatch):
    """Even if every key collided, rows are compared column by column: answers stay exact."""
    from ax3l.shared.db import config_index

    monkeypatch.setattr(config_index, "_key", lambda texts, names: 7)
    dbs = snakelab_tables
    (wanted,) = insert_runs(dbs, with_values({"model.hidden_size": 112}))
    insert_runs(
        dbs,
        with_values({"model.hidden_size": 128}),
        with_values({"model.hidden_size": 112, "seed": 1}),
        with_values({"training.gamma": 0.99}),
    )
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert await index.find_runs(with_values({"model.hidden_size": 112})) == [wanted]
        values = await index.existing_values(registry.entry("hidden_size"), DEFAULT)
        assert values == {(Fraction(112),), (Fraction(128),)}
