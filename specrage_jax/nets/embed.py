"""Embedding of any number of samples with a trained state (the stored R^-1 and output map; no QR here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from specrage_jax.config import AUTO, OUTPUT_ROWS
from specrage_jax.data.lazy import check_streamed_views, is_streamed
from specrage_jax.data.preprocess import unit_rows
from specrage_jax.nets.state import SpecRaGEState, embed_batch_outputs
from specrage_jax.validation import as_view_arrays, check_view_dims, view_presence

EMBED_ROWS = (*OUTPUT_ROWS, "trained")  # what embed(rows=...) accepts


@dataclass(frozen=True)
class ModelOutputs:
    """The model's outputs for n samples: ``mapped`` Y P (n, k), the output through the fitted
    output map; ``trained`` Y = Y~ R^-1 (n, k) as trained (orthogonal); ``view_weights`` alpha (n, V)."""

    mapped: np.ndarray
    trained: np.ndarray
    view_weights: np.ndarray


def embed(
    state: SpecRaGEState,
    views: Sequence[np.ndarray],
    *,
    batch_size: int = 4096,
    mask: np.ndarray | None = None,
    rows: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The fused embedding (n, k) and the view weights alpha (n, V) of ``views``.

    ``rows``: "raw" gives Y P, the output Y = Y~ R^-1 through the output map P fitted after
    training (``model.output_scaling``); "unit" each row of Y P scaled to unit L2 norm;
    "trained" Y itself (orthogonal, as trained); None (default) what the model's
    ``model.output_rows`` says (auto, never resolved: raw).

    Missing views: a view whose row is all NaN, or ``mask`` (n, V) False (True = present), is
    left out of that sample's fusion: its rows are zeroed before the networks and its weight
    is 0, the other views' weights renormalized (a softmax with its logit at -inf).

    Raises:
      ValueError: naming the view for partial-NaN rows, infinite values or a width the model
        was not built for; naming the sample when all its views are missing.
    """
    output_rows = rows or state.model().config.output_rows
    if output_rows == AUTO:  # a model trained without resolving the data's defaults: as trained
        output_rows = "raw"
    if output_rows not in EMBED_ROWS:
        raise ValueError(f"rows must be one of {', '.join(EMBED_ROWS)} or None, got {rows!r}")
    outputs = embed_outputs(state, views, batch_size=batch_size, mask=mask)
    if output_rows == "trained":
        return outputs.trained, outputs.view_weights
    return (unit_rows(outputs.mapped) if output_rows == "unit" else outputs.mapped), outputs.view_weights


def embed_outputs(
    state: SpecRaGEState, views: Sequence[np.ndarray], *, batch_size: int = 4096, mask: np.ndarray | None = None
) -> ModelOutputs:
    """Every output of the model for ``views`` (see :class:`ModelOutputs` and :func:`embed`).

    Every chunk is padded to exactly ``batch_size`` rows, so one compiled shape serves all
    calls; each row depends only on its own sample, so a sample gets bitwise the same row
    alone as in any batch. (XLA CPU may round a matrix product differently for another
    number of rows, so shorter chunks would not guarantee that.)

    Views streamed from disk (``data.lazy.MemmapRows``, marked ``streamed``) are read
    ``batch_size`` rows at a time, each chunk embedded as above: the same rows bitwise, in
    O(batch_size) input memory (the outputs, n x (2k + V), are kept).
    """
    if is_streamed(views):
        return embed_streamed(state, views, batch_size=batch_size, mask=mask)
    arrays: Sequence[np.ndarray] = as_view_arrays(views, allow_missing=True)
    check_view_dims(arrays, state.model().view_dims)
    present = view_presence(arrays, mask)
    arrays = [np.where(present[:, v, None], a, np.float32(0)) for v, a in enumerate(arrays)]
    n = arrays[0].shape[0]
    chunks = []
    for start in range(0, n, batch_size):
        chunk = [a[start : start + batch_size] for a in arrays]
        chunk_mask = present[start : start + batch_size]
        count = chunk[0].shape[0]
        if count < batch_size:
            pad = batch_size - count
            chunk = [np.pad(r, ((0, pad), (0, 0))) for r in chunk]
            chunk_mask = np.pad(chunk_mask, ((0, pad), (0, 0)), constant_values=True)
        outputs = embed_batch_outputs(state, tuple(jnp.asarray(r) for r in chunk), jnp.asarray(chunk_mask))
        chunks.append([np.asarray(o)[:count] for o in outputs])
    return ModelOutputs(*(np.concatenate(parts) for parts in zip(*chunks)))


def embed_streamed(
    state: SpecRaGEState, views: Sequence[Any], *, batch_size: int = 4096, mask: np.ndarray | None = None
) -> ModelOutputs:
    """:func:`embed_outputs` of row sources read on demand (``rows[start:stop]`` -> float32
    (m, d_v)), one chunk of ``batch_size`` rows at a time. A view a sample lacks (the dataset's
    mask) reads as an all-NaN row, so it is left out of the fusion as in memory."""
    check_view_dims(views, state.model().view_dims)
    n = len(check_streamed_views(views, what="views")[0])
    if mask is not None and np.shape(mask) != (n, len(views)):
        raise ValueError(f"mask must have shape (n_samples, n_views) = {(n, len(views))}, got {np.shape(mask)}")
    chunks = []
    for start in range(0, n, batch_size):
        chunk = slice(start, min(start + batch_size, n))
        outputs = embed_outputs(
            state,
            [v[chunk] for v in views],
            batch_size=batch_size,
            mask=None if mask is None else np.asarray(mask)[chunk],
        )
        chunks.append([outputs.mapped, outputs.trained, outputs.view_weights])
    return ModelOutputs(*(np.concatenate(parts) for parts in zip(*chunks)))
