"""``ax3l-db backup`` and ``restore`` (``ax3l.shared.db.backup``) on real databases, with the
real ``mariadb-dump`` and ``mariadb``: a round trip into databases of other names, the admin
login only through an option file, and every refusal leaving the databases as they were. The
loop resuming from a restored backup: services/orchestrator/tests/test_backup_restore.py."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ax3l.shared.db import backup as backups
from ax3l.shared.ports import free_port
from ax3l.testing.databases import (
    ADMIN_KEYS,
    TestDatabases,
    admin_connection,
    compare_environment,
    create_snakelab_tables,
    mysql_connection,
    run_module,
    scratch_databases,
)

EVENT = (
    "INSERT INTO events (occurred_at, name, category, log_level, process_id)"
    " VALUES (NOW(6), %s, 'Configuration', 'INFO', 'p-1')"
)
# Quotes, a backslash, a newline and an option file's comment sign: all part of the text.
AWKWARD = 'it\'s "odd" \\ # ; é\nend'


def ax3l_db(
    databases: TestDatabases, db_env: dict[str, str], *args: str, admin: bool = True
) -> subprocess.CompletedProcess[str]:
    env = compare_environment(databases, db_env if admin else None)
    env["AX3L_ORCHESTRATOR_PORT"] = str(free_port())  # no orchestrator of another stack
    env["AX3L_RUN_DIR"] = os.environ["AX3L_RUN_DIR"]  # the test's own (run_dir)
    env["MYSQL_PWD"] = "not-the-password"  # never read: the option file speaks
    return run_module("ax3l.shared.db.cli", *args, env=env)


def settings(databases: TestDatabases, db_env: dict[str, str]) -> backups.BackupSettings:
    """The commands' settings on ``databases``, in-process (no orchestrator port answering)."""
    return backups.BackupSettings(
        **databases.settings().model_dump(by_alias=False),
        AX3L_DB_ADMIN_USER=db_env["AX3L_DB_ADMIN_USER"],
        AX3L_DB_ADMIN_PASSWORD=SecretStr(db_env["AX3L_DB_ADMIN_PASSWORD"]),
        AX3L_ORCHESTRATOR_PORT=free_port(),
    )


@pytest.fixture(autouse=True)
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run directory of the test's own: a make run of the checkout's is none of its business."""
    folder = tmp_path / "run"
    monkeypatch.setenv("AX3L_RUN_DIR", str(folder))
    return folder


@pytest.fixture
def history(snakelab_tables: TestDatabases) -> TestDatabases:
    """Three events, one with awkward text, and a SnakeLab run."""
    for name in ("first", AWKWARD, "third"):
        snakelab_tables.query(EVENT, (name,))
    snakelab_tables.query(
        "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
        " created_at) VALUES ('r-1', 'v1', REPEAT('a', 64), 'completed', NOW(6))",
        user="snakelab",
    )
    return snakelab_tables


@pytest.fixture
def fresh(db_env: dict[str, str]) -> Iterator[TestDatabases]:
    with scratch_databases(db_env, prefix="rb") as dbs:
        yield dbs


def snapshot(databases: TestDatabases) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "events": databases.query("SELECT event_id, name, process_id FROM events ORDER BY 1"),
        "runs": databases.query(
            "SELECT run_id, status FROM simulation_runs ORDER BY 1",
            database=databases.snakelab_db,
        ),
    }


def staging_left(databases: TestDatabases) -> list[tuple[Any, ...]]:
    return databases.query("SHOW DATABASES LIKE 'ax3l\\_restore\\_%'")


def test_a_backup_restores_into_databases_of_other_names(
    history: TestDatabases,
    fresh: TestDatabases,
    db_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both databases round-trip, rows and text exact, into another pair whose logins can use
    them at once; the backup is private and has no password; a second restore needs
    --replace, and with it the databases are the backup's again. Without the admin login the
    command names the settings; an existing non-empty directory is never written into."""
    saved = tmp_path / "backup"
    done = ax3l_db(history, db_env, "backup", str(saved))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["databases"] == {"ax3l": history.ax3l_db, "snakelab": history.snakelab_db}
    assert manifest["schema_revision"] and manifest["dump"]["bytes"] > 0
    assert saved.stat().st_mode & 0o077 == 0 and (saved / "dump.sql").stat().st_mode & 0o077 == 0
    text = (saved / "dump.sql").read_text()
    assert db_env["AX3L_DB_ADMIN_PASSWORD"] not in text and db_env["DB_PASSWORD"] not in text
    assert not list(tmp_path.glob(".backup.partial-*"))

    # The restore command in-process (an interpreter start less), its settings from the
    # environment as in a shell.
    for key, value in {**fresh.env(), **{key: db_env[key] for key in ADMIN_KEYS}}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AX3L_ORCHESTRATOR_PORT", str(free_port()))
    assert backups.restore_command(saved, replace=False) == 0
    assert "3 events, 1 SnakeLab runs" in capsys.readouterr().out
    assert snapshot(fresh) == snapshot(history)
    assert fresh.query("SELECT name FROM events WHERE event_id = 2", user="ax3l") == [(AWKWARD,)]
    assert fresh.query("SELECT run_id FROM simulation_runs", user="snakelab") == [("r-1",)]

    fresh.query(EVENT, ("after the restore",))
    with pytest.raises(backups.BackupError, match="--replace") as refused:
        backups.restore(settings(fresh, db_env), saved)
    assert "events" in str(refused.value) and len(snapshot(fresh)["events"]) == 4
    replaced = backups.restore(settings(fresh, db_env), saved, replace=True)
    assert replaced.replaced and replaced.events == 3 and replaced.runs == 1
    assert snapshot(fresh) == snapshot(history)
    assert not staging_left(fresh)

    without_admin = settings(history, db_env).model_copy(update={"admin_user": None})
    with pytest.raises(backups.BackupError, match="AX3L_DB_ADMIN_USER"):
        backups.backup(without_admin, tmp_path / "b")
    assert not (tmp_path / "b").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    with pytest.raises(backups.BackupError, match="exists"):
        backups.backup(settings(history, db_env), tmp_path / "full")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["mine.txt"]


def test_restore_refuses_a_running_stack_and_damaged_backups(
    history: TestDatabases,
    fresh: TestDatabases,
    db_env: dict[str, str],
    tmp_path: Path,
    run_dir: Path,
) -> None:
    """A service's open connection to a target database, or make run's supervisor holding its
    lock, refuses the restore (naming it); a
    dump that does not match its manifest is refused; a dump the server refuses halfway
    leaves no staging database; nothing is written in any case."""
    saved = tmp_path / "backup"
    backups.backup(settings(history, db_env), saved)
    create_snakelab_tables(fresh)
    before = snapshot(fresh)
    target = settings(fresh, db_env)

    service = mysql_connection(
        fresh.host, fresh.port, fresh.snakelab_user, fresh.snakelab_password, fresh.snakelab_db
    )
    try:
        with pytest.raises(backups.BackupError, match="the stack is running") as refused:
            backups.restore(target, saved)
    finally:
        service.close()
    assert f"of {fresh.snakelab_user} to database {fresh.snakelab_db}" in str(refused.value)
    assert snapshot(fresh) == before
    # make run's supervisor, its services backing off: its lock is enough.
    (run_dir / "stack").mkdir(parents=True)
    with (run_dir / "stack" / "supervisor.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(backups.BackupError, match="make run's supervisor holds"):
            backups.restore(target, saved)
    assert snapshot(fresh) == before

    dump = saved / "dump.sql"
    dump.write_text(dump.read_text().replace("'third'", "'THIRD'"))
    with pytest.raises(backups.BackupError, match="SHA-256"):
        backups.restore(target, saved)
    dump.write_text(dump.read_text()[:-1000])
    with pytest.raises(backups.BackupError, match="damaged backup"):
        backups.restore(target, saved)
    assert snapshot(fresh) == before and not staging_left(fresh)
    with pytest.raises(backups.BackupError, match="not an Ax3l backup"):
        backups.restore(target, tmp_path)

    # A dump the server refuses halfway (its manifest rewritten to match) is rolled back.
    fresh.query(EVENT, ("kept",))
    before = snapshot(fresh)
    dump.unlink()
    (saved / "manifest.json").unlink()
    backups.backup(settings(history, db_env), saved)
    dump.write_text(dump.read_text() + "INSERT INTO `no_such_table` VALUES (1);\n")
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["dump"].update(bytes=dump.stat().st_size, sha256=backups.sha256_of(dump))
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(backups.BackupError, match="no_such_table"):
        backups.restore(target, saved, replace=True)
    assert snapshot(fresh) == before and not staging_left(fresh)


def test_the_option_file_carries_any_password(db_env: dict[str, str]) -> None:
    """A password with quotes, a backslash, '#' and a newline reaches the client intact through
    the option file, which is mode 0600 and gone afterwards."""
    user = f"bk_{secrets.token_hex(4)}"
    admin = admin_connection(db_env)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (AWKWARD,))
        login = backups.BackupSettings(
            DB_HOST=db_env["DB_HOST"],
            DB_PORT=int(db_env["DB_PORT"]),
            AX3L_DB_ADMIN_USER=user,
            AX3L_DB_ADMIN_PASSWORD=SecretStr(AWKWARD),
        )
        with backups.option_file(login) as options:
            assert options.stat().st_mode & 0o777 == 0o600
            done = subprocess.run(
                ["mariadb", f"--defaults-file={options}", "-N", "-e", "SELECT CURRENT_USER()"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{user}@%"
        assert not options.exists() and not options.parent.exists()
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


def tamper(saved: Path, database: str, text: str) -> None:
    """Put ``text`` into the dump right after the ``USE`` of ``database``, drop the line by
    which a new ``mariadb-dump`` asks the client for its sandbox mode, and set the manifest's
    size and SHA-256 to match, as whoever could write a backup could."""
    dump = saved / "dump.sql"
    use = f"USE `{database}`;\n"
    lines = dump.read_text().replace(use, use + text, 1).splitlines(keepends=True)
    dump.write_text("".join(line for line in lines if "enable the sandbox mode" not in line))
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["dump"].update(bytes=dump.stat().st_size, sha256=backups.sha256_of(dump))
    (saved / "manifest.json").write_text(json.dumps(manifest))


def test_a_tampered_backup_runs_no_command_and_no_statement_beyond_its_tables(
    history: TestDatabases, fresh: TestDatabases, db_env: dict[str, str], tmp_path: Path
) -> None:
    """M4: a backup whose dump was given a shell command (``\\!``, ``system``), another
    database (``use mysql``, ``\\u``), a grant, a new user or a trigger running as root, its
    manifest made to match, is refused before anything is loaded: no command runs, no user,
    grant, table or trigger appears, the target databases stay as they were and no staging
    database is left. The same backup untampered restores."""
    create_snakelab_tables(fresh)
    before = snapshot(fresh)
    mark = f"pwn{secrets.token_hex(4)}"
    ran = tmp_path / "ran"
    trigger = (
        f"/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER {mark}"
        " BEFORE INSERT ON events FOR EACH ROW SET NEW.name = NEW.name */;\n"
    )
    attacks = {
        "shell": f"\\! touch {ran}\n",
        "system": f"system touch {ran}\n",
        "use": f"use mysql;\nCREATE TABLE {mark} (i INT);\n",
        "client use": f"\\u mysql\nCREATE TABLE {mark} (i INT);\n",
        "grant": f"GRANT ALL ON *.* TO '{mark}'@'%' IDENTIFIED BY 'x';\n",
        "create user": f"CREATE USER '{mark}'@'%' IDENTIFIED BY 'x';\n",
        "definer": trigger,
        "versioned": f"/*!40000 GRANT ALL ON *.* TO '{mark}'@'%' IDENTIFIED BY 'x' */;\n",
    }
    admin = admin_connection(db_env)
    try:
        for name, text in attacks.items():
            saved = tmp_path / name.replace(" ", "-")
            backups.backup(settings(history, db_env), saved)
            tamper(saved, history.ax3l_db, text)
            with pytest.raises(backups.BackupError, match="refused") as refused:
                backups.restore(settings(fresh, db_env), saved, replace=True)
            assert "restore only backups you made" in str(refused.value), name
            assert not ran.exists(), name
            with admin.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (mark,))
                assert cur.fetchone() == (0,), name
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = %s", (mark,)
                )
                assert cur.fetchone() == (0,), name
                cur.execute("SELECT COUNT(*) FROM information_schema.triggers")
                assert cur.fetchone() == (0,), name
            assert snapshot(fresh) == before and not staging_left(fresh), name
        clean = tmp_path / "clean"
        backups.backup(settings(history, db_env), clean)
        backups.restore(settings(fresh, db_env), clean, replace=True)
        assert snapshot(fresh) == snapshot(history)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{mark}'@'%'")
            cur.execute(f"DROP TABLE IF EXISTS mysql.{mark}")
            cur.execute(f"DROP TRIGGER IF EXISTS `{fresh.ax3l_db}`.{mark}")
        admin.close()


def test_a_client_without_a_sandbox_mode_is_refused(
    history: TestDatabases,
    fresh: TestDatabases,
    db_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """M4: a ``mariadb`` client that knows neither ``--sandbox`` nor ``--commands=OFF`` (an old
    one) does not load a backup at all: the restore says why and leaves everything as it was."""
    saved = tmp_path / "backup"
    backups.backup(settings(history, db_env), saved)
    create_snakelab_tables(fresh)
    before = snapshot(fresh)
    old = tmp_path / "bin"
    old.mkdir()
    client = old / "mariadb"
    client.write_text(
        "#!/bin/sh\nfor a; do case $a in --sandbox|--commands=*)"
        ' echo "unknown option \'$a\'" >&2; exit 7;; esac; done\nexec /usr/bin/mariadb "$@"\n'
    )
    client.chmod(0o755)
    monkeypatch.setenv("PATH", f"{old}:{os.environ['PATH']}")
    with pytest.raises(backups.BackupError, match="has no sandbox mode"):
        backups.restore(settings(fresh, db_env), saved, replace=True)
    assert snapshot(fresh) == before and not staging_left(fresh)
