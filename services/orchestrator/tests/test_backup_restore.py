"""``ax3l-db backup`` while the loop runs, ``ax3l-db restore`` into a fresh database pair, and
the loop resuming there from the restored history; a restore refused while that stack runs.
(The commands' own checks, quickly, are in shared/tests/test_backup.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from orchestrator_stack import compared

from ax3l.shared.ports import free_port
from ax3l.testing.databases import (
    TestDatabases,
    compare_environment,
    run_module,
    scratch_databases,
)
from ax3l.testing.stack import Stack, check_history


def ax3l_db(
    databases: TestDatabases, db_env: dict[str, str], *args: str, orchestrator_port: int
) -> subprocess.CompletedProcess[str]:
    """``ax3l-db`` on ``databases`` with the admin login, as a user would run it."""
    env = compare_environment(databases, db_env)
    env["AX3L_ORCHESTRATOR_PORT"] = str(orchestrator_port)
    env["AX3L_RUN_DIR"] = "/nonexistent"  # not the checkout's make run: no supervisor lock
    return run_module("ax3l.shared.db.cli", *args, env=env)


@pytest.mark.long  # about 30 s: two stacks, a seeding and five turns
def test_a_backup_taken_while_the_loop_runs_restores_into_a_fresh_pair_and_the_loop_resumes(
    stack: Stack, db_env: dict[str, str], tmp_path: Path
) -> None:
    """The backup, taken mid-loop, is one consistent snapshot of both databases; restored into
    another database pair it holds the same events and runs; an orchestrator there goes on from
    the restored golden (no second seeding, every history invariant kept); restoring again
    while that stack runs is refused and changes nothing."""
    stack.start()
    proc = stack.orchestrator()
    stack.wait_for(compared(stack, 2), 60, "two turns", proc)
    saved = tmp_path / "backup"
    done = ax3l_db(stack.databases, db_env, "backup", str(saved), orchestrator_port=free_port())
    assert done.returncode == 0, done.stderr
    assert "Backed up databases" in done.stdout
    stack.wait_for(compared(stack, 3), 60, "a turn after the backup", proc)
    proc.stop()
    assert sorted(p.name for p in saved.iterdir()) == ["dump.sql", "manifest.json"]
    assert stack.databases.admin_password not in (saved / "dump.sql").read_text()
    assert (saved / "dump.sql").stat().st_mode & 0o077 == 0

    with scratch_databases(db_env, prefix="rs") as fresh:
        restored_stack = Stack(fresh, tmp_path / "restored")
        (tmp_path / "restored").mkdir()
        try:
            done = ax3l_db(fresh, db_env, "restore", str(saved), orchestrator_port=free_port())
            assert done.returncode == 0, done.stderr
            restored = restored_stack.events()
            assert restored, done.stdout
            assert f"{len(restored)} events" in done.stdout
            # The snapshot is a prefix of the source's history: the same rows, nothing torn.
            source = {event.event_id: event for event in stack.events()}
            assert all(source[event.event_id] == event for event in restored)
            assert [r["run_id"] for r in restored_stack.runs()] == [
                r["run_id"] for r in stack.runs()[: len(restored_stack.runs())]
            ]
            seeding = [e for e in restored if e.source_name == "InitialSeeding"]
            golden = restored_stack.events("golden_config_created")[0]

            restored_stack.start()
            resumed = restored_stack.orchestrator()
            before = restored_stack.count("configuration_compared")
            restored_stack.wait_for(
                compared(restored_stack, before + 2), 60, "two turns after", resumed
            )
            again = ax3l_db(
                fresh,
                db_env,
                "restore",
                "--replace",
                str(saved),
                orchestrator_port=restored_stack.api_port,
            )
            assert again.returncode == 1 and "the stack is running" in again.stderr
            assert "the orchestrator answers" in again.stderr
            assert f"to database {fresh.ax3l_db}" in again.stderr, again.stderr
            resumed.stop()

            summary = check_history(restored_stack)
            events = restored_stack.events()
            assert [e for e in events if e.source_name == "InitialSeeding"] == seeding
            assert summary.goldens[0] == golden
            assert len(events) > len(restored)
            assert events[: len(restored)] == restored
        finally:
            restored_stack.close()
