"""Helpers of the orchestrator suite's stack tests (imported by bare name through pytest's
``pythonpath``): orchestrators run until a condition, the conditions, events and status they
wait on, SnakeLab's rows rewritten as an outage leaves them, and the scripted model's replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ax3l.testing.invariants import Ev
from ax3l.testing.stack import Proc, Stack, http_json


def compared(stack: Stack, count: int = 1) -> Callable[[], bool]:
    """The condition: at least ``count`` steps compared (``configuration_compared`` events)."""
    return lambda: stack.count("configuration_compared") >= count


def run_until(
    stack: Stack,
    condition: Callable[[], Any],
    what: str,
    proposer: str | None = "random",
    timeout: float = 60.0,
    **kwargs: Any,
) -> None:
    """Start an orchestrator (``Stack.orchestrator``'s arguments), wait for ``condition``
    (failing with its log at the deadline or when it exits), then stop it."""
    proc = stack.orchestrator(proposer, **kwargs)
    stack.wait_for(condition, timeout, what, proc)
    proc.stop()


def retries(stack: Stack) -> list[Ev]:
    """The ``simulation_submitted`` events of infrastructure retries."""
    return [e for e in stack.events("simulation_submitted") if e.get("reason") == "retry"]


def set_run(stack: Stack, run_id: str, **columns: Any) -> None:
    """Overwrite columns of a run's row in SnakeLab's table (``episodes=False`` drops them)."""
    episodes = columns.pop("episodes", True)
    sl = stack.databases.snakelab_db
    with stack._cursor() as cur:
        sets = ", ".join(f"{name} = %s" for name in columns)
        cur.execute(
            f"UPDATE `{sl}`.simulation_runs SET {sets} WHERE run_id = %s",
            (*columns.values(), run_id),
        )
        if not episodes:
            cur.execute(f"DELETE FROM `{sl}`.simulation_episodes WHERE run_id = %s", (run_id,))


def new_run_compared(stack: Stack) -> tuple[Proc, dict[str, Any]]:
    """Start an orchestrator and wait until the first run it submits is compared; the
    orchestrator (still running) and that run's row."""
    before = len(stack.runs())
    proc = stack.orchestrator("random")
    stack.wait_for(lambda: len(stack.runs()) > before, 60, "a new run", proc)
    run = stack.runs()[before]

    def compared_run() -> bool:
        return run["run_id"] in {e.process_id for e in stack.events("configuration_compared")}

    stack.wait_for(compared_run, 60, "the new run compared", proc)
    return proc, run


def killed_while_waiting(stack: Stack, **env: str) -> tuple[Ev, str]:
    """Start the stack and an orchestrator (``env`` its settings) killed while it waits for its
    first proposal's run; that proposal's ``proposal_accepted`` and run id."""
    stack.start()
    stack.crash_at("waiting", env=env)
    (accepted,) = stack.events("proposal_accepted")
    return accepted, str(accepted.get("run_id"))


def model_call(value: object, name: str = "submit_single_value", **extra: object) -> dict[str, Any]:
    """A reply of the scripted model (``ax3l.testing.scripted_llm``): a call of ``name`` with
    ``value`` (``extra``: its delay, say)."""
    return {"tool_call": {"name": name, "arguments": {"value": value}}, **extra}


def status_or_none(stack: Stack) -> dict[str, Any] | None:
    """The status API's answer, or None while the API is not up yet."""
    try:
        return dict(http_json(f"http://127.0.0.1:{stack.api_port}/api/status"))
    except OSError:
        return None
