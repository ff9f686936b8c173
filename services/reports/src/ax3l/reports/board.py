"""The best game's board from SnakeLab's high-score snapshot, checked before it is drawn.

Snapshot: ``{"version": 1, "episode", "step", "board": {"grid_size": [w, h], "snake_head":
[x, y], "snake_body": [[x, y], ...], "food": [x, y] | null, "direction": [dx, dy], "score"}}``.
Only integers within the grid reach the SVG template, so a malformed snapshot can show as
"unreadable" but never inject anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_SIDE = 200


class SnapshotUnreadable(ValueError):
    """The snapshot does not have the documented shape."""


@dataclass(frozen=True)
class Board:
    width: int
    height: int
    head: tuple[int, int]
    body: tuple[tuple[int, int], ...]
    food: tuple[int, int] | None
    direction: tuple[int, int] | None
    score: int | None
    episode: int | None
    step: int | None

    @property
    def length(self) -> int:
        return 1 + len(self.body)

    @property
    def cell(self) -> int:
        """Pixels per cell: the board fits about 480 px, cells stay between 8 and 24 px."""
        return max(8, min(24, 480 // max(self.width, self.height)))


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        raise SnapshotUnreadable(f"{what} is not an integer")
    return value


def _optional_int(value: Any) -> int | None:
    return value if type(value) is int else None


def _pair(value: Any, what: str) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise SnapshotUnreadable(f"{what} is not an [x, y] pair")
    return _int(value[0], what), _int(value[1], what)


def read_board(snapshot: Any) -> Board:
    """The board of a snapshot; raises SnapshotUnreadable when it does not fit the contract."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("board"), dict):
        raise SnapshotUnreadable("no board in the snapshot")
    board = snapshot["board"]
    width, height = _pair(board.get("grid_size"), "grid_size")
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise SnapshotUnreadable(f"grid size {width}x{height} is out of range")

    def cell(value: Any, what: str) -> tuple[int, int]:
        x, y = _pair(value, what)
        if not (0 <= x < width and 0 <= y < height):
            raise SnapshotUnreadable(f"{what} ({x}, {y}) is off the board")
        return x, y

    body_value = board.get("snake_body", [])
    if not isinstance(body_value, list):
        raise SnapshotUnreadable("snake_body is not a list")
    body = tuple(cell(part, "snake_body cell") for part in body_value)
    food = None if board.get("food") is None else cell(board["food"], "food")
    direction = None
    if board.get("direction") is not None:
        dx, dy = _pair(board["direction"], "direction")
        direction = (dx, dy) if abs(dx) + abs(dy) == 1 else None
    head = cell(board.get("snake_head"), "snake_head")
    # Some writers include the head as the body's first cell; draw it once.
    if body and body[0] == head:
        body = body[1:]
    return Board(
        width=width,
        height=height,
        head=head,
        body=body,
        food=food,
        direction=direction,
        score=_optional_int(board.get("score")),
        episode=_optional_int(snapshot.get("episode")),
        step=_optional_int(snapshot.get("step")),
    )
