"""Rules of the Snake game and the observation the drqn trainer's network sees."""

from __future__ import annotations

import numpy as np
import pytest

from snakelab.trainers.snake_env import (
    CELL_BODY,
    CELL_FOOD,
    CELL_OFF_BOARD,
    DIRECTIONS,
    LEFT,
    OBSERVATION_RADIUS,
    OBSERVATION_SIZE,
    RIGHT,
    STRAIGHT,
    Rewards,
    SnakeGame,
)

DEFAULT_REWARDS = Rewards(
    food=10, wall=-10, snake=-10, max_moves=-10, empty=0, closer_to_food=2, further_from_food=-2
)


def new_game(
    *,
    width: int = 20,
    height: int = 20,
    length: int = 3,
    multiplier: int = 100,
    rewards: Rewards = DEFAULT_REWARDS,
    seed: int = 0,
) -> SnakeGame:
    return SnakeGame(
        width=width,
        height=height,
        initial_length=length,
        max_moves_multiplier=multiplier,
        rewards=rewards,
        food_rng=np.random.default_rng(seed),
    )


def cell(obs: np.ndarray, ahead: int, right: int) -> float:
    """The observation value of the cell ``ahead`` cells forward and ``right`` to the right."""
    row = OBSERVATION_RADIUS - ahead
    column = OBSERVATION_RADIUS + right
    return float(obs[row * (2 * OBSERVATION_RADIUS + 1) + column])


def grow(game: SnakeGame, foods: int) -> None:
    """Feed the snake ``foods`` times by putting food straight ahead."""
    for _ in range(foods):
        step_x, step_y = DIRECTIONS[game.direction]
        game.place_food(game.head_x + step_x, game.head_y + step_y)
        assert game.step(STRAIGHT).outcome == "food"


def test_start_position() -> None:
    """A game starts with the head at (10, 10) facing +x, the body behind it and food elsewhere."""
    game = new_game()
    assert game.snake == [(10, 10), (9, 10), (8, 10)]
    assert DIRECTIONS[game.direction] == (1, 0)
    assert game.score == 0 and game.moves == 0
    assert game.food is not None and game.food not in game.snake
    board = game.board()
    assert board["snake_head"] == [10, 10]
    assert board["snake_body"] == [[9, 10], [8, 10]]
    assert board["direction"] == [1, 0]
    assert board["grid_size"] == [20, 20]


def test_relative_turns() -> None:
    """Left, straight and right are relative to the heading (y grows downwards)."""
    for action, head, direction in [
        (LEFT, (10, 9), (0, -1)),
        (STRAIGHT, (11, 10), (1, 0)),
        (RIGHT, (10, 11), (0, 1)),
    ]:
        game = new_game()
        game.place_food(0, 0)
        game.step(action)
        assert game.snake[0] == head
        assert DIRECTIONS[game.direction] == direction
    game = new_game()
    game.place_food(0, 0)
    for _ in range(4):
        game.step(RIGHT)
    assert DIRECTIONS[game.direction] == (1, 0)


def test_wall_death_uses_configured_reward() -> None:
    """Leaving the board ends the episode with the wall reward; the snake does not move."""
    rewards = Rewards(7, -3, -4, -5, 0, 1, -1)
    game = new_game(rewards=rewards)
    game.place_food(0, 0)
    for _ in range(9):
        assert not game.step(STRAIGHT).done
    assert game.snake[0] == (19, 10)
    result = game.step(STRAIGHT)
    assert result == (-3.0, True, "wall")
    assert game.snake[0] == (19, 10)
    assert game.moves == 10


def test_self_collision() -> None:
    """Turning into the body ends the episode with the snake reward."""
    game = new_game(rewards=Rewards(7, -3, -4, -5, 0, 1, -1))
    grow(game, 2)
    game.place_food(0, 0)
    assert not game.step(RIGHT).done
    assert not game.step(RIGHT).done
    assert game.step(RIGHT) == (-4.0, True, "snake")


def test_moving_into_the_vacating_tail_is_allowed() -> None:
    """The tail leaves its cell in the same move, so the head may enter it."""
    game = new_game()
    grow(game, 1)
    game.place_food(0, 0)
    assert not game.step(RIGHT).done
    assert not game.step(RIGHT).done
    tail = game.snake[-1]
    assert game.step(RIGHT).outcome == "empty"
    assert game.snake[0] == tail
    assert len(game.snake) == 4


def test_food_reward_and_growth() -> None:
    """Eating gives the food reward, grows the snake by one and places new food on a free cell."""
    game = new_game(rewards=Rewards(7, -3, -4, -5, 0, 1, -1))
    game.place_food(11, 10)
    assert game.step(STRAIGHT) == (7.0, False, "food")
    assert game.score == 1
    assert game.snake == [(11, 10), (10, 10), (9, 10), (8, 10)]
    assert game.food is not None and game.food not in game.snake


def test_closer_and_further_shaping() -> None:
    """A plain move earns empty plus closer_to_food or further_from_food by Manhattan distance."""
    rewards = Rewards(
        food=10,
        wall=-10,
        snake=-10,
        max_moves=-10,
        empty=0.5,
        closer_to_food=3,
        further_from_food=-4,
    )
    game = new_game(rewards=rewards)
    game.place_food(15, 10)
    assert game.step(STRAIGHT) == (3.5, False, "empty")
    assert game.step(LEFT) == (-3.5, False, "empty")
    # Same distance counts as not closer.
    game = new_game(rewards=rewards)
    game.place_food(10, 5)
    assert game.step(STRAIGHT) == (-3.5, False, "empty")


def test_timeout_after_multiplier_times_length_moves() -> None:
    """The move that makes the total exceed max_moves_multiplier * length ends the episode."""
    game = new_game(multiplier=2)
    game.place_food(0, 0)
    for _ in range(6):
        assert not game.step(LEFT if game.moves % 2 else RIGHT).done
    result = game.step(STRAIGHT)
    assert result == (-10.0, True, "max_moves")
    assert game.moves == 7


def test_timeout_budget_grows_with_the_snake() -> None:
    """The move budget uses the current length, so eating raises it."""
    game = new_game(multiplier=2)
    grow(game, 1)  # length 4: 8 moves in total
    game.place_food(0, 0)
    outcomes = [game.step(LEFT if game.moves % 2 else RIGHT).outcome for _ in range(8)]
    assert outcomes[:-1] == ["empty"] * 7
    assert outcomes[-1] == "max_moves"


def test_board_filled_ends_the_episode() -> None:
    """Eating the last free cell's food ends the episode as board_filled with the food reward."""
    game = new_game(width=4, height=1)
    assert game.food == (3, 0)
    assert game.step(STRAIGHT) == (10.0, True, "board_filled")
    assert game.food is None and game.score == 1
    assert game.board()["food"] is None


def test_observation_facing_plus_x() -> None:
    """At the start, forward is +x: food ahead, body behind, centre 0, food signs (0, +1)."""
    game = new_game()
    game.place_food(12, 10)
    obs = game.observation()
    assert obs.shape == (OBSERVATION_SIZE,) and obs.dtype == np.float32
    assert cell(obs, 0, 0) == 0.0
    assert cell(obs, 2, 0) == CELL_FOOD
    assert cell(obs, -1, 0) == CELL_BODY and cell(obs, -2, 0) == CELL_BODY
    assert float(np.abs(obs[:49]).sum()) == CELL_FOOD + 2 * CELL_BODY
    assert obs[49] == 0.0 and obs[50] == 1.0


def test_observation_rotates_with_the_heading() -> None:
    """After turning left (facing -y), the old body lies behind, food at (12, 10) behind-right."""
    game = new_game()
    game.place_food(12, 10)
    game.step(LEFT)
    obs = game.observation()
    assert cell(obs, -1, 0) == CELL_BODY  # (10, 10)
    assert cell(obs, -1, -1) == CELL_BODY  # (9, 10)
    assert cell(obs, -1, 2) == CELL_FOOD  # (12, 10)
    assert obs[49] == 1.0 and obs[50] == -1.0


def test_observation_marks_off_board_cells() -> None:
    """Cells beyond the wall read -0.5; after a right turn the wall ahead is still 'ahead'."""
    game = new_game()
    game.place_food(0, 19)
    game.step(LEFT)
    for _ in range(8):
        game.step(STRAIGHT)
    assert game.snake[0] == (10, 1)
    obs = game.observation()
    for right in range(-3, 4):
        assert cell(obs, 3, right) == CELL_OFF_BOARD
        assert cell(obs, 2, right) == CELL_OFF_BOARD
        assert cell(obs, 1, right) != CELL_OFF_BOARD
    game.step(RIGHT)  # now facing +x at (11, 1): the wall is on the left
    obs = game.observation()
    for ahead in range(-3, 4):
        assert cell(obs, ahead, -3) == CELL_OFF_BOARD
        assert cell(obs, ahead, -2) == CELL_OFF_BOARD
        assert cell(obs, ahead, -1) != CELL_OFF_BOARD


def reference_observation(game: SnakeGame) -> np.ndarray:
    """A cell-by-cell rendering of the observation, written independently of the gather."""
    forward_x, forward_y = DIRECTIONS[game.direction]
    right_x, right_y = -forward_y, forward_x
    head = game.snake[0]
    body = set(game.snake[1:])
    values = []
    for ahead in range(OBSERVATION_RADIUS, -OBSERVATION_RADIUS - 1, -1):
        for right in range(-OBSERVATION_RADIUS, OBSERVATION_RADIUS + 1):
            x = head[0] + ahead * forward_x + right * right_x
            y = head[1] + ahead * forward_y + right * right_y
            if ahead == 0 and right == 0:
                values.append(0.0)
            elif not (0 <= x < game.width and 0 <= y < game.height):
                values.append(CELL_OFF_BOARD)
            elif (x, y) in body:
                values.append(CELL_BODY)
            elif (x, y) == game.food:
                values.append(CELL_FOOD)
            else:
                values.append(0.0)
    assert game.food is not None
    offset = (game.food[0] - head[0], game.food[1] - head[1])
    values.append(np.sign(offset[0] * right_x + offset[1] * right_y))
    values.append(np.sign(offset[0] * forward_x + offset[1] * forward_y))
    return np.array(values, dtype=np.float32)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_observation_matches_a_cell_by_cell_rendering(seed: int) -> None:
    """Over random play in every heading, the observation equals a naive rendering."""
    rng = np.random.default_rng(seed)
    checked = 0
    for game_index in range(20):
        game = new_game(seed=seed * 100 + game_index)
        while True:
            np.testing.assert_array_equal(game.observation(), reference_observation(game))
            checked += 1
            if game.step(int(rng.choice(3, p=[0.2, 0.6, 0.2]))).done:
                break
    assert checked > 200
