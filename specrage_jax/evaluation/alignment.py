"""The alignment-based multi-view baseline (as in MvSCN) that the paper compares SpecRaGE with.

One SpectralNet per view, each with its own orthogonalization layer, pulled together by an
MSE alignment term; for evaluation the view embeddings are concatenated:

    Y^(v) = f_v(X^(v)) R_v^-1                  (m, k), Y^(v)T Y^(v) = m I on the batch
    loss  = sum_v 2 tr(Y^(v)T L^(v) Y^(v)) / m^2
            + lam * sum_{v<u} mean_i ||Y^(v)_i - Y^(u)_i||^2

L^(v) is the Laplacian of view v's in-batch kNN Gaussian affinity (per-batch sigma). During
training R_v^-1 is the QR of the batch's own output, differentiated through (SpecRaGE's default);
after training each R_v^-1 is fitted once on the whole training set and stored for inference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from specrage_jax.nets.model import MLP, activation
from specrage_jax.nets.netstate import (
    NetState,
    adam_update,
    apply_in_chunks,
    create_net_state,
)
from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.laplacian import rayleigh_trace
from specrage_jax.ops.ortho import orthonormalizer
from specrage_jax.training.pretrain import run_minibatch_epochs


@dataclass(frozen=True, kw_only=True)
class AlignmentConfig:
    """Hyper-parameters of the alignment baseline.

    hidden: widths of every view's MLP (leaky ReLU between, linear output to k).
    n_components: k, the dimension of each view's embedding (the concatenation has V k).
    n_neighbors: l of each view's in-batch kNN graph.
    alignment_weight: lam of the MSE alignment term (0: independent per-view SpectralNets).
    """

    hidden: tuple[int, ...] = (512, 512)
    n_components: int
    n_neighbors: int = 10
    alignment_weight: float = 1.0
    learning_rate: float = 1e-3
    epochs: int
    batch_size: int = 512

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if any(h < 1 for h in self.hidden):
            raise ValueError(f"alignment.hidden widths must be >= 1, got {self.hidden}")
        for name in ("n_components", "n_neighbors", "epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"alignment.{name} must be >= 1, got {getattr(self, name)}")
        if not self.alignment_weight >= 0:
            raise ValueError(f"alignment.alignment_weight must be >= 0, got {self.alignment_weight}")
        if not self.learning_rate > 0:
            raise ValueError(f"alignment.learning_rate must be > 0, got {self.learning_rate}")


class AlignmentNet(nnx.Module):
    """One MLP per view: view v (m, d_v) -> Y~^(v) (m, k), before its orthogonalization."""

    def __init__(self, view_dims: Sequence[int], hidden: Sequence[int], n_components: int, *, rngs: nnx.Rngs):
        self.view_dims = tuple(int(d) for d in view_dims)
        self.view_nets = nnx.List(
            [
                MLP(
                    d,
                    tuple(hidden),
                    n_components,
                    hidden_act=activation("leaky_relu"),
                    out_act=activation("none"),
                    rngs=rngs,
                )
                for d in self.view_dims
            ]
        )

    def __call__(self, views: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        """V arrays (m, d_v) -> V arrays (m, k)."""
        chex.assert_equal(len(views), len(self.view_nets))
        return tuple(net(x) for net, x in zip(self.view_nets, views))


def alignment_loss(
    y_tilde: Sequence[jax.Array], views: Sequence[jax.Array], *, n_neighbors: int, alignment_weight: float
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The batch loss from the raw view outputs (orthogonalized here, gradient through R_v^-1).

    y_tilde: V arrays (m, k); views: V arrays (m, d_v) for the affinities.
    Returns (loss (), {"spectral": (), "alignment": ()}).
    """
    chex.assert_equal(len(y_tilde), len(views))
    m = y_tilde[0].shape[0]
    ys = [y @ orthonormalizer(y) for y in y_tilde]
    spectral = cast(
        jax.Array,
        sum(2.0 * rayleigh_trace(y, knn_gaussian_affinity(x, n_neighbors, None)) / (m * m) for y, x in zip(ys, views)),
    )
    align = sum(
        (jnp.mean(jnp.sum((ys[v] - ys[u]) ** 2, axis=1)) for v in range(len(ys)) for u in range(v + 1, len(ys))),
        jnp.zeros(()),
    )
    return spectral + alignment_weight * align, {"spectral": spectral, "alignment": align}


@partial(jax.jit, donate_argnums=0, static_argnames=("n_neighbors", "alignment_weight"))
def _train_step(
    state: NetState, views: tuple[jax.Array, ...], *, n_neighbors: int, alignment_weight: float
) -> tuple[NetState, jax.Array]:
    def loss_fn(params: nnx.State) -> jax.Array:
        y_tilde = nnx.merge(state.graphdef, params)(views)
        return alignment_loss(y_tilde, views, n_neighbors=n_neighbors, alignment_weight=alignment_weight)[0]

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return adam_update(state, grads), loss


@partial(jax.jit, static_argnames=("graphdef", "view"))
def _view_forward(graphdef: nnx.GraphDef, params: nnx.State, rows: jax.Array, view: int) -> jax.Array:
    """Y~^(v) of rows (m, d_v) -> (m, k), before R_v^-1."""
    return nnx.merge(graphdef, params).view_nets[view](rows)


def _check_views(views: Sequence[np.ndarray], view_dims: Sequence[int] | None, *, what: str) -> list[np.ndarray]:
    """float32 copies of V arrays (n, d_v); ValueError naming the view on a mismatch."""
    if isinstance(views, np.ndarray) or not isinstance(views, (list, tuple)):
        raise ValueError(f"{what}: views must be a list or tuple of (n, d_v) arrays, got {type(views).__name__}")
    if view_dims is not None and len(views) != len(view_dims):
        raise ValueError(f"{what}: expected {len(view_dims)} views, got {len(views)}")
    if view_dims is None and len(views) < 2:
        raise ValueError(f"{what}: the alignment baseline needs at least 2 views, got {len(views)}")
    arrays = []
    for v, x in enumerate(views):
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"{what}: view {v} must be 2-D (n, d_v), got shape {x.shape}")
        if view_dims is not None and x.shape[1] != view_dims[v]:
            raise ValueError(f"{what}: view {v} has {x.shape[1]} features, the model expects {view_dims[v]}")
        if x.shape[0] != np.shape(views[0])[0]:
            raise ValueError(f"{what}: view {v} has {x.shape[0]} rows, view 0 has {np.shape(views[0])[0]}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{what}: view {v} contains NaN or inf")
        arrays.append(x)
    if arrays[0].shape[0] == 0:
        raise ValueError(f"{what}: views have no rows")
    return arrays


@dataclass(frozen=True)
class AlignmentModel:
    """A trained alignment baseline: the per-view nets, each view's stored R_v^-1 (k, k), the
    per-epoch training losses."""

    state: NetState
    r_inv: tuple[np.ndarray, ...]
    config: AlignmentConfig
    view_dims: tuple[int, ...]
    losses: tuple[float, ...] = field(default=())

    def _raw_outputs(self, views: Sequence[np.ndarray]) -> list[np.ndarray]:
        views = _check_views(views, self.view_dims, what="AlignmentModel")
        return [
            apply_in_chunks(partial(_view_forward, self.state.graphdef, self.state.params, view=v), x)
            for v, x in enumerate(views)
        ]

    def view_embeddings(self, views: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """V arrays (n, d_v) -> V arrays (n, k): Y^(v) = f_v(X^(v)) R_v^-1 with the stored R_v^-1."""
        out = tuple((y @ r).astype(np.float32) for y, r in zip(self._raw_outputs(views), self.r_inv))
        chex.assert_equal_shape(out)
        return out

    def transform(self, views: Sequence[np.ndarray]) -> np.ndarray:
        """V arrays (n, d_v) -> (n, V k): the concatenated view embeddings (for evaluation)."""
        embedding = np.concatenate(self.view_embeddings(views), axis=1)
        chex.assert_shape(embedding, (None, len(self.view_dims) * self.config.n_components))
        return embedding


def train_alignment(
    views: Sequence[np.ndarray], config: AlignmentConfig, *, seed: int, progress: bool = False
) -> AlignmentModel:
    """Trains the alignment baseline on V arrays (n, d_v) (rows are samples, aligned across views).

    Mini-batches of min(batch_size, n) rows, Adam; afterwards each R_v^-1 is fitted on the whole
    training set (Y^(v)T Y^(v) = n I there).
    """
    arrays = _check_views(views, None, what="train_alignment")
    n = arrays[0].shape[0]
    m = min(config.batch_size, n)
    if m <= config.n_neighbors:
        raise ValueError(f"train_alignment: batch of {m} rows needs more than n_neighbors={config.n_neighbors}")
    if m < config.n_components:
        raise ValueError(f"train_alignment: batch of {m} rows is smaller than n_components={config.n_components}")
    view_dims = tuple(x.shape[1] for x in arrays)
    net = AlignmentNet(view_dims, config.hidden, config.n_components, rngs=nnx.Rngs(seed))
    state = create_net_state(net, config.learning_rate)
    step = partial(_train_step, n_neighbors=int(config.n_neighbors), alignment_weight=float(config.alignment_weight))
    run = run_minibatch_epochs(
        state,
        step,
        n,
        lambda idx: tuple(x[idx] for x in arrays),
        batch_size=config.batch_size,
        epochs=config.epochs,
        seed=seed,
        desc="alignment",
        progress=progress,
    )
    state, losses = run.state, run.losses
    raw = [
        apply_in_chunks(partial(_view_forward, state.graphdef, state.params, view=v), x) for v, x in enumerate(arrays)
    ]
    r_inv = tuple(np.asarray(orthonormalizer(jnp.asarray(y))) for y in raw)
    for v, r in enumerate(r_inv):
        chex.assert_shape(r, (config.n_components, config.n_components))
        if not np.all(np.isfinite(r)):
            raise FloatingPointError(f"train_alignment: R^-1 of view {v} is not finite")
    return AlignmentModel(state=state, r_inv=r_inv, config=config, view_dims=view_dims, losses=tuple(losses))
