"""Optional autoencoder pre-embedding of a view (the paper's appendix: hidden 512-512-2048),
used where the paper uses it (BDGP, InfiniteMNIST, Reuters): its codes replace the raw view."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from specrage_jax.config import AutoencoderConfig
from specrage_jax.model import MLP, activation
from specrage_jax.pretrain import NetState, TrainedNet, adam_update, create_net_state, run_minibatch_epochs


class Autoencoder(nnx.Module):
    """in -> hidden... -> embedding (linear) and the mirrored decoder back to in (linear)."""

    def __init__(self, in_dim: int, config: AutoencoderConfig, *, rngs: nnx.Rngs):
        relu, linear = activation("relu"), activation("none")
        self.encoder = MLP(in_dim, config.hidden, config.embedding_dim, hidden_act=relu, out_act=linear, rngs=rngs)
        self.decoder = MLP(config.embedding_dim, tuple(reversed(config.hidden)), in_dim, hidden_act=relu,
                           out_act=linear, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.decoder(self.encoder(x))


@partial(jax.jit, donate_argnums=0)
def autoencoder_step(state: NetState, batch: tuple[jax.Array]) -> tuple[NetState, jax.Array]:
    """One Adam step on the reconstruction MSE of a batch x (m, d)."""
    (x,) = batch

    def loss_fn(params):
        return jnp.mean((nnx.merge(state.graphdef, params)(x) - x) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return adam_update(state, grads), loss


def train_autoencoder(x: np.ndarray, config: AutoencoderConfig, *, seed: int, progress: bool = False,
                      name: str = "view") -> TrainedNet:
    """Trains one view's autoencoder on its training rows x (n, d)."""
    state = create_net_state(Autoencoder(x.shape[1], config, rngs=nnx.Rngs(seed)), config.learning_rate)
    state, losses = run_minibatch_epochs(
        state, autoencoder_step, x.shape[0], lambda idx: (x[idx],), batch_size=config.batch_size,
        epochs=config.epochs, seed=seed, desc=f"autoencoder {name}", progress=progress,
    )
    return TrainedNet(state=state, losses=tuple(losses), submodule="encoder")
