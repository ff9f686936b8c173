"""The numpy recurrent Q-network: gradients, the incremental policy, clipping and Adam."""

from __future__ import annotations

import numpy as np
import pytest

from snakelab.trainers.nn import (
    Adam,
    NetworkShape,
    SlidingWindowQ,
    clip_gradient_norm,
    dropout_masks,
    forward,
    huber,
    init_parameters,
    parameter_count,
    td_loss_and_gradient,
    view_parameters,
)

SHAPE = NetworkShape(input_size=7, hidden_size=6, layers=3, actions=3)
BATCH, STEPS = 4, 5


def make_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parameters, states, actions and targets whose errors straddle the Huber threshold."""
    rng = np.random.default_rng(seed)
    flat = init_parameters(SHAPE, rng, np.float64) * 3.0  # larger weights: saturating tanh
    states = rng.normal(size=(BATCH, STEPS, SHAPE.input_size))
    actions = rng.integers(SHAPE.actions, size=BATCH)
    q_values, _ = forward(view_parameters(SHAPE, flat), states)
    predicted = q_values[np.arange(BATCH), actions]
    # Two errors inside the quadratic zone, two in the linear zone.
    targets = predicted + np.array([0.3, -0.6, 2.5, -4.0])
    return flat, states, actions, targets


def loss_at(flat: np.ndarray, states, actions, targets, masks) -> float:
    scratch = view_parameters(SHAPE, np.zeros_like(flat))
    return td_loss_and_gradient(
        view_parameters(SHAPE, flat), scratch, states, actions, targets, masks
    )


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradient_matches_finite_differences(dropout: float) -> None:
    """Backprop (head, BPTT over 3 RNN layers, dropout, ReLU, Huber) equals finite differences."""
    flat, states, actions, targets = make_problem(7)
    masks = dropout_masks(
        np.random.default_rng(3),
        dropout,
        SHAPE.layers - 1,
        (STEPS, BATCH, SHAPE.hidden_size),
        np.float64,
    )
    assert (masks is None) == (dropout == 0.0)
    grads = view_parameters(SHAPE, np.zeros_like(flat))
    td_loss_and_gradient(view_parameters(SHAPE, flat), grads, states, actions, targets, masks)

    numeric = np.empty_like(flat)
    epsilon = 1e-6
    for index in range(flat.size):
        original = flat[index]
        flat[index] = original + epsilon
        above = loss_at(flat, states, actions, targets, masks)
        flat[index] = original - epsilon
        below = loss_at(flat, states, actions, targets, masks)
        flat[index] = original
        numeric[index] = (above - below) / (2 * epsilon)

    assert np.abs(grads.flat).max() > 1e-2
    np.testing.assert_allclose(grads.flat, numeric, rtol=1e-5, atol=1e-8)
    # Every parameter group receives gradient (nothing silently detached).
    for view in [grads.w_in, grads.b_in, *grads.rnn, *grads.b_ih, *grads.b_hh, grads.w_out]:
        assert np.abs(view).max() > 0.0


def test_huber_is_quadratic_inside_one_and_linear_outside() -> None:
    """SmoothL1 with beta 1: 0.5 d^2 for |d| < 1, |d| - 0.5 beyond; gradient clipped to ±1/B."""
    loss, gradient = huber(np.array([0.5, -3.0]))
    assert loss == pytest.approx((0.125 + 2.5) / 2)
    np.testing.assert_allclose(gradient, [0.25, -0.5])


@pytest.mark.parametrize("sequence_length", [1, 4, 8])
def test_sliding_window_matches_the_windowed_forward(sequence_length: int) -> None:
    """The incremental policy gives the forward pass's Q-values on each pre-filled window."""
    shape = NetworkShape(input_size=51, hidden_size=16, layers=4, actions=3)
    rng = np.random.default_rng(5)
    params = view_parameters(shape, init_parameters(shape, rng, np.float64))
    observations = rng.normal(size=(25, 51))
    policy = SlidingWindowQ(params, sequence_length)
    for episode in range(2):  # a second start() must forget the first episode
        policy.start(observations[0])
        for move in range(len(observations) - episode * 7):
            window = [max(0, k) for k in range(move - sequence_length + 1, move + 1)]
            expected, _ = forward(params, observations[window][None])
            np.testing.assert_allclose(policy.push(observations[move]), expected[0], atol=1e-12)


def test_init_parameters_uses_pytorch_bounds() -> None:
    """Initial weights are uniform within ±1/sqrt(fan_in), as PyTorch's Linear and RNN."""
    shape = NetworkShape(input_size=51, hidden_size=64, layers=4, actions=3)
    flat = init_parameters(shape, np.random.default_rng(0))
    params = view_parameters(shape, flat)
    assert flat.dtype == np.float32 and flat.size == parameter_count(shape)
    assert np.abs(params.w_in).max() <= 1 / np.sqrt(51)
    assert np.abs(params.w_in).max() > 0.9 / np.sqrt(51)
    for view in [*params.rnn, *params.b_ih, params.w_out]:
        assert np.abs(view).max() <= 1 / np.sqrt(64)
    again = init_parameters(shape, np.random.default_rng(0))
    np.testing.assert_array_equal(flat, again)


def test_clip_gradient_norm() -> None:
    """Gradients above the maximum norm are scaled down to it; smaller ones are untouched."""
    large = np.array([3.0, 4.0])
    assert clip_gradient_norm(large, 1.0) == pytest.approx(5.0)
    assert np.linalg.norm(large) == pytest.approx(1.0, rel=1e-5)
    small = np.array([0.3, 0.4])
    clip_gradient_norm(small, 1.0)
    np.testing.assert_array_equal(small, [0.3, 0.4])


def test_adam_matches_the_bias_corrected_update() -> None:
    """Two Adam steps equal the textbook bias-corrected update with betas (0.9, 0.999)."""
    params = np.array([1.0, -2.0, 0.5])
    adam = Adam(3, learning_rate=0.01, dtype=np.float64)
    expected = params.copy()
    first = np.zeros(3)
    second = np.zeros(3)
    for step, grads in enumerate([np.array([0.1, -0.2, 0.0]), np.array([0.3, 0.1, -0.5])], 1):
        adam.step(params, grads)
        first = 0.9 * first + 0.1 * grads
        second = 0.999 * second + 0.001 * grads**2
        corrected_first = first / (1 - 0.9**step)
        corrected_second = second / (1 - 0.999**step)
        expected -= 0.01 * corrected_first / (np.sqrt(corrected_second) + 1e-8)
        np.testing.assert_allclose(params, expected, rtol=1e-12)


def test_dropout_masks_scale_kept_units() -> None:
    """Dropout masks are 0 or 1/(1-p), and about p of the units are dropped."""
    masks = dropout_masks(np.random.default_rng(0), 0.1, 3, (8, 24, 64), np.float32)
    assert masks is not None and len(masks) == 3
    values = np.unique(np.concatenate([mask.ravel() for mask in masks]))
    np.testing.assert_allclose(values, [0.0, 1 / 0.9], rtol=1e-6)
    dropped = np.mean([np.mean(mask == 0.0) for mask in masks])
    assert 0.08 < dropped < 0.12
