"""The event catalog: every event name Ax3l writes, its category and its usual level."""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    CONVERSATION = "Conversation"
    LLM = "LLM"
    TOOL = "Tool"
    SNAKELAB = "SnakeLab"
    CONFIGURATION = "Configuration"
    ALERT = "Alert"
    NOTE = "Note"


class Level(StrEnum):
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


CATALOG: dict[str, tuple[Category, Level]] = {
    "conversation_started": (Category.CONVERSATION, Level.INFO),
    "conversation_ended": (Category.CONVERSATION, Level.INFO),
    # AX3L_PIPELINE: a conversation started while a run trained is handed its turn.
    "conversation_resumed": (Category.CONVERSATION, Level.INFO),
    "prompt_sent": (Category.CONVERSATION, Level.INFO),
    "reply_received": (Category.CONVERSATION, Level.INFO),
    "llm_request_failed": (Category.LLM, Level.ERROR),
    "tool_request_received": (Category.TOOL, Level.INFO),
    "tool_execution_started": (Category.TOOL, Level.INFO),
    "tool_execution_completed": (Category.TOOL, Level.INFO),
    "tool_execution_failed": (Category.TOOL, Level.ERROR),
    # A call from a seat (an outside agent) at the Streamable HTTP endpoint, and a refused one.
    "seat_call": (Category.TOOL, Level.INFO),
    "seat_call_refused": (Category.TOOL, Level.WARNING),
    "simulation_submitted": (Category.SNAKELAB, Level.INFO),
    "simulation_queued": (Category.SNAKELAB, Level.INFO),
    "simulation_started": (Category.SNAKELAB, Level.INFO),
    "simulation_completed": (Category.SNAKELAB, Level.INFO),
    "simulation_cancelled": (Category.SNAKELAB, Level.WARNING),
    "simulation_failed": (Category.SNAKELAB, Level.ERROR),
    "simulation_restarted": (Category.SNAKELAB, Level.WARNING),
    "snakelab_host_down": (Category.SNAKELAB, Level.WARNING),
    "snakelab_host_up": (Category.SNAKELAB, Level.INFO),
    "round_robin_checkpoint": (Category.CONFIGURATION, Level.INFO),
    "proposal_accepted": (Category.CONFIGURATION, Level.INFO),
    "proposal_rejected_invalid": (Category.CONFIGURATION, Level.WARNING),
    "proposal_rejected_duplicate": (Category.CONFIGURATION, Level.WARNING),
    "parameter_space_exhausted": (Category.CONFIGURATION, Level.INFO),
    "configuration_compared": (Category.CONFIGURATION, Level.INFO),
    "golden_config_created": (Category.CONFIGURATION, Level.INFO),
    "golden_config_replaced": (Category.CONFIGURATION, Level.INFO),
    "golden_config_retained": (Category.CONFIGURATION, Level.INFO),
    "seed_rotation_started": (Category.CONFIGURATION, Level.INFO),
    "golden_config_seed_incremented": (Category.CONFIGURATION, Level.INFO),
    "promotion_confirmation_started": (Category.CONFIGURATION, Level.INFO),
    "promotion_confirmation_decided": (Category.CONFIGURATION, Level.INFO),
    # AX3L_PROMOTION=race: a round of a race (its paired differences and verdict).
    "promotion_race_round": (Category.CONFIGURATION, Level.INFO),
    # AX3L_GOLDEN=model: after a comparison, the model's recommendation and whether the golden
    # followed it.
    "model_recommendation": (Category.CONFIGURATION, Level.INFO),
    # AX3L_NOTIFY_URLS: a notification claimed once (written before it is sent), and a send
    # that did not reach every service.
    "alert_sent": (Category.ALERT, Level.INFO),
    "alert_failed": (Category.ALERT, Level.WARNING),
    # ax3l-db note / tag: a person's note on a run (a golden's: its run's), a tag put on or
    # taken off.
    "run_note_added": (Category.NOTE, Level.INFO),
    "run_tagged": (Category.NOTE, Level.INFO),
    "run_untagged": (Category.NOTE, Level.INFO),
}

CATEGORIES: dict[Category, tuple[str, ...]] = {
    category: tuple(name for name, (cat, _) in CATALOG.items() if cat is category)
    for category in Category
}


class UnknownEvent(KeyError):
    """An event name that is not in the catalog."""


def category_of(name: str) -> Category:
    try:
        return CATALOG[name][0]
    except KeyError:
        raise UnknownEvent(f"unknown event {name!r}") from None


def default_level(name: str) -> Level:
    try:
        return CATALOG[name][1]
    except KeyError:
        raise UnknownEvent(f"unknown event {name!r}") from None
