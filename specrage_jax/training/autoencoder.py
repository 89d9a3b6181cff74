"""Optional autoencoder pre-embedding of a view (the paper's appendix: hidden 512-512-2048),
used where the paper uses it (BDGP, InfiniteMNIST, Reuters): its codes replace the raw view."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from specrage_jax.config import AutoencoderConfig
from specrage_jax.nets.autoencoder import Autoencoder
from specrage_jax.nets.netstate import (
    NetState,
    TrainedNet,
    adam_update,
    create_net_state,
)
from specrage_jax.training.pretrain import EarlyStopping, require_in_memory, run_minibatch_epochs


def reconstruction_loss(params: nnx.State, graphdef: nnx.GraphDef, x: jax.Array) -> jax.Array:
    """Mean squared reconstruction error of x (m, d)."""
    return jnp.mean((nnx.merge(graphdef, params)(x) - x) ** 2)


@partial(jax.jit, donate_argnums=0)
def autoencoder_step(state: NetState, batch: tuple[jax.Array]) -> tuple[NetState, jax.Array]:
    """One Adam step on the reconstruction MSE of a batch x (m, d)."""
    (x,) = batch
    loss, grads = jax.value_and_grad(reconstruction_loss)(state.params, state.graphdef, x)
    return adam_update(state, grads), loss


@jax.jit
def autoencoder_loss(state: NetState, batch: tuple[jax.Array]) -> jax.Array:
    """The reconstruction MSE of a batch x (m, d), no update (the held-out loss)."""
    return reconstruction_loss(state.params, state.graphdef, batch[0])


def train_autoencoder(
    x: np.ndarray,
    config: AutoencoderConfig,
    *,
    seed: int,
    progress: bool = False,
    name: str = "view",
    on_device: bool = False,
) -> TrainedNet:
    """Trains one view's autoencoder on its training rows x (n, d), stopping early once the
    reconstruction loss of held-out rows stops improving (``config.patience``). ``on_device``:
    x is copied to the device once and every epoch is one compiled scan (``train.data_on_device``).

    Raises:
      ValueError: ``on_device`` with x streamed from disk (not an array in memory).
    """
    if on_device:
        require_in_memory(x, name)
    state = create_net_state(Autoencoder(x.shape[1], config, rngs=nnx.Rngs(seed)), config.learning_rate)
    run = run_minibatch_epochs(
        state,
        autoencoder_step,
        x.shape[0],
        lambda idx: (x[idx],),
        batch_size=config.batch_size,
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        seed=seed,
        desc=f"autoencoder {name}",
        progress=progress,
        loss=autoencoder_loss,
        stopping=EarlyStopping(config.patience, config.min_delta),
        device_arrays=(x,) if on_device else None,
    )
    return TrainedNet(
        state=run.state, losses=tuple(run.losses), submodule="encoder", held_out_losses=tuple(run.held_out_losses)
    )
