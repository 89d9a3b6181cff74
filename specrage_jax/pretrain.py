"""Shared machinery of the two pre-training stages (Siamese affinity nets, autoencoders):
a small train state for one Flax NNX network and a seeded mini-batch loop over arrays."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx, struct
from tqdm.auto import tqdm


@struct.dataclass
class NetState:
    """Parameters and Adam state of one network; ``graphdef`` and the learning rate are static,
    so equal setups share compiled steps."""

    params: nnx.State
    opt_state: optax.OptState
    graphdef: nnx.GraphDef = struct.field(pytree_node=False)
    learning_rate: float = struct.field(pytree_node=False)


def create_net_state(module: nnx.Module, learning_rate: float) -> NetState:
    graphdef, params = nnx.split(module, nnx.Param)
    return NetState(params=params, opt_state=optax.adam(learning_rate).init(params), graphdef=graphdef,
                    learning_rate=learning_rate)


def adam_update(state: NetState, grads: nnx.State) -> NetState:
    """One Adam step (pure; call inside a jitted step)."""
    updates, opt_state = optax.adam(state.learning_rate).update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state)


def run_minibatch_epochs(
    state: NetState,
    step: Callable[[NetState, tuple[jax.Array, ...]], tuple[NetState, jax.Array]],
    n: int,
    take: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    *,
    batch_size: int,
    epochs: int,
    seed: int,
    desc: str,
    progress: bool,
) -> tuple[NetState, list[float]]:
    """Shuffled mini-batches over n items, ``take(indices)`` building each batch's arrays (so
    pair datasets are gathered per batch, never materialized); returns the state and the mean
    loss per epoch. The batch is at most n, so small data still trains; a last partial batch
    is dropped (fixed shapes, one compile).
    """
    m = min(batch_size, n)
    rng = np.random.default_rng(seed)
    losses = []
    bar = tqdm(range(epochs), desc=desc, unit="epoch", disable=not progress, leave=False)
    for _ in bar:
        order = rng.permutation(n)
        epoch_losses = []
        for start in range(0, n - m + 1, m):
            idx = order[start:start + m]
            state, loss = step(state, tuple(jnp.asarray(a) for a in take(idx)))
            epoch_losses.append(loss)
        losses.append(float(jnp.mean(jnp.stack(epoch_losses))))
        if not np.isfinite(losses[-1]):
            raise FloatingPointError(f"{desc}: loss became {losses[-1]}; lower the learning rate")
        bar.set_postfix(loss=f"{losses[-1]:.4g}")
    bar.close()
    return state, losses


@partial(jax.jit, static_argnames=("graphdef", "submodule"))
def forward_rows(graphdef: nnx.GraphDef, params: nnx.State, rows: jax.Array, submodule: str | None = None) -> jax.Array:
    """The network (or its attribute ``submodule``) on rows (m, d); one compile per shape."""
    net = nnx.merge(graphdef, params)
    return (getattr(net, submodule) if submodule else net)(rows)


@dataclass(frozen=True)
class TrainedNet:
    """A pre-trained network, its per-epoch losses, and ``encode`` (n, d) -> (n, out).

    ``submodule`` names the part that encodes (the autoencoder's ``encoder``); None is the whole net.
    """

    state: NetState
    losses: tuple[float, ...]
    submodule: str | None = None

    def encode(self, x: np.ndarray) -> np.ndarray:
        return apply_in_chunks(partial(forward_rows, self.state.graphdef, self.state.params,
                                       submodule=self.submodule), x)


def apply_in_chunks(fn: Callable[[jax.Array], jax.Array], x: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """fn over the rows of x (n, d) in fixed-size chunks (the last padded): -> (n, out) float32."""
    n = x.shape[0]
    size = min(chunk, n)
    if n == 0:  # an empty split: the output width comes from one zero row
        return np.asarray(fn(jnp.zeros((1, x.shape[1]), jnp.float32)), np.float32)[:0]
    outputs = []
    for start in range(0, n, size):
        rows = x[start:start + size]
        count = rows.shape[0]
        if count < size:
            rows = np.pad(rows, ((0, size - count), (0, 0)))
        outputs.append(np.asarray(fn(jnp.asarray(rows)))[:count])
    return np.concatenate(outputs).astype(np.float32)
