"""Embedding of any number of samples with a trained state (the stored R^-1; no QR here)."""

from __future__ import annotations

from typing import Sequence

import jax.numpy as jnp
import numpy as np

from specrage_jax.steps import SpecRaGEState, predict
from specrage_jax.validation import as_view_arrays, check_view_dims


def embed(state: SpecRaGEState, views: Sequence[np.ndarray], *, batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The fused embedding Y (n, k) and the view weights alpha (n, V) of ``views``.

    Runs in chunks of ``batch_size`` (the last one padded, so one compiled shape serves all
    chunks); each row depends only on its own sample, so a sample gets the same row alone
    as in any batch.
    """
    arrays = as_view_arrays(views)
    check_view_dims(arrays, state.model().view_dims)
    n = arrays[0].shape[0]
    chunk = min(batch_size, n)
    ys, alphas = [], []
    for start in range(0, n, chunk):
        rows = [a[start:start + chunk] for a in arrays]
        count = rows[0].shape[0]
        if count < chunk:
            rows = [np.pad(r, ((0, chunk - count), (0, 0))) for r in rows]
        y, alpha = predict(state, tuple(jnp.asarray(r) for r in rows))
        ys.append(np.asarray(y)[:count])
        alphas.append(np.asarray(alpha)[:count])
    return np.concatenate(ys), np.concatenate(alphas)
