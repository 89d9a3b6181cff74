"""The state of one pre-training network (Siamese affinity net, autoencoder): parameters and
Adam state, and :class:`TrainedNet`, a trained one that encodes rows in fixed-size chunks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from chex import ArrayTree  # noqa: F401  # pdoc resolves optax.OptState (chex's self-referencing ArrayTree) here
from flax import nnx, struct


@struct.dataclass
class NetState:
    """Parameters and Adam state of one network; ``graphdef`` and the learning rate are static,
    so equal setups share compiled steps."""

    params: nnx.State
    opt_state: optax.OptState
    graphdef: nnx.GraphDef = struct.field(pytree_node=False)
    learning_rate: float = struct.field(pytree_node=False)

    if TYPE_CHECKING:

        def replace(self, **updates: Any) -> NetState: ...  # added by flax struct.dataclass


def create_net_state(module: nnx.Module, learning_rate: float) -> NetState:
    graphdef, params = nnx.split(module, nnx.Param)
    return NetState(
        params=params, opt_state=optax.adam(learning_rate).init(params), graphdef=graphdef, learning_rate=learning_rate
    )


def adam_update(state: NetState, grads: nnx.State) -> NetState:
    """One Adam step (pure; call inside a jitted step)."""
    updates, opt_state = optax.adam(state.learning_rate).update(grads, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state)


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
    held_out_losses: tuple[float, ...] = ()  # per epoch, when the stage held items out to stop early

    def encode(self, x: np.ndarray) -> np.ndarray:
        return apply_in_chunks(
            partial(forward_rows, self.state.graphdef, self.state.params, submodule=self.submodule), x
        )


def apply_in_chunks(fn: Callable[[jax.Array], jax.Array], x: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """fn over the rows of x (n, d) in fixed-size chunks (the last padded): -> (n, out) float32."""
    n = x.shape[0]
    size = min(chunk, n)
    if n == 0:  # an empty split: the output width comes from one zero row
        return np.asarray(fn(jnp.zeros((1, x.shape[1]), jnp.float32)), np.float32)[:0]
    outputs = []
    for start in range(0, n, size):
        rows = x[start : start + size]
        count = rows.shape[0]
        if count < size:
            rows = np.pad(rows, ((0, size - count), (0, 0)))
        outputs.append(np.asarray(fn(jnp.asarray(rows)))[:count])
    return np.concatenate(outputs).astype(np.float32)
