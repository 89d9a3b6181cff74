"""Shared machinery of the two pre-training stages (Siamese affinity nets, autoencoders):
a small train state for one Flax NNX network and a seeded mini-batch loop over arrays."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from specrage_jax.nets.netstate import NetState


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
            idx = order[start : start + m]
            state, loss = step(state, tuple(jnp.asarray(a) for a in take(idx)))
            epoch_losses.append(loss)
        losses.append(float(jnp.mean(jnp.stack(epoch_losses))))
        if not np.isfinite(losses[-1]):
            raise FloatingPointError(f"{desc}: loss became {losses[-1]}; lower the learning rate")
        bar.set_postfix(loss=f"{losses[-1]:.4g}")
    bar.close()
    return state, losses
