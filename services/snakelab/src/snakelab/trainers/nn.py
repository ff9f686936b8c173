"""The recurrent Q-network in plain numpy: forward, backpropagation through time, Adam.

Network: Linear(input -> H) + ReLU, a stack of Elman RNN layers (tanh) with dropout between
layers while training, and Linear(H -> actions) on the last time step. It mirrors PyTorch's
``nn.Linear``/``nn.RNN`` (two biases per RNN layer, the same uniform initialisation, inverted
dropout, SmoothL1 loss, ``clip_grad_norm_`` and ``Adam``) so the reference trains like the
real SnakeLab.

All parameters live in one flat vector, with named views into it, so Adam, gradient clipping
and the soft target update are each a single vectorised operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPSILON = 1e-8
HUBER_DELTA = 1.0


@dataclass(frozen=True)
class NetworkShape:
    """Sizes of the network's layers."""

    input_size: int
    hidden_size: int
    layers: int
    actions: int


@dataclass(frozen=True)
class Parameters:
    """Named views into a flat parameter (or gradient) vector.

    Weights are stored as ``x @ w`` matrices (PyTorch's transposed). ``rnn[l]`` stacks the
    input weights (rows ``:H``) on the recurrent weights (rows ``H:``), so one matmul of
    ``[input, previous hidden]`` computes a layer's pre-activation.
    """

    flat: Array
    w_in: Array
    b_in: Array
    rnn: list[Array]
    b_ih: list[Array]
    b_hh: list[Array]
    w_out: Array
    b_out: Array

    @property
    def hidden_size(self) -> int:
        """Width of the hidden layers."""
        return int(self.b_in.shape[0])


def parameter_count(shape: NetworkShape) -> int:
    """Length of the flat parameter vector of a network of this shape."""
    hidden = shape.hidden_size
    per_layer = 2 * hidden * hidden + 2 * hidden
    return (
        shape.input_size * hidden
        + hidden
        + shape.layers * per_layer
        + hidden * shape.actions
        + shape.actions
    )


def view_parameters(shape: NetworkShape, flat: Array) -> Parameters:
    """Split a flat vector into the network's named parameter views (no copies)."""
    if flat.shape != (parameter_count(shape),):
        raise ValueError("flat vector does not match the network shape")
    hidden = shape.hidden_size
    position = 0

    def take(*dims: int) -> Array:
        nonlocal position
        size = int(np.prod(dims))
        view = flat[position : position + size].reshape(dims)
        position += size
        return view

    w_in = take(shape.input_size, hidden)
    b_in = take(hidden)
    rnn, b_ih, b_hh = [], [], []
    for _ in range(shape.layers):
        rnn.append(take(2 * hidden, hidden))
        b_ih.append(take(hidden))
        b_hh.append(take(hidden))
    w_out = take(hidden, shape.actions)
    b_out = take(shape.actions)
    return Parameters(flat, w_in, b_in, rnn, b_ih, b_hh, w_out, b_out)


def init_parameters(
    shape: NetworkShape, rng: np.random.Generator, dtype: npt.DTypeLike = np.float32
) -> Array:
    """A fresh flat parameter vector with PyTorch's default uniform initialisation."""
    flat = np.empty(parameter_count(shape), dtype=np.float64)
    params = view_parameters(shape, flat)
    input_bound = 1.0 / np.sqrt(shape.input_size)
    hidden_bound = 1.0 / np.sqrt(shape.hidden_size)
    for view, bound in [
        (params.w_in, input_bound),
        (params.b_in, input_bound),
        *[(view, hidden_bound) for view in params.rnn],
        *[(view, hidden_bound) for view in params.b_ih],
        *[(view, hidden_bound) for view in params.b_hh],
        (params.w_out, hidden_bound),
        (params.b_out, hidden_bound),
    ]:
        view[...] = rng.uniform(-bound, bound, size=view.shape)
    return flat.astype(dtype)


@dataclass
class ForwardCache:
    """What the backward pass needs from a training forward pass.

    Arrays are time-major and flattened, ``(T * B, width)``: row ``t * B + b`` is step ``t``
    of sequence ``b``, so each step is one contiguous block and the big matmuls are 2-D.
    """

    batch: int
    states: Array  # (T * B, input)
    pre_input: Array  # (T * B, H) before the ReLU
    layer_inputs: list[Array]  # (T * B, H) what each RNN layer read, after dropout
    hidden: list[Array]  # (T * B, H) each RNN layer's outputs
    masks: list[Array] | None  # (T * B, H) inverted-dropout masks between layers


def forward(
    params: Parameters, states: Array, masks: list[Array] | None = None
) -> tuple[Array, ForwardCache]:
    """Q-values of each sequence's last time step, ``(B, actions)``, from ``(B, T, input)``.

    ``masks`` (one per gap between RNN layers, each ``(T, B, H)`` and already scaled by
    ``1 / (1 - p)``) apply dropout; ``None`` is evaluation mode. The hidden state starts at
    zero for every sequence.
    """
    hidden_size = params.hidden_size
    batch, steps, _ = states.shape
    flat_states = np.ascontiguousarray(states.transpose(1, 0, 2)).reshape(steps * batch, -1)
    flat_masks = None if masks is None else [mask.reshape(-1, hidden_size) for mask in masks]
    pre_input = flat_states @ params.w_in
    pre_input += params.b_in
    layer_input = np.maximum(pre_input, 0.0)
    layer_inputs: list[Array] = []
    hidden: list[Array] = []
    last_layer = len(params.rnn) - 1
    for layer, weights in enumerate(params.rnn):
        layer_inputs.append(layer_input)
        w_input, w_recurrent = weights[:hidden_size], weights[hidden_size:]
        # Input projections of all time steps at once; only the recurrence is sequential.
        outputs = layer_input @ w_input
        outputs += params.b_ih[layer] + params.b_hh[layer]
        by_step = outputs.reshape(steps, batch, hidden_size)
        np.tanh(by_step[0], out=by_step[0])
        for step in range(1, steps):
            current = by_step[step]
            current += by_step[step - 1] @ w_recurrent
            np.tanh(current, out=current)
        hidden.append(outputs)
        if flat_masks is not None and layer < last_layer:
            layer_input = outputs * flat_masks[layer]
        else:
            layer_input = outputs
    q_values = hidden[-1][-batch:] @ params.w_out + params.b_out
    cache = ForwardCache(batch, flat_states, pre_input, layer_inputs, hidden, flat_masks)
    return q_values, cache


def backward(params: Parameters, cache: ForwardCache, d_q: Array, grads: Parameters) -> None:
    """Write into ``grads`` the gradient of a loss whose gradient w.r.t. the Q-values is ``d_q``."""
    hidden_size = params.hidden_size
    batch = cache.batch
    steps = cache.states.shape[0] // batch
    last_hidden = cache.hidden[-1][-batch:]
    grads.w_out[...] = last_hidden.T @ d_q
    grads.b_out[...] = d_q.sum(axis=0)
    # Only the last step of the top layer feeds the output.
    d_last = d_q @ params.w_out.T
    d_outputs: Array | None = None
    for layer in range(len(params.rnn) - 1, -1, -1):
        outputs = cache.hidden[layer]
        by_step = outputs.reshape(steps, batch, hidden_size)
        d_by_step = None if d_outputs is None else d_outputs.reshape(steps, batch, hidden_size)
        w_input = params.rnn[layer][:hidden_size]
        w_recurrent_t = np.ascontiguousarray(params.rnn[layer][hidden_size:].T)
        d_pre = np.empty_like(outputs)
        d_pre_by_step = d_pre.reshape(steps, batch, hidden_size)
        carried: Array | None = None
        for step in range(steps - 1, -1, -1):
            if d_by_step is not None:
                d_hidden = d_by_step[step] if carried is None else d_by_step[step] + carried
            elif carried is None:
                d_hidden = d_last
            else:
                d_hidden = carried
            h = by_step[step]
            d_step = d_pre_by_step[step]
            np.multiply(d_hidden, 1.0 - h * h, out=d_step)
            if step:
                carried = d_step @ w_recurrent_t
        grads.rnn[layer][:hidden_size] = cache.layer_inputs[layer].T @ d_pre
        # h_{-1} is zero, so the first step adds nothing to the recurrent weights' gradient.
        grads.rnn[layer][hidden_size:] = outputs[:-batch].T @ d_pre[batch:]
        bias_grad = d_pre.sum(axis=0)
        grads.b_ih[layer][...] = bias_grad
        grads.b_hh[layer][...] = bias_grad
        d_layer_input = d_pre @ w_input.T
        if layer:
            masks = cache.masks
            d_outputs = d_layer_input if masks is None else d_layer_input * masks[layer - 1]
    d_pre_input = d_layer_input * (cache.pre_input > 0.0)
    grads.w_in[...] = cache.states.T @ d_pre_input
    grads.b_in[...] = d_pre_input.sum(axis=0)


def huber(diff: Array) -> tuple[float, Array]:
    """Mean SmoothL1 loss (beta 1) of ``diff`` and its gradient w.r.t. ``diff``."""
    magnitude = np.abs(diff)
    losses = np.where(
        magnitude < HUBER_DELTA, 0.5 * diff * diff / HUBER_DELTA, magnitude - 0.5 * HUBER_DELTA
    )
    gradient = np.clip(diff / HUBER_DELTA, -1.0, 1.0) / diff.shape[0]
    return float(losses.mean()), gradient


def td_loss_and_gradient(
    params: Parameters,
    grads: Parameters,
    states: Array,
    actions: Array,
    targets: Array,
    masks: list[Array] | None,
) -> float:
    """Huber loss of the taken actions' Q-values against fixed targets; gradient into ``grads``."""
    q_values, cache = forward(params, states, masks)
    rows = np.arange(len(actions))
    loss, d_predicted = huber(q_values[rows, actions] - targets)
    d_q = np.zeros_like(q_values)
    d_q[rows, actions] = d_predicted
    backward(params, cache, d_q, grads)
    return loss


def dropout_masks(
    rng: np.random.Generator, probability: float, count: int, shape: tuple[int, ...], dtype: Any
) -> list[Array] | None:
    """Inverted-dropout masks for ``count`` gaps between layers, or None when nothing drops.

    ``shape`` is ``(T, B, H)``: time-major, as :func:`forward` expects.
    """
    if probability <= 0.0 or count == 0:
        return None
    scale = np.dtype(dtype).type(1.0 / (1.0 - probability))
    masks = []
    for _ in range(count):
        mask = (rng.random(shape, dtype=np.float32) >= probability).astype(dtype)
        mask *= scale
        masks.append(mask)
    return masks


def clip_gradient_norm(grads: Array, max_norm: float) -> float:
    """Scale ``grads`` in place to an L2 norm of at most ``max_norm``; return the norm before."""
    norm = float(np.sqrt(np.dot(grads, grads)))
    scale = max_norm / (norm + 1e-6)
    if scale < 1.0:
        grads *= grads.dtype.type(scale)
    return norm


class Adam:
    """Adam on a flat parameter vector, as ``torch.optim.Adam`` with default betas."""

    def __init__(self, size: int, learning_rate: float, dtype: npt.DTypeLike = np.float32) -> None:
        self.learning_rate = learning_rate
        self.steps = 0
        self._first = np.zeros(size, dtype=dtype)
        self._second = np.zeros(size, dtype=dtype)
        self._scratch = np.zeros(size, dtype=dtype)

    def step(self, params: Array, grads: Array) -> None:
        """Move ``params`` in place one step against ``grads``."""
        self.steps += 1
        first, second, scratch = self._first, self._second, self._scratch
        first *= ADAM_BETA1
        first += (1.0 - ADAM_BETA1) * grads
        second *= ADAM_BETA2
        np.multiply(grads, grads, out=scratch)
        scratch *= 1.0 - ADAM_BETA2
        second += scratch
        first_correction = 1.0 - ADAM_BETA1**self.steps
        second_correction = 1.0 - ADAM_BETA2**self.steps
        np.sqrt(second, out=scratch)
        scratch /= np.sqrt(second_correction)
        scratch += ADAM_EPSILON
        np.divide(first, scratch, out=scratch)
        scratch *= self.learning_rate / first_correction
        params -= scratch


class SlidingWindowQ:
    """Q-values of the last step of a sliding observation window, one new observation per call.

    Acting evaluates, at every move, the network on the window of the last ``T`` observations
    with the hidden state starting at zero. Instead of re-running ``T`` sequential steps per
    move, this keeps ``T`` windows in flight (one starting at each of the last ``T`` moves) and
    advances them together: one batched matmul per layer per move, the same arithmetic as
    :func:`forward` in evaluation mode. It assumes the parameters do not change between
    :meth:`start` and the last :meth:`push` of an episode (training happens between episodes).
    """

    def __init__(self, params: Parameters, sequence_length: int) -> None:
        self._params = params
        self._length = sequence_length
        hidden = params.hidden_size
        self._hidden = hidden
        self._layers = len(params.rnn)
        dtype = params.flat.dtype
        # Row i is the window begun i moves ago (mod T); column block l is layer l's hidden
        # state, so layer l reads blocks l-1 (new) and l (old) as one contiguous slice.
        self._state = np.zeros((sequence_length, self._layers * hidden), dtype=dtype)
        self._pre = np.empty((sequence_length, hidden), dtype=dtype)
        self._biases = [np.empty(hidden, dtype=dtype) for _ in range(self._layers)]
        self._finishing = 0

    def start(self, first_observation: Array) -> None:
        """Begin an episode: the window is pre-filled with the first observation."""
        params = self._params
        for layer, bias in enumerate(self._biases):
            np.add(params.b_ih[layer], params.b_hh[layer], out=bias)
        self._state.fill(0.0)
        # Each window started at call n finishes at call n + T - 1, so after T - 1 warm-up
        # calls the window finishing at the first real call has seen T copies.
        self._finishing = 1 % self._length
        for _ in range(self._length - 1):
            self._advance(first_observation)

    def push(self, observation: Array) -> Array:
        """Add the newest observation; Q-values of the window ending with it, ``(actions,)``."""
        self._advance(observation)
        return self._last_q

    def _advance(self, observation: Array) -> None:
        params = self._params
        hidden = self._hidden
        state = self._state
        pre = self._pre
        embedded = observation @ params.w_in
        embedded += params.b_in
        np.maximum(embedded, 0.0, out=embedded)
        # Every window sees the same newest input, so layer 0's input term is shared.
        shared = embedded @ params.rnn[0][:hidden]
        shared += self._biases[0]
        np.matmul(state[:, :hidden], params.rnn[0][hidden:], out=pre)
        pre += shared
        np.tanh(pre, out=state[:, :hidden])
        for layer in range(1, self._layers):
            both = state[:, (layer - 1) * hidden : (layer + 1) * hidden]
            np.matmul(both, params.rnn[layer], out=pre)
            pre += self._biases[layer]
            np.tanh(pre, out=state[:, layer * hidden : (layer + 1) * hidden])
        finishing = self._finishing
        self._last_q = state[finishing, (self._layers - 1) * hidden :] @ params.w_out + params.b_out
        state[finishing] = 0.0
        self._finishing = (finishing + 1) % self._length
