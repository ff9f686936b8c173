"""The Snake game a SnakeLab run plays, and the egocentric observation its network sees.

Coordinates follow the contract's snapshots: ``x`` grows to the right, ``y`` grows downwards,
so facing ``(1, 0)`` the snake's right-hand side is ``(0, 1)``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from snakelab.trainers.base import Outcome

# Clockwise on a y-down board, so turning right is index + 1 and turning left index - 1.
DIRECTIONS: tuple[tuple[int, int], ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
LEFT, STRAIGHT, RIGHT = 0, 1, 2
ACTION_COUNT = 3

OBSERVATION_RADIUS = 3
_SIDE = 2 * OBSERVATION_RADIUS + 1
GRID_CELLS = _SIDE * _SIDE
OBSERVATION_SIZE = GRID_CELLS + 2
_CENTRE = GRID_CELLS // 2

CELL_EMPTY = 0.0
CELL_OFF_BOARD = -0.5
CELL_BODY = 0.5
CELL_FOOD = 1.0

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Rewards:
    """Reward of each kind of move, taken from the run's ``game.rewards``."""

    food: float
    wall: float
    snake: float
    max_moves: float
    empty: float
    closer_to_food: float
    further_from_food: float

    @classmethod
    def from_config(cls, rewards: dict[str, Any]) -> Rewards:
        """Read the seven reward values of a SnakeLab config's ``game.rewards``."""
        return cls(**{name: float(rewards[name]) for name in cls.__dataclass_fields__})


class StepResult(NamedTuple):
    """What one move did."""

    reward: float
    done: bool
    outcome: Outcome


class SnakeGame:
    """One episode of Snake with relative actions (left, straight, right).

    The observation is a 7x7 window around the head turned so the snake always faces up:
    row 0 is three cells ahead, row 6 three cells behind, column 0 three cells to the left.
    Its two last values are the signs of the food's offset to the right and ahead.
    """

    def __init__(
        self,
        *,
        width: int,
        height: int,
        initial_length: int,
        max_moves_multiplier: int,
        rewards: Rewards,
        food_rng: np.random.Generator,
    ) -> None:
        if initial_length < 1 or initial_length > width or initial_length >= width * height:
            raise ValueError("the initial snake must fit on one row and leave room for food")
        self.width = width
        self.height = height
        self.max_moves_multiplier = max_moves_multiplier
        self.rewards = rewards
        self._food_rng = food_rng
        self.score = 0
        self.moves = 0
        self.direction = 0

        self._occupied = np.zeros(width * height, dtype=np.bool_)
        pad = OBSERVATION_RADIUS
        self._padded_width = width + 2 * pad
        # Cell values with an off-board margin, so the observation is one gather, never a
        # bounds check per cell.
        self._padded = np.full(
            (height + 2 * pad) * self._padded_width, CELL_OFF_BOARD, dtype=np.float32
        )
        for y in range(height):
            row = (y + pad) * self._padded_width + pad
            self._padded[row : row + width] = CELL_EMPTY
        self._gather = _gather_indices(width, height)

        head_x = max(width // 2, initial_length - 1)
        head_y = height // 2
        self.head_x, self.head_y = head_x, head_y
        # Cells as y * width + x, head first.
        self._snake: deque[int] = deque()
        for offset in range(initial_length):
            cell = head_y * width + head_x - offset
            self._snake.append(cell)
            self._mark(cell, CELL_BODY)
        self.food: tuple[int, int] | None = None
        self._food_cell = -1
        self._spawn_food()

    @property
    def length(self) -> int:
        """Cells the snake occupies, head included."""
        return len(self._snake)

    @property
    def snake(self) -> list[tuple[int, int]]:
        """The snake's cells as ``(x, y)``, head first."""
        return [(cell % self.width, cell // self.width) for cell in self._snake]

    def _mark(self, cell: int, value: float) -> None:
        self._occupied[cell] = value == CELL_BODY
        pad = OBSERVATION_RADIUS
        self._padded[(cell // self.width + pad) * self._padded_width + cell % self.width + pad] = (
            value
        )

    def _spawn_food(self) -> None:
        free = np.flatnonzero(~self._occupied)
        if free.size == 0:
            self.food = None
            self._food_cell = -1
            return
        cell = int(free[self._food_rng.integers(free.size)])
        self._food_cell = cell
        self.food = (cell % self.width, cell // self.width)
        self._mark(cell, CELL_FOOD)

    def place_food(self, x: int, y: int) -> None:
        """Move the food to a free cell (for scripted scenarios; training never calls it)."""
        cell = y * self.width + x
        if not (0 <= x < self.width and 0 <= y < self.height) or self._occupied[cell]:
            raise ValueError(f"({x}, {y}) is not a free cell")
        if self._food_cell >= 0:
            self._mark(self._food_cell, CELL_EMPTY)
        self._food_cell = cell
        self.food = (x, y)
        self._mark(cell, CELL_FOOD)

    def observation(self) -> FloatArray:
        """The 51 floats the network sees for the current board."""
        obs = np.empty(OBSERVATION_SIZE, dtype=np.float32)
        np.take(
            self._padded,
            self._gather[self.direction, self.head_y * self.width + self.head_x],
            out=obs[:GRID_CELLS],
        )
        obs[_CENTRE] = CELL_EMPTY
        if self.food is None:
            obs[GRID_CELLS] = obs[GRID_CELLS + 1] = 0.0
        else:
            forward_x, forward_y = DIRECTIONS[self.direction]
            offset_x = self.food[0] - self.head_x
            offset_y = self.food[1] - self.head_y
            obs[GRID_CELLS] = _sign(-forward_y * offset_x + forward_x * offset_y)
            obs[GRID_CELLS + 1] = _sign(forward_x * offset_x + forward_y * offset_y)
        return obs

    def step(self, action: int) -> StepResult:
        """Turn by ``action`` (0 left, 1 straight, 2 right) and move one cell."""
        rewards = self.rewards
        self.moves += 1
        direction = (self.direction + action - 1) & 3
        # A timed-out or dead snake stays where it was; only the move counter advances.
        if self.moves > self.max_moves_multiplier * len(self._snake):
            return StepResult(rewards.max_moves, True, "max_moves")
        step_x, step_y = DIRECTIONS[direction]
        new_x = self.head_x + step_x
        new_y = self.head_y + step_y
        if not (0 <= new_x < self.width and 0 <= new_y < self.height):
            return StepResult(rewards.wall, True, "wall")
        cell = new_y * self.width + new_x
        ate = cell == self._food_cell
        # The tail moves away in the same move unless the snake grows.
        if self._occupied[cell] and (ate or cell != self._snake[-1]):
            return StepResult(rewards.snake, True, "snake")

        self.direction = direction
        old_x, old_y = self.head_x, self.head_y
        self.head_x, self.head_y = new_x, new_y
        if ate:
            self._snake.appendleft(cell)
            self._mark(cell, CELL_BODY)
            self.score += 1
            self._spawn_food()
            if self.food is None:
                return StepResult(rewards.food, True, "board_filled")
            return StepResult(rewards.food, False, "food")

        self._mark(self._snake.pop(), CELL_EMPTY)
        self._snake.appendleft(cell)
        self._mark(cell, CELL_BODY)
        assert self.food is not None
        food_x, food_y = self.food
        before = abs(old_x - food_x) + abs(old_y - food_y)
        after = abs(new_x - food_x) + abs(new_y - food_y)
        shaping = rewards.closer_to_food if after < before else rewards.further_from_food
        return StepResult(rewards.empty + shaping, False, "empty")

    def board(self) -> dict[str, Any]:
        """The board in the contract's snapshot form (``board`` of the snapshot JSON)."""
        cells = self.snake
        return {
            "grid_size": [self.width, self.height],
            "snake_head": list(cells[0]),
            "snake_body": [list(cell) for cell in cells[1:]],
            "food": list(self.food) if self.food is not None else None,
            "direction": list(DIRECTIONS[self.direction]),
            "score": self.score,
        }


def _sign(value: int) -> float:
    return float((value > 0) - (value < 0))


_GATHER_CACHE: dict[tuple[int, int], npt.NDArray[np.intp]] = {}


def _gather_indices(width: int, height: int) -> npt.NDArray[np.intp]:
    """Indices into the padded board of each observation cell, per direction and head cell."""
    key = (width, height)
    cached = _GATHER_CACHE.get(key)
    if cached is not None:
        return cached
    pad = OBSERVATION_RADIUS
    padded_width = width + 2 * pad
    local = np.arange(-pad, pad + 1)
    ahead = -local[:, None]  # row 0 is the farthest cell ahead
    rightward = local[None, :]  # column 0 is the farthest cell to the left
    heads = np.arange(width * height)
    head_index = (heads // width + pad) * padded_width + heads % width + pad
    table = np.empty((len(DIRECTIONS), width * height, GRID_CELLS), dtype=np.intp)
    for index, (forward_x, forward_y) in enumerate(DIRECTIONS):
        right_x, right_y = -forward_y, forward_x
        offset_x = ahead * forward_x + rightward * right_x
        offset_y = ahead * forward_y + rightward * right_y
        offsets = (offset_y * padded_width + offset_x).ravel()
        table[index] = head_index[:, None] + offsets[None, :]
    _GATHER_CACHE[key] = table
    return table
