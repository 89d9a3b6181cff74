"""The SpecRaGE training state (networks, R^-1, the optimizer, view scales) and inference with it.

:class:`SpecRaGEState` is what the jitted steps (:mod:`specrage_jax.training.steps`) take and
return; :func:`embed_batch` embeds one batch with the stored R^-1 and output map (``nets.embed.embed``
embeds any number of rows in batches).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from chex import ArrayTree  # noqa: F401  # pdoc resolves optax.OptState (chex's self-referencing ArrayTree) here
from flax import nnx, struct

from specrage_jax.config import ExperimentConfig, GraphConfig, ModelConfig, OrthoConfig, TrainConfig, unresolved_message
from specrage_jax.nets.model import OrthoWeight, SpecRaGENet

DEFAULT_LEARNING_RATE = TrainConfig().learning_rate  # the default Adam's rate, as a configuration's


@struct.dataclass
class SpecRaGEState:
    """Everything that training changes, plus the static pieces the steps need.

    Array fields: ``step`` (), ``params`` (nnx.Param state), ``ortho`` (the R^-1
    ``OrthoWeight`` state), ``opt_state`` (the state of ``tx``), ``view_scales`` (V,) global
    Gaussian scales sigma_v (unused when ``graph.scale_mode == 'batch'``), ``output_map`` (k, k) the
    map P of the output Y -> Y P fitted after training (``model.output_scaling``; the identity
    until then, and in models saved before it existed). The static fields (graphdef,
    the frozen configs and the optimizer ``tx``) compare by value (``tx`` by identity), so equal
    setups share compiles.
    """

    step: jax.Array
    params: nnx.State
    ortho: nnx.State
    opt_state: optax.OptState
    view_scales: jax.Array
    output_map: jax.Array  # the last array field: models pickled before it existed restore without it
    graphdef: nnx.GraphDef = struct.field(pytree_node=False)
    graph: GraphConfig = struct.field(pytree_node=False)
    ortho_config: OrthoConfig = struct.field(pytree_node=False)
    tx: optax.GradientTransformation = struct.field(pytree_node=False)

    if TYPE_CHECKING:

        def replace(self, **updates: Any) -> SpecRaGEState: ...  # added by flax struct.dataclass

    @property
    def r_inv(self) -> jax.Array:
        """The stored R^-1, (k, k)."""
        return cast(jax.Array, self.ortho["r_inv"][...])

    @property
    def learning_rate(self) -> float | None:
        """The optimizer's learning rate where it is a hyperparameter in its state (the default
        Adam, or any optimizer built with ``optax.inject_hyperparams``); None for an optimizer that
        keeps its rate to itself."""
        rate = injected_learning_rate(self.opt_state)
        return None if rate is None else float(rate)

    def with_learning_rate(self, learning_rate: float) -> SpecRaGEState:
        """The state with the optimizer's injected learning rate set (the plateau schedule's way
        of changing it between steps without recompiling).

        Raises:
          ValueError: the optimizer holds no injected learning rate.
        """
        if injected_learning_rate(self.opt_state) is None:
            raise ValueError(
                "the optimizer holds no learning rate to set: build it with "
                "optax.inject_hyperparams(...)(learning_rate=...) to let the plateau schedule change it"
            )
        rate = jnp.asarray(learning_rate, jnp.float32)
        return self.replace(opt_state=optax.tree_utils.tree_set(self.opt_state, learning_rate=rate))

    def apply_gradients(self, grads: nnx.State, *, frozen_view_nets: bool = False) -> SpecRaGEState:
        """One update of the parameters by ``tx`` (the step counter advances; R^-1 is unchanged).
        ``frozen_view_nets``: the view nets' updates are dropped (whatever ``tx`` makes of their
        zero gradients: momentum, weight decay), so only the fusion's parameters move."""
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        if frozen_view_nets:
            updates = jax.tree_util.tree_map_with_path(
                lambda path, u: jnp.zeros_like(u) if in_view_nets(path) else u, updates
            )
        params = optax.apply_updates(self.params, updates)
        return self.replace(step=self.step + 1, params=params, opt_state=opt_state)

    def model(self) -> SpecRaGENet:
        """The NNX module with this state's parameters and R^-1 (for inspection)."""
        return nnx.merge(self.graphdef, self.params, self.ortho)


VIEW_NETS = "view_nets"  # the parameters' subtree of the per-view MLPs (SpecRaGENet.view_nets)


def in_view_nets(path: tuple[Any, ...]) -> bool:
    """Whether a parameter's pytree path (``jax.tree_util`` keys) lies in the view nets."""
    return bool(path) and getattr(path[0], "key", None) == VIEW_NETS


def injected_learning_rate(opt_state: optax.OptState) -> jax.Array | None:
    """The ``learning_rate`` hyperparameter in an optimizer state (None when there is none).

    Raises:
      ValueError: the state holds several (the plateau schedule could not tell which to drive).
    """
    try:
        return cast("jax.Array | None", optax.tree_utils.tree_get(opt_state, "learning_rate"))
    except KeyError:
        raise ValueError(
            "the optimizer holds several injected learning rates; the plateau schedule drives one: "
            "inject the rate of one transformation only"
        ) from None


def optimizer_learning_rate(tx: optax.GradientTransformation) -> float | None:
    """The learning rate an optimizer starts at where it holds it as an injected hyperparameter
    (read from a fresh state of ``tx``, as float32 holds it, in its shortest decimal form); None
    for an optimizer that keeps its rate to itself.

    Raises:
      ValueError: ``tx`` holds several injected learning rates.
    """
    rate = injected_learning_rate(tx.init({}))
    return None if rate is None else float(str(np.float32(rate)))


@functools.cache
def adam_optimizer() -> optax.GradientTransformation:
    """The default optimizer: Adam with the learning rate held in its state
    (``inject_hyperparams``), so the plateau schedule changes it between steps without
    recompiling. One instance for the process: the optimizer is a static field of the state, so
    states built with it share compiled steps (its rate lives in the state, set by
    :func:`create_state`)."""
    return optax.inject_hyperparams(optax.adam)(learning_rate=DEFAULT_LEARNING_RATE)


def check_resolved(model_config: ModelConfig, graph_config: GraphConfig) -> None:
    """Refuses the settings that mean "from the data" (model.n_components -1, model.view_hidden
    (0,), graph.n_neighbors 0) or "the number of classes" (model.n_components 0): a network and
    its graph need numbers.

    Raises:
      ValueError: naming the first such setting and how to resolve it.
    """
    pending = ExperimentConfig(model=model_config, graph=graph_config).unresolved_fields()
    for name in ("model.n_components", "model.view_hidden", "graph.n_neighbors", "graph.degree_normalization"):
        if name in pending:
            raise ValueError(unresolved_message(name))
    if model_config.n_components == 0:
        raise ValueError(
            "model.n_components=0 means 'the number of classes', which only SpecRaGE.fit and `specrage train` "
            "fill in: give a value (e.g. ModelConfig(n_components=10))"
        )


def create_state(
    view_dims: Sequence[int],
    model_config: ModelConfig,
    graph_config: GraphConfig,
    ortho_config: OrthoConfig,
    *,
    seed: int,
    learning_rate: float | None = None,
    tx: optax.GradientTransformation | None = None,
    view_scales: Sequence[float] | np.ndarray | None = None,
) -> SpecRaGEState:
    """A fresh training state: initialized networks, R^-1 = I, and the optimizer's state.

    The optimizer is ``tx`` (any ``optax.GradientTransformation``), or by default Adam at
    ``learning_rate`` (default ``TrainConfig().learning_rate``). The training loop's plateau
    schedule lowers the learning rate where the optimizer holds it as a hyperparameter (the
    default Adam; for ``tx``, build it with ``optax.inject_hyperparams``); an optimizer that keeps
    its rate to itself (``optax.adamw(1e-3)``, or one with an optax schedule) trains at its own
    rate and the plateau schedule leaves it alone.

    Raises:
      ValueError: both ``learning_rate`` and ``tx`` given (the rate belongs inside ``tx``); a
        setting that means "from the data" (:func:`check_resolved`); ``graph.scale_mode='global'``
        without ``view_scales``; a scale that is not positive.
    """
    if tx is not None and learning_rate is not None:
        raise ValueError(
            "create_state takes learning_rate (for the default Adam) or tx (holding its own rate), not both"
        )
    check_resolved(model_config, graph_config)
    if graph_config.scale_mode == "global" and view_scales is None:
        raise ValueError(
            "graph.scale_mode='global' needs view_scales (see specrage_jax.training.loop.estimate_view_scales), "
            "or use graph.scale_mode='batch'"
        )
    if view_scales is not None and not all(float(s) > 0 for s in view_scales):
        raise ValueError(f"view_scales must be positive, got {list(map(float, view_scales))}")
    model = SpecRaGENet(view_dims, model_config, rngs=nnx.Rngs(seed))
    graphdef, params, ortho = cast(tuple[nnx.GraphDef, nnx.State, nnx.State], nnx.split(model, nnx.Param, OrthoWeight))
    scales = jnp.ones((len(view_dims),), jnp.float32) if view_scales is None else jnp.asarray(view_scales, jnp.float32)
    chex.assert_shape(scales, (len(view_dims),))
    optimizer = adam_optimizer() if tx is None else tx
    state = SpecRaGEState(
        step=jnp.zeros((), jnp.int32),
        params=params,
        ortho=ortho,
        opt_state=optimizer.init(params),
        view_scales=scales,
        output_map=jnp.eye(ortho["r_inv"].shape[0], dtype=jnp.float32),
        graphdef=graphdef,
        graph=graph_config,
        ortho_config=ortho_config,
        tx=optimizer,
    )
    if tx is not None:
        injected_learning_rate(state.opt_state)  # several injected rates: refused here, not at the first epoch
        return state
    return state.with_learning_rate(DEFAULT_LEARNING_RATE if learning_rate is None else learning_rate)


@jax.jit
def embed_batch(
    state: SpecRaGEState, views: tuple[jax.Array, ...], mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """(Y P (m, k), alpha (m, V)) for a batch of samples: the output Y = Y~ R^-1 with the stored
    R^-1, through the stored output map P (``state.output_map``).

    ``mask`` (m, V) bool, True = view present: a missing view's rows are zeroed before the
    networks (they may hold NaN) and its weight is 0, the others renormalized. Every row
    needs at least one present view. None: all present.
    """
    y, _, alpha = embed_batch_outputs(state, views, mask)
    return y, alpha


@jax.jit
def embed_batch_outputs(
    state: SpecRaGEState, views: tuple[jax.Array, ...], mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(Y P, Y as trained (orthogonal), alpha) of a batch: :func:`embed_batch` with the output
    before the output map too (what the health check reads)."""
    y, alpha = nnx.merge(state.graphdef, state.params, state.ortho).embedding(views, mask)
    return y @ state.output_map, y, alpha
