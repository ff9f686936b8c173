"""The correction prompts that travel back inside a rejected tool result.

``InvalidValue(reason)`` answers an illegal value and ``NoDupes(reason)`` a configuration that
already ran. The broker puts the text in the reply's ``prompt`` (with the class name in
``source_name``); the orchestrator sends it to the model as the next user message. The handler
never opens a conversation of its own.
"""

from __future__ import annotations

INVALID_VALUE = "InvalidValue"
NO_DUPES = "NoDupes"


def _sentence(reason: str) -> str:
    reason = " ".join(reason.split())
    if not reason:
        return ""
    return reason if reason[-1] in ".!?" else reason + "."


def invalid_value(reason: str) -> str:
    """InvalidValue(reason): the proposal broke a rule of the schema."""
    return (
        "Your proposal was not accepted because a value is not allowed: "
        f"{_sentence(reason)} "
        "Read the rules in the tool description again, pick a value that satisfies all of them "
        "and call the tool once more. Send plain JSON numbers only, no text or units."
    )


def no_dupes(reason: str) -> str:
    """NoDupes(reason): the configuration already ran (or equals the golden configuration)."""
    return (
        "Your proposal was not accepted because SnakeLab has already run exactly this "
        f"configuration: {_sentence(reason)} "
        "Every run must differ from all stored runs, so a repeat teaches nothing new. Choose a "
        "value that has not been tested with the current settings (see the history above) and "
        "call the tool once more."
    )
