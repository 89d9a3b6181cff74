"""The jitted training and inference steps.

Training alternates two pure functions on different mini-batches (Algorithm 1 and the
appendix's "Training with Orthogonalization Layer"):

* ``ortho_step(state, batch) -> state``: forward the batch, QR of its fused output Y~, store
  R^-1. Only R^-1 changes.
* ``grad_step(state, batch) -> (state, metrics)``: Eq. 4 on another batch with R^-1 held
  constant (``stop_gradient``, as in the original SpectralNet), an update of the parameters by
  the state's optimizer (``state.tx``: Adam by default, any optax transformation).
  R^-1 never changes.

Both are ``jax.jit``-compiled with the state donated; the NNX module is split once into
(graphdef, params, ortho) and merged inside, which costs far less per call than ``nnx.jit``.

The batch's objective (its graphs and Eq. 4 over them) is :mod:`specrage_jax.ops.objective`;
this module adds the state: the fusion, R^-1, the view dropout's random stream and the updates.
"""

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from specrage_jax.nets.state import SpecRaGEState, in_view_nets
from specrage_jax.ops.agreement import aligned_objective
from specrage_jax.ops.objective import EdgeGraph, batch_graph, spectral_objective
from specrage_jax.ops.ortho import orthonormalizer

# The view dropout's random stream: folded with the step count, so every run (and a resumed one)
# draws the same sequence; the seed of a run already varies its batches and initialization.
VIEW_DROPOUT_KEY = 0


class Batch(NamedTuple):
    """One mini-batch: V arrays (m, d_v) for the networks, and the affinity inputs.

    ``codes`` are what the kNN graph is built on (raw views, or Siamese codes); None means
    the views themselves. ``ortho_views`` is the batch the current R^-1 was fitted on; a
    grad_step needs it only with ``OrthoConfig.grad_through_r_inv`` (the published PyTorch
    code's semantics), to differentiate R^-1(theta) at the same value the state holds.
    ``affinities`` (V, m, m) or an :class:`EdgeGraph`, when given, are the batch's W^(v)
    computed beforehand (they do not depend on the parameters): a batch used for many steps
    builds its graph once.
    ``mask`` (m, V) bool, True where the sample has the view, marks missing views (their rows
    hold zeros): each view's graph is built among its present rows, its loss term is a mean over
    its present pairs, and a sample's fusion uses its present views. None: every view present
    (the complete-data computation, unchanged). ``ortho_mask`` is ``ortho_views``' mask.
    """

    views: tuple[jax.Array, ...]
    codes: tuple[jax.Array, ...] | None = None
    ortho_views: tuple[jax.Array, ...] | None = None
    affinities: jax.Array | EdgeGraph | None = None
    mask: jax.Array | None = None
    ortho_mask: jax.Array | None = None

    @property
    def affinity_inputs(self) -> tuple[jax.Array, ...]:
        return self.views if self.codes is None else self.codes


def one_view_kept_at_random(mask: jax.Array, rate: float, key: jax.Array) -> jax.Array:
    """The view dropout of training: mask (m, V) bool -> (m, V), where each sample with two or
    more views keeps, with probability ``rate``, one of them (uniform over its views) and loses
    the rest; other samples keep their mask."""
    chex.assert_rank(mask, 2)
    draw_key, view_key = jax.random.split(key)
    dropped = (jax.random.uniform(draw_key, mask.shape[:1]) < rate) & (jnp.sum(mask, axis=1) >= 2)
    scores = jnp.where(mask, jax.random.uniform(view_key, mask.shape), -1.0)
    kept = jax.nn.one_hot(jnp.argmax(scores, axis=1), mask.shape[1], dtype=bool)
    return jnp.where(dropped[:, None], kept, mask)


def loss_fusion_mask(state: SpecRaGEState, mask: jax.Array | None) -> jax.Array | None:
    """The views a gradient batch's fused output is taken from (``graph.view_dropout``): where
    views are missing, a share of the samples with several views is fused from one of them, drawn
    anew each step from the step count (so a resumed run draws the same); their graph edges and
    weights stay. None (complete data) or a rate of 0: no fusion mask."""
    rate = state.graph.view_dropout
    if mask is None or rate == 0:
        return None
    return one_view_kept_at_random(mask, rate, jax.random.fold_in(jax.random.key(VIEW_DROPOUT_KEY), state.step))


def _fuse(
    state: SpecRaGEState, params: nnx.State, views: Sequence[jax.Array], mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    return nnx.merge(state.graphdef, params, state.ortho).fuse(views, mask)


def _fuse_for_loss(
    state: SpecRaGEState, params: nnx.State, batch: Batch, outputs: jax.Array | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(Y~ of every present view, Y~ the loss takes, alpha (m, V)) of a gradient batch: the two
    outputs differ only under the view dropout (:func:`loss_fusion_mask`); one pass of the nets.
    ``outputs`` (V, m, k): the view nets' outputs on this batch, computed before (frozen view
    nets, :func:`frozen_view_outputs`); then only the fusion runs."""
    model = nnx.merge(state.graphdef, params, state.ortho)
    if outputs is None:
        outputs = model.present_view_outputs(batch.views, batch.mask)
    y_tilde, alpha = model.fuse_outputs(batch.views, outputs, batch.mask)
    fusion_mask = loss_fusion_mask(state, batch.mask)
    if fusion_mask is None:
        return y_tilde, y_tilde, alpha
    return y_tilde, model.fuse_outputs(batch.views, outputs, fusion_mask)[0], alpha


def view_nets_held(params: nnx.State) -> nnx.State:
    """``params`` with the view nets' leaves held constant (``stop_gradient``): their gradient is
    zero and no backward pass runs through them (``train.view_net_steps``)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, x: jax.lax.stop_gradient(x) if in_view_nets(path) else x, params
    )


@jax.jit
def frozen_view_outputs(state: SpecRaGEState, batch: Batch) -> jax.Array:
    """The view nets' outputs Y^(v) (V, m, k) on a batch, as the fusion takes them (missing rows
    zeroed first): computed once where the view nets are frozen and the batch is fixed."""
    return nnx.merge(state.graphdef, state.params, state.ortho).present_view_outputs(batch.views, batch.mask)


def _fit_r_inv(
    state: SpecRaGEState, params: nnx.State, views: Sequence[jax.Array], mask: jax.Array | None = None
) -> jax.Array:
    y_tilde, _ = _fuse(state, params, views, mask)
    cfg = state.ortho_config
    return orthonormalizer(y_tilde, convention=cfg.convention, rank_tol=cfg.rank_tol, refine=cfg.refine)


def _r_inv_for_loss(state: SpecRaGEState, params: nnx.State, batch: Batch) -> jax.Array:
    """The stored R^-1, either as a constant (the TensorFlow SpectralNet) or, with
    ``grad_through_r_inv``, recomputed from ``batch.ortho_views`` so that the gradient sees
    how R^-1 depends on the parameters (the published PyTorch code). Its value is the same."""
    if not state.ortho_config.grad_through_r_inv:
        return jax.lax.stop_gradient(state.r_inv)
    if batch.ortho_views is None:
        raise ValueError("ortho.grad_through_r_inv needs the orthogonalization batch: pass Batch(ortho_views=...)")
    return _fit_r_inv(state, params, batch.ortho_views, batch.ortho_mask)


def spectral_loss(
    state: SpecRaGEState, params: nnx.State, batch: Batch, r_inv: jax.Array, *, view_dropout: bool = False
) -> tuple[jax.Array, jax.Array]:
    """(Eq. 4 loss, alpha (m, V)) of a batch orthogonalized by ``r_inv`` (k, k).

    With ``graph.weight_balance`` / ``graph.weight_entropy`` > 0 the view-weight regularizers of
    :mod:`specrage_jax.ops.weights` are added (both 0 by default: the loss is Eq. 4 exactly), and
    with ``graph.view_alignment`` > 0 the views' disagreement with the fused output
    (:func:`~specrage_jax.ops.agreement.aligned_objective`). ``view_dropout`` (the gradient
    steps) fuses as :func:`loss_fusion_mask` says; validation measures every sample through all
    its views."""
    strength = state.graph.view_alignment
    if strength == 0:  # the paper's form: Eq. 4 of the fused output alone
        if view_dropout:
            _, y_tilde, alpha = _fuse_for_loss(state, params, batch)
        else:
            y_tilde, alpha = _fuse(state, params, batch.views, batch.mask)
        return loss_of_fused(state, batch, y_tilde @ r_inv, alpha), alpha
    outputs = nnx.merge(state.graphdef, params, state.ortho).present_view_outputs(batch.views, batch.mask)
    y_all, y_dropped, alpha = _fuse_for_loss(state, params, batch, outputs)
    loss = loss_of_fused(state, batch, (y_dropped if view_dropout else y_all) @ r_inv, alpha)
    return aligned_objective(loss, outputs @ r_inv, y_all @ r_inv, strength, batch.mask), alpha


def loss_of_fused(state: SpecRaGEState, batch: Batch, y: jax.Array, alpha: jax.Array) -> jax.Array:
    """Eq. 4 (plus the optional view-weight regularizers) of the orthogonalized output y (m, k):
    :func:`~specrage_jax.ops.objective.spectral_objective` over the batch's graphs (built here
    from its affinity inputs unless given)."""
    affinities = batch.affinities
    if affinities is None:
        affinities = batch_graph(batch.affinity_inputs, state.view_scales, state.graph, batch.mask)
    return spectral_objective(y, alpha, affinities, state.graph, batch.mask)


def _with_r_inv(state: SpecRaGEState, r_inv: jax.Array) -> SpecRaGEState:
    return state.replace(ortho=jax.tree.map(lambda _: r_inv, state.ortho))


@partial(jax.jit, donate_argnums=0)
def ortho_step(state: SpecRaGEState, batch: Batch) -> SpecRaGEState:
    """Updates R^-1 from the QR of this batch's fused output; nothing else changes."""
    return _with_r_inv(state, _fit_r_inv(state, state.params, batch.views, batch.mask))


def loss_and_grads(
    state: SpecRaGEState, batch: Batch, *, frozen_view_nets: bool = False
) -> tuple[tuple[jax.Array, jax.Array], nnx.State]:
    """((Eq. 4 loss, alpha (m, V)), d loss / d params) as grad_step uses them (jit-able, pure).
    ``frozen_view_nets``: the view nets' gradient is zero (:func:`view_nets_held`)."""

    def loss_fn(params: nnx.State) -> tuple[jax.Array, jax.Array]:
        if frozen_view_nets:
            params = view_nets_held(params)
        return spectral_loss(state, params, batch, _r_inv_for_loss(state, params, batch), view_dropout=True)

    return jax.value_and_grad(loss_fn, has_aux=True)(state.params)


@partial(jax.jit, donate_argnums=0)
def grad_step(state: SpecRaGEState, batch: Batch) -> tuple[SpecRaGEState, dict[str, Any]]:
    """One step of the state's optimizer (``state.tx``) on Eq. 4 with R^-1 fixed. Returns the new
    state and scalar metrics."""
    (loss, alpha), grads = loss_and_grads(state, batch)
    return _apply_gradients(state, grads), _step_metrics(loss, alpha, grads)


def _apply_gradients(state: SpecRaGEState, grads: nnx.State, frozen_view_nets: bool = False) -> SpecRaGEState:
    return state.apply_gradients(grads, frozen_view_nets=frozen_view_nets)  # the state's optimizer (state.tx)


def _step_metrics(loss: jax.Array, alpha: jax.Array, grads: nnx.State) -> dict[str, Any]:
    return {"loss": loss, "grad_norm": optax.global_norm(grads), "view_weights": jnp.mean(alpha, axis=0)}


@partial(jax.jit, donate_argnums=0, static_argnames="frozen_view_nets")
def train_step(
    state: SpecRaGEState, ortho_batch: Batch, grad_batch: Batch, frozen_view_nets: bool = False
) -> tuple[SpecRaGEState, dict[str, Any]]:
    """``ortho_step(ortho_batch)`` then ``grad_step(grad_batch)`` as one compiled call.

    The result equals the two steps in sequence; with ``grad_through_r_inv`` the forward pass
    of the ortho batch is shared (the gradient step differentiates the same R^-1 the ortho step
    stores), which saves one forward pass per iteration. The training loop uses this.
    ``frozen_view_nets``: only the fusion's parameters (and R^-1) change; the view nets are
    constants of the step (``train.view_net_steps``).
    """
    if not state.ortho_config.grad_through_r_inv:
        state = _with_r_inv(state, _fit_r_inv(state, state.params, ortho_batch.views, ortho_batch.mask))
        (loss, alpha), grads = loss_and_grads(state, grad_batch, frozen_view_nets=frozen_view_nets)
        return _apply_gradients(state, grads, frozen_view_nets), _step_metrics(loss, alpha, grads)

    def loss_fn(params: nnx.State) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        if frozen_view_nets:
            params = view_nets_held(params)
        r_inv = _fit_r_inv(state, params, ortho_batch.views, ortho_batch.mask)
        loss, alpha = spectral_loss(state, params, grad_batch, r_inv, view_dropout=True)
        return loss, (alpha, r_inv)

    (loss, (alpha, r_inv)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = _with_r_inv(state, jax.lax.stop_gradient(r_inv))
    return _apply_gradients(state, grads, frozen_view_nets), _step_metrics(loss, alpha, grads)


@partial(jax.jit, donate_argnums=0)
def full_batch_step(state: SpecRaGEState, batch: Batch) -> tuple[SpecRaGEState, dict[str, Any]]:
    """``train_step(state, batch, batch)``: the orthogonalization and the gradient step on the
    same batch (the whole training set, when it fits one step), with one forward pass.

    R^-1 comes from this batch's QR and the loss is taken on the same fused output, so the
    gradient sees R^-1(theta) with ``grad_through_r_inv`` and a constant otherwise, as in
    :func:`train_step`. Pass ``batch.affinities`` to build the graph once for all steps.
    """
    return _full_batch_update(state, batch)


@partial(jax.jit, static_argnames="steps", donate_argnums=0)
def full_batch_epoch(
    state: SpecRaGEState, batch: Batch, steps: int, outputs: jax.Array | None = None
) -> tuple[SpecRaGEState, dict[str, jax.Array]]:
    """``steps`` :func:`full_batch_step` updates on the same batch as one compiled ``lax.scan``
    (one dispatch instead of ``steps``); (state, {"loss": (steps,), "view_weights": (steps, V)}).

    ``outputs`` (V, m, k), the frozen view nets' outputs on the batch (:func:`frozen_view_outputs`):
    the view nets do not run and do not change; the fusion's parameters and R^-1 train on them."""

    def one_step(carry: SpecRaGEState, _: None) -> tuple[SpecRaGEState, dict[str, jax.Array]]:
        carry, metrics = _full_batch_update(carry, batch, outputs)
        return carry, {"loss": metrics["loss"], "view_weights": metrics["view_weights"]}

    return jax.lax.scan(one_step, state, None, length=steps)


def _full_batch_update(
    state: SpecRaGEState, batch: Batch, outputs: jax.Array | None = None
) -> tuple[SpecRaGEState, dict[str, Any]]:
    """The body of :func:`full_batch_step` (traced inside a jit); ``outputs``: see
    :func:`full_batch_epoch`."""

    def loss_fn(params: nnx.State) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        # R^-1 from every present view; the loss on the fusion the view dropout leaves (the same
        # output when it is off)
        per_view = outputs
        if per_view is None and state.graph.view_alignment != 0:  # one pass of the nets serves both terms
            per_view = nnx.merge(state.graphdef, params, state.ortho).present_view_outputs(batch.views, batch.mask)
        y_tilde, y_for_loss, alpha = _fuse_for_loss(state, params, batch, per_view)
        cfg = state.ortho_config
        r_inv = orthonormalizer(y_tilde, convention=cfg.convention, rank_tol=cfg.rank_tol, refine=cfg.refine)
        if not cfg.grad_through_r_inv:
            r_inv = jax.lax.stop_gradient(r_inv)
        loss = loss_of_fused(state, batch, y_for_loss @ r_inv, alpha)
        if per_view is None or state.graph.view_alignment == 0:
            return loss, (alpha, r_inv)
        aligned = aligned_objective(loss, per_view @ r_inv, y_tilde @ r_inv, state.graph.view_alignment, batch.mask)
        return aligned, (alpha, r_inv)

    (loss, (alpha, r_inv)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = _with_r_inv(state, jax.lax.stop_gradient(r_inv))
    return _apply_gradients(state, grads, outputs is not None), _step_metrics(loss, alpha, grads)


@jax.jit
def rayleigh_matrices(state: SpecRaGEState, batch: Batch) -> tuple[jax.Array, jax.Array]:
    """(Y^T L Y, Y^T Y), (k, k) each, of a batch's output Y = Y~ R^-1 with the stored R^-1: L is
    the Laplacian that Eq. 4 (as configured: weights in the affinity, missing views, edge lists)
    puts on this batch, up to a constant factor. Eq. 4 is a quadratic form in Y, f(Y) = c tr(Y^T L Y),
    so Y^T (df/dY) / 2 = c Y^T L Y: its gradient gives the matrix without forming L."""
    y_tilde, alpha = _fuse(state, state.params, batch.views, batch.mask)
    return rayleigh_matrices_at(state, batch, y_tilde @ state.r_inv, alpha)


def rayleigh_matrices_at(
    state: SpecRaGEState, batch: Batch, x: jax.Array, alpha: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(X^T L X, X^T X), (p, p) each, for any (m, p) stand-in X of the orthogonalized output of the
    batch (view weights ``alpha`` (m, V)): L as :func:`rayleigh_matrices` reads it, from the
    gradient of Eq. 4 at X (``loss_of_fused``), which is linear in X."""
    slope = jax.grad(lambda out: loss_of_fused(state, batch, out, alpha))(x)
    quadratic = x.T @ slope / 2
    return (quadratic + quadratic.T) / 2, x.T @ x


@jax.jit
def eval_loss(state: SpecRaGEState, batch: Batch) -> jax.Array:
    """Eq. 4 of a batch with the stored R^-1 (for validation); no update."""
    return spectral_loss(state, state.params, batch, state.r_inv)[0]
