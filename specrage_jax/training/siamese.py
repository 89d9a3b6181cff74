"""Self-supervised affinity learning (the paper's Sec. "Self-supervised Affinity Learning").

Per view, a Siamese MLP h is trained with a contrastive loss on pairs: positives are each
point's ``n_positive`` nearest neighbours, negatives as many random non-neighbours. Its codes
z = h(x) then replace x in the batch affinities: ||z_i - z_j||^2 instead of ||x_i - x_j||^2.

The neighbours are the view's own (``siamese.positives="own"``, the paper) or, with
``"joint"``, those under all views together (:func:`joint_neighbor_space`) among the samples
that have every view: each view's net then learns to place close what the views agree on, so a
sample seen through one view alone gets the neighbours its other views would have given it.
Joint pairs draw their negatives beyond each sample's median joint distance, so a net that cannot
reproduce the joint distance from its one view is not taught to push a class's members apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from specrage_jax.config import SiameseConfig
from specrage_jax.nets.netstate import (
    NetState,
    TrainedNet,
    adam_update,
    create_net_state,
)
from specrage_jax.nets.siamese import siamese_net
from specrage_jax.ops.affinity import nearest_neighbors, pairwise_sq_distances
from specrage_jax.training.pretrain import EarlyStopping, require_in_memory, run_minibatch_epochs


def contrastive_loss(z_a: jax.Array, z_b: jax.Array, is_positive: jax.Array, margin: float) -> jax.Array:
    """Mean of y d^2 + (1 - y) max(0, margin - d)^2 with d = ||z_a - z_b||. z: (p, c), y: (p,)."""
    d = jnp.sqrt(jnp.sum((z_a - z_b) ** 2, axis=1) + 1e-12)
    return jnp.mean(is_positive * d**2 + (1.0 - is_positive) * jnp.maximum(margin - d, 0.0) ** 2)


def pair_loss(
    params: nnx.State, graphdef: nnx.GraphDef, batch: tuple[jax.Array, jax.Array, jax.Array], margin: float
) -> jax.Array:
    """The contrastive loss of a batch of pairs (x_a (p, d), x_b (p, d), y (p,))."""
    x_a, x_b, is_positive = batch
    net = nnx.merge(graphdef, params)
    return contrastive_loss(net(x_a), net(x_b), is_positive, margin)


@partial(jax.jit, static_argnames="margin", donate_argnums=0)
def siamese_step(
    state: NetState, batch: tuple[jax.Array, jax.Array, jax.Array], margin: float
) -> tuple[NetState, jax.Array]:
    """One Adam step on the contrastive loss of a batch of pairs (x_a (p, d), x_b (p, d), y (p,))."""
    loss, grads = jax.value_and_grad(pair_loss)(state.params, state.graphdef, batch, margin)
    return adam_update(state, grads), loss


@partial(jax.jit, static_argnames="margin")
def siamese_loss(state: NetState, batch: tuple[jax.Array, jax.Array, jax.Array], margin: float) -> jax.Array:
    """The contrastive loss of a batch of pairs, no update (the held-out loss)."""
    return pair_loss(state.params, state.graphdef, batch, margin)


@partial(jax.jit, static_argnames="n_neighbors")
def _block_neighbors(x: jax.Array, n_neighbors: int) -> jax.Array:
    return nearest_neighbors(pairwise_sq_distances(x), n_neighbors)[1]


@partial(jax.jit, static_argnames="n_neighbors")
def _block_neighbors_and_far_rows(x: jax.Array, n_neighbors: int, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(neighbours (b, l), negatives (b, l)) of the rows of x (b, d): each row's l nearest rows,
    and l rows drawn uniformly (with replacement) among those farther from it than its median
    distance, or among all its non-neighbours where no row is."""
    b = x.shape[0]
    d2 = pairwise_sq_distances(x)
    neighbors = nearest_neighbors(d2, n_neighbors)[1]
    taken = jnp.eye(b, dtype=bool).at[jnp.arange(b)[:, None], neighbors].set(True)
    far = (d2 > jnp.median(d2, axis=1, keepdims=True)) & ~taken
    allowed = jnp.where(far.any(axis=1, keepdims=True), far, ~taken)
    counts = jnp.cumsum(allowed, axis=1)  # (b, b): allowed rows up to and including each column
    draws = jax.random.randint(key, (n_neighbors, b), 0, counts[:, -1])  # the u-th allowed row, u < count
    negatives = jax.lax.map(lambda u: jnp.sum(counts <= u[:, None], axis=1), draws)  # (l, b)
    return neighbors, negatives.T


def contrastive_pairs(
    x: np.ndarray, n_positive: int, *, seed: int, block_size: int = 8192, far_negatives: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first (p,), second (p,), is_positive (p,)) index pairs over the rows of x (n, d): the
    space whose nearest neighbours are the positives (a view, or :func:`joint_neighbor_space`).

    Neighbours are exact within random blocks of ``block_size`` rows (exact for n <= block_size;
    linear cost for millions of rows). Each point gets its ``n_positive`` nearest neighbours as
    positives and as many negatives from its block: uniformly drawn non-neighbours (the paper),
    or with ``far_negatives`` rows farther from it than its median distance in the block, so a
    negative is rarely a sample of its own group (for the joint positives: a net that cannot
    reproduce the joint distance from one view would otherwise push a class's members apart and
    split it).
    """
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    if n <= n_positive:
        raise ValueError(f"{n} samples cannot give {n_positive} positive neighbours each")
    order = rng.permutation(n)
    firsts, seconds, labels = [], [], []
    for start in range(0, n, block_size):
        block = order[start : start + block_size]
        if block.size <= n_positive + 1:  # a tiny tail block joins the previous one's geometry poorly; skip
            continue
        b = block.size
        anchors = np.repeat(np.arange(b), n_positive)
        if far_negatives:
            key = jax.random.key(int(rng.integers(2**31)))
            found = _block_neighbors_and_far_rows(jnp.asarray(x[block]), n_positive, key)
            positives, negatives = (np.asarray(a).reshape(-1) for a in found)
        else:
            neighbors = np.asarray(_block_neighbors(jnp.asarray(x[block]), n_positive))  # (b, n_positive)
            positives = neighbors.reshape(-1)
            negatives = uniform_non_neighbors(neighbors, anchors, rng)
        firsts += [block[anchors], block[anchors]]
        seconds += [block[positives], block[negatives]]
        labels += [np.ones(anchors.size, np.float32), np.zeros(anchors.size, np.float32)]
    return np.concatenate(firsts), np.concatenate(seconds), np.concatenate(labels)


def uniform_non_neighbors(neighbors: np.ndarray, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(p,) rows drawn uniformly from a block of b rows, one per anchor (p,), none of them the
    anchor or one of its neighbours (b, n_positive)."""
    b = neighbors.shape[0]
    negatives = rng.integers(0, b, size=anchors.size)
    clash = (negatives[:, None] == neighbors[anchors]).any(axis=1) | (negatives == anchors)
    while clash.any():  # redraw the few negatives that hit a neighbour or the point itself
        negatives[clash] = rng.integers(0, b, size=int(clash.sum()))
        clash = (negatives[:, None] == neighbors[anchors]).any(axis=1) | (negatives == anchors)
    return negatives


def training_row_indices(n: int, max_samples: int, *, seed: int) -> np.ndarray | None:
    """None (all n rows), or ``max_samples`` row indices drawn without replacement (seeded), sorted."""
    if max_samples < 0:
        raise ValueError(f"siamese.max_samples must be >= 0, got {max_samples}")
    if not max_samples or n <= max_samples:
        return None
    return np.sort(np.random.default_rng([seed, 1]).choice(n, max_samples, replace=False))


def training_rows(x: np.ndarray, max_samples: int, *, seed: int) -> np.ndarray:
    """x (n, d) itself, or ``max_samples`` of its rows drawn without replacement (seeded), in order."""
    keep = training_row_indices(x.shape[0], max_samples, seed=seed)
    return x if keep is None else x[keep]


def joint_neighbor_space(views: Sequence[np.ndarray], *, seed: int, sample: int = 1000) -> np.ndarray:
    """(n, sum d_v) float32: the rows of V views of the same n samples side by side, each view
    divided by its median distance between rows (a seeded sample of ``sample`` rows), so that a
    squared distance there is the sum over views of the views' squared distances, each in units
    of its own typical distance: every view counts alike whatever its width or scale."""
    n = views[0].shape[0]
    rows = np.random.default_rng([seed, 2]).choice(n, size=min(n, sample), replace=False)
    scaled = []
    for x in views:
        x = np.asarray(x, np.float32)
        d2 = np.asarray(pairwise_sq_distances(jnp.asarray(x[rows])))
        typical = float(np.sqrt(np.median(d2[np.triu_indices(len(rows), 1)]))) if len(rows) > 1 else 0.0
        scaled.append(x / typical if typical > 0 else x)
    return np.concatenate(scaled, axis=1)


@dataclass(frozen=True)
class SiameseStepAtMargin:
    """:func:`siamese_step` at a fixed ``margin`` as a callable that compares and hashes by its
    margin: the device epoch takes the step as a static argument, so every net trained at one
    margin shares the epoch's compiled scan (a new ``partial`` per net would compile it again)."""

    margin: float

    def __call__(self, state: NetState, batch: tuple[jax.Array, ...]) -> tuple[NetState, jax.Array]:
        x_a, x_b, y = batch  # a batch of pairs (x_a (p, d), x_b (p, d), y (p,))
        return siamese_step(state, (x_a, x_b, y), margin=self.margin)


def gather_pairs(arrays: tuple[jax.Array, ...], items: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A batch of device-resident pairs: arrays (rows x (n, d), first (p,), second (p,),
    is_positive (p,)) and pair indices ``items`` (m,) -> (x_a (m, d), x_b (m, d), y (m,))."""
    x, first, second, is_positive = arrays
    return x[first[items]], x[second[items]], is_positive[items]


def train_siamese(
    x: np.ndarray,
    config: SiameseConfig,
    *,
    seed: int,
    progress: bool = False,
    name: str = "view",
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    on_device: bool = False,
) -> TrainedNet:
    """Trains one view's Siamese net on pairs of its training rows x (n, d), stopping early once
    the loss of held-out pairs stops improving (``config.patience``).

    By default the pairs are each row's nearest neighbours in x (:func:`contrastive_pairs`), on
    only ``config.max_samples`` seeded random rows when set (pairs cost n * 2 * n_positive forward
    pairs per epoch, so 56k-row MNIST views need a subsample on a CPU). Given ``pairs`` (first,
    second, is_positive) index x as it is: the caller has drawn the rows. ``on_device``: the rows
    and the pair indices are copied to the device once and every epoch is one compiled scan that
    gathers its pairs there (``train.data_on_device``).

    Raises:
      ValueError: ``on_device`` with x streamed from disk (not an array in memory).
    """
    if on_device:
        require_in_memory(x, name)
    if pairs is None:
        x = training_rows(x, config.max_samples, seed=seed)
        pairs = contrastive_pairs(x, config.n_positive, seed=seed, block_size=config.pair_block)
    first, second, is_positive = pairs
    state = create_net_state(siamese_net(x.shape[1], config, seed=seed), config.learning_rate)
    run = run_minibatch_epochs(
        state,
        SiameseStepAtMargin(float(config.margin)),
        first.size,
        lambda idx: (x[first[idx]], x[second[idx]], is_positive[idx]),
        batch_size=config.batch_size,
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        seed=seed,
        desc=f"siamese {name}",
        progress=progress,
        loss=partial(siamese_loss, margin=config.margin),
        stopping=EarlyStopping(config.patience, config.min_delta),
        device_arrays=(x, first, second, is_positive) if on_device else None,
        gather=gather_pairs,
    )
    return TrainedNet(state=run.state, losses=tuple(run.losses), held_out_losses=tuple(run.held_out_losses))
