"""Reading the best game's board from SnakeLab's snapshot JSON."""

from __future__ import annotations

import pytest
from reports_history import snapshot

from ax3l.reports.board import SnapshotUnreadable, read_board


def test_board_from_a_contract_snapshot():
    """Grid, head, body, food, direction and score come from the documented fields."""
    board = read_board(
        {
            "version": 1,
            "episode": 812,
            "step": 933,
            "board": {
                "grid_size": [20, 20],
                "snake_head": [5, 4],
                "snake_body": [[4, 4], [3, 4]],
                "food": [10, 2],
                "direction": [1, 0],
                "score": 41,
            },
        }
    )
    assert (board.width, board.height, board.head, board.body) == (20, 20, (5, 4), ((4, 4), (3, 4)))
    assert (board.food, board.direction, board.score, board.episode, board.step) == (
        (10, 2),
        (1, 0),
        41,
        812,
        933,
    )
    assert board.length == 3 and 8 <= board.cell <= 24


def test_head_repeated_as_first_body_cell_is_drawn_once():
    """Writers that list the head in the body too do not get a doubled head."""
    board = read_board(
        {"board": {"grid_size": [4, 4], "snake_head": [1, 1], "snake_body": [[1, 1], [0, 1]]}}
    )
    assert board.body == ((0, 1),) and board.food is None


def test_generated_snapshots_fit_the_board():
    """The test fixtures' coiled snakes are valid boards of length score + 3."""
    for score in (0, 7, 58, 200):
        board = read_board(snapshot(score))
        assert board.length == score + 3


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "not a dict",
        {"board": None},
        {"board": {"grid_size": [20], "snake_head": [0, 0]}},
        {"board": {"grid_size": [0, 20], "snake_head": [0, 0]}},
        {"board": {"grid_size": [9999, 20], "snake_head": [0, 0]}},
        {"board": {"grid_size": [20, 20], "snake_head": [20, 0]}},
        {"board": {"grid_size": [20, 20], "snake_head": ["<script>", 0]}},
        {"board": {"grid_size": [20, 20], "snake_head": [1.5, 0]}},
        {"board": {"grid_size": [20, 20], "snake_head": [True, 0]}},
        {"board": {"grid_size": [20, 20], "snake_head": [0, 0], "snake_body": "x"}},
        {"board": {"grid_size": [20, 20], "snake_head": [0, 0], "food": [-1, 3]}},
    ],
)
def test_malformed_snapshots_are_refused(bad):
    """Anything but in-grid integers is refused, so nothing unchecked reaches the SVG."""
    with pytest.raises(SnapshotUnreadable):
        read_board(bad)


def test_diagonal_direction_is_ignored():
    """A direction that is not a unit step is dropped rather than drawn wrongly."""
    board = read_board({"board": {"grid_size": [5, 5], "snake_head": [2, 2], "direction": [1, 1]}})
    assert board.direction is None
