"""``ax3l status [--watch]``: the experiment in a terminal, from the same APIs the pages read.

Three panels, drawn with rich:

* the status cards: the orchestrator's ``/api/status`` (phase, turn, proposer, seed, golden
  run and score, cycles and stagnant cycles, promotion policy, a confirmation in progress,
  SnakeLab hosts, the last error);
* the last runs, like Ray Tune's trial table: the report server's ``/api/runs`` (newest
  first: run, status, seed, score, its difference from its golden configuration of its time,
  what it tried against that golden, proposer (a seat by name) and entry, on a terminal of
  ``VALUES_WIDTH`` columns or more the nine tuned values with the changed ones in bold, why it
  was chosen, golden);
* the current conversation: the report server's ``/api/events?process=<conversation>``, its
  newest events (time, event, what it says).

Without ``--watch`` it prints them once; with it, it redraws them in place every
``--interval`` seconds until Ctrl-C (``--count N`` stops after N draws). A service that does
not answer is a line saying so, never a crash, and the next draw tries again.

Everything a model, a seat or a configuration wrote is untrusted text: it is shown as plain
text (``rich.text.Text``, never markup, so ``[red]`` stays literal), with control characters
(terminal escape sequences included) replaced by ``?`` and long values cut.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ax3l.reports.settings import ReportsSettings

TIMEOUT = 3.0
MAX_TEXT = 160
VALUES_WIDTH = 170  # terminal columns from which the last runs show their nine values
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(value: Any, limit: int = MAX_TEXT) -> Text:
    """Untrusted ``value`` as plain text: no markup, no control characters, at most ``limit``."""
    text = "" if value is None else str(value)
    text = CONTROL.sub("?", text.replace("\n", " ").replace("\t", " "))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return Text(text)


@dataclass
class Snapshot:
    """What one draw shows: the answers, and what did not answer."""

    status: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    conversation: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def fetch_json(url: str) -> Any:
    """``url``'s JSON; ``OSError`` or ``ValueError`` when it does not answer with JSON."""
    with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
        return json.loads(answer.read())


def _read(url: str, key: str | None, problems: list[str], failure: str) -> Any:
    """``url``'s JSON (its list under ``key``, dicts only), or None after noting ``failure``."""
    try:
        answer = fetch_json(url)
    except (OSError, ValueError) as exc:
        problems.append(f"{failure}: {exc}")
        return None
    if key is None:
        return answer if isinstance(answer, dict) else None
    items = answer.get(key, []) if isinstance(answer, dict) else []
    return [item for item in items if isinstance(item, dict)]


def take(orchestrator: str, reports: str, runs: int, events: int) -> Snapshot:
    """Ask the orchestrator and the report server once."""
    found = Snapshot()
    problems = found.problems
    found.status = _read(
        f"{orchestrator}/api/status",
        None,
        problems,
        f"the orchestrator ({orchestrator}) does not answer",
    )
    found.runs = (
        _read(
            f"{reports}/api/runs?limit={runs}",
            "runs",
            problems,
            f"the report server ({reports}) does not answer",
        )
        or []
    )
    conversation = (found.status or {}).get("conversation_id")
    if conversation:
        query = urllib.parse.urlencode({"process": conversation, "limit": events})
        found.conversation = (
            _read(
                f"{reports}/api/events?{query}",
                "events",
                problems,
                "the conversation's events could not be read",
            )
            or []
        )
    return found


def _cards(status: dict[str, Any]) -> Table:
    table = Table(title="Ax3l", show_header=False, expand=False)
    table.add_column(style="bold")
    table.add_column()
    turn = status.get("parameter")
    index = status.get("index")
    rows: list[tuple[str, Any]] = [
        ("phase", status.get("phase")),
        ("turn", None if turn is None else f"{turn} (entry {index})"),
        ("proposer", status.get("proposer")),
        ("seed", status.get("seed")),
        ("golden", f"{status.get('golden_high_score')} (run {status.get('golden_run_id')})"),
        (
            "cycles",
            f"{status.get('cycles')} complete, {status.get('stagnant_cycles')} stagnant"
            f" of {status.get('seed_stagnant_rounds')} before a seed rotation",
        ),
        ("promotion", status.get("promotion")),
    ]
    if status.get("confirmation"):
        rows.append(("confirming", json.dumps(status["confirmation"])))
    if status.get("snakelab_hosts"):
        hosts = status["snakelab_hosts"]
        rows.append(("SnakeLab hosts", ", ".join(f"{h}: {s}" for h, s in hosts.items())))
    if status.get("stop_reason"):
        rows.append(("stopped", status["stop_reason"]))
    if status.get("disk_full"):
        rows.append(("disk full", status["disk_full"]))
    if status.get("last_error"):
        rows.append(("last error", status["last_error"]))
    for name, value in rows:
        table.add_row(name, safe(value))
    return table


# The nine tuned values' columns of /api/runs and their short headers, in round-robin order.
VALUE_COLUMNS = {
    "model_hidden_size": "hidden",
    "training_sequence_length": "seq",
    "training_batch_size": "batch",
    "training_learning_rate": "lr",
    "training_gamma": "gamma",
    "epsilon_initial": "ε init",
    "epsilon_decay": "ε decay",
    "game_rewards_closer_to_food": "closer",
    "game_rewards_further_from_food": "further",
}


def _signed(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return ""
    return f"+{value}" if value > 0 else str(value)


def _who(run: dict[str, Any]) -> str:
    proposer = run.get("proposer") or "loop"
    return f"{proposer} ({run['seat']})" if run.get("seat") else str(proposer)


def _runs(runs: list[dict[str, Any]], with_values: bool) -> Table:
    table = Table(title="last runs")
    right = {"seed", "score", "Δ", *VALUE_COLUMNS.values()}
    for column in ("run", "status", "seed", "score", "Δ", "tried", "proposer", "entry"):
        table.add_column(column, justify="right" if column in right else "left")
    shown = VALUE_COLUMNS if with_values else {}
    for header in shown.values():
        table.add_column(header, justify="right")
    table.add_column("why")
    table.add_column("golden")
    for run in runs:
        listed = run.get("changed")
        changed: list[Any] = listed if isinstance(listed, list) else []
        values = []
        for column in shown:
            cell = safe(run.get(column), 12)
            if column in changed:
                cell.stylize("bold")
            values.append(cell)
        table.add_row(
            safe(str(run.get("run_id", ""))[:8]),
            safe(run.get("status")),
            safe(run.get("seed")),
            safe(run.get("high_score")),
            safe(_signed(run.get("score_difference"))),
            safe(run.get("changes"), 80),
            safe(_who(run), 40),
            safe(run.get("entry"), 40),
            *values,
            safe(run.get("reason"), 60),
            safe("yes" if run.get("golden") else ""),
        )
    return table


def _conversation(conversation: str | None, events: list[dict[str, Any]]) -> Table:
    title = f"conversation {conversation}" if conversation else "no conversation under way"
    table = Table(title=safe(title).plain)
    for column in ("time", "event", "says"):
        table.add_column(column)
    for event in reversed(events):  # oldest first
        table.add_row(
            safe(str(event.get("occurred_at") or "")[11:19]),
            safe(event.get("name"), 40),
            safe(event.get("summary")),
        )
    return table


def render(snapshot: Snapshot, width: int = VALUES_WIDTH) -> RenderableType:
    """The three panels, and a line for each service that did not answer; the runs' nine
    values only on a terminal ``width`` of ``VALUES_WIDTH`` or more (narrower, their columns
    would fold into nothing: what a run tried says what changed)."""
    parts: list[RenderableType] = [safe(p, 400) for p in snapshot.problems]
    if snapshot.status is not None:
        parts.append(_cards(snapshot.status))
    parts.append(_runs(snapshot.runs, width >= VALUES_WIDTH))
    conversation = (snapshot.status or {}).get("conversation_id")
    parts.append(_conversation(conversation, snapshot.conversation))
    return Group(*parts)


def default_urls() -> tuple[str, str]:
    """The orchestrator's and the report server's base URLs from the settings ``make start``
    and the services read: ``AX3L_ORCHESTRATOR_URL``, else ``AX3L_HTTP_HOST`` and
    ``AX3L_ORCHESTRATOR_PORT``; ``AX3L_HTTP_HOST`` and ``AX3L_REPORTS_PORT``."""
    settings = ReportsSettings()
    orchestrator = settings.orchestrator_status_url().removesuffix("/api/status")
    return orchestrator, settings.local_url(settings.reports_port)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    try:
        orchestrator, reports = default_urls()
    except ValidationError as exc:
        sys.exit(f"ax3l: a setting is not valid: {exc}")
    parser = argparse.ArgumentParser(prog="ax3l", description="Ax3l in a terminal")
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status", help="the status cards, last runs and conversation")
    status.add_argument("--watch", action="store_true", help="redraw in place until Ctrl-C")
    status.add_argument("--interval", type=float, default=2.0, help="seconds between draws (2)")
    status.add_argument("--count", type=int, help="with --watch: stop after this many draws")
    status.add_argument("--runs", type=int, default=10, help="last runs shown (10)")
    status.add_argument("--events", type=int, default=8, help="conversation events shown (8)")
    status.add_argument(
        "--orchestrator",
        default=orchestrator,
        help=f"its status API (here {orchestrator}: AX3L_ORCHESTRATOR_URL, else AX3L_HTTP_HOST"
        " and AX3L_ORCHESTRATOR_PORT)",
    )
    status.add_argument(
        "--reports",
        default=reports,
        help=f"the report server (here {reports}: AX3L_HTTP_HOST and AX3L_REPORTS_PORT)",
    )
    args = parser.parse_args(argv)
    if args.interval <= 0 or args.runs < 1 or args.events < 1:
        parser.error("--interval, --runs and --events must be above 0")
    if args.count is not None and args.count < 1:
        parser.error("--count must be at least 1")
    for name in ("orchestrator", "reports"):
        url = getattr(args, name)
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            parser.error(f"--{name} must be an http(s) URL, not {url!r}")
        setattr(args, name, url.rstrip("/"))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()

    def draw() -> RenderableType:
        found = take(args.orchestrator, args.reports, args.runs, args.events)
        return render(found, console.width)

    if not args.watch:
        console.print(draw())
        return 0
    draws = 1
    try:
        with Live(draw(), console=console, auto_refresh=False) as live:
            while args.count is None or draws < args.count:
                time.sleep(args.interval)
                live.update(draw(), refresh=True)
                draws += 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
