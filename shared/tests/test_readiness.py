"""The one /ready shape every service answers with."""

from __future__ import annotations

from ax3l.shared.readiness import Readiness, snakelab_problem


def test_all_checks_passing_is_ready_with_a_200() -> None:
    """Every check None: status ready, every check true, no problems, code 200."""
    readiness = Readiness.of({"database": None, "snakelab": None})
    assert readiness.model_dump() == {
        "status": "ready",
        "checks": {"database": True, "snakelab": True},
        "problems": [],
    }
    assert readiness.ready and readiness.http_status == 200


def test_a_failed_check_is_not_ready_with_a_503_and_says_why() -> None:
    """A check with a reason is false and gives one "<check>: <why>" line, in check order."""
    readiness = Readiness.of({"database": "down", "snakelab": None, "loop": "stopped"})
    assert readiness.status == "not ready" and readiness.http_status == 503
    assert readiness.checks == {"database": False, "snakelab": True, "loop": False}
    assert readiness.problems == ["database: down", "loop: stopped"]


def test_a_body_read_back_is_the_same_readiness() -> None:
    """What a client parses from the JSON equals what the service sent."""
    sent = Readiness.of({"database": "waiting for the database since 12:00"})
    assert Readiness.model_validate_json(sent.model_dump_json()) == sent


async def test_a_malformed_snakelab_health_reply_is_a_problem_not_an_exception() -> None:
    """A health reply that raises something unforeseen becomes a problem line, not a 500."""

    class Garbled:
        async def health(self) -> None:
            raise KeyError("status")

    problem = await snakelab_problem(Garbled())  # type: ignore[arg-type]
    assert problem == "KeyError: unexpected health reply"
