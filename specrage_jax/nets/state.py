"""The SpecRaGE training state (networks, R^-1, Adam, view scales) and inference with it.

:class:`SpecRaGEState` is what the jitted steps (:mod:`specrage_jax.training.steps`) take and
return; :func:`predict` embeds a batch with the stored R^-1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from chex import ArrayTree  # noqa: F401  # pdoc resolves optax.OptState (chex's self-referencing ArrayTree) here
from flax import nnx, struct

from specrage_jax.config import GraphConfig, ModelConfig, OrthoConfig
from specrage_jax.nets.model import OrthoWeight, SpecRaGENet


@struct.dataclass
class SpecRaGEState:
    """Everything that training changes, plus the static pieces the steps need.

    Array fields: ``step`` (), ``params`` (nnx.Param state), ``ortho`` (the R^-1
    ``OrthoWeight`` state), ``opt_state`` (Adam, learning rate injected), ``view_scales`` (V,)
    global Gaussian scales sigma_v (unused when ``graph.scale_mode == 'batch'``). The static
    fields (graphdef and the frozen configs) compare by value, so equal setups share compiles.
    """

    step: jax.Array
    params: nnx.State
    ortho: nnx.State
    opt_state: optax.OptState
    view_scales: jax.Array
    graphdef: nnx.GraphDef = struct.field(pytree_node=False)
    graph: GraphConfig = struct.field(pytree_node=False)
    ortho_config: OrthoConfig = struct.field(pytree_node=False)

    if TYPE_CHECKING:

        def replace(self, **updates: Any) -> SpecRaGEState: ...  # added by flax struct.dataclass

    @property
    def r_inv(self) -> jax.Array:
        """The stored R^-1, (k, k)."""
        return cast(jax.Array, self.ortho["r_inv"][...])

    @property
    def learning_rate(self) -> float:
        return float(self.opt_state.hyperparams["learning_rate"])

    def with_learning_rate(self, learning_rate: float) -> SpecRaGEState:
        hyper = dict(self.opt_state.hyperparams, learning_rate=jnp.asarray(learning_rate, jnp.float32))
        return self.replace(opt_state=self.opt_state._replace(hyperparams=hyper))

    def model(self) -> SpecRaGENet:
        """The NNX module with this state's parameters and R^-1 (for inspection)."""
        return nnx.merge(self.graphdef, self.params, self.ortho)


def adam_optimizer() -> optax.GradientTransformation:
    """Adam with the learning rate held in its state (``inject_hyperparams``), so the plateau
    schedule changes it between steps without recompiling. Built afresh where needed: it is a
    pair of pure functions, and keeping it out of the state's static fields lets states with
    equal configurations share compiled steps."""
    return optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)


def create_state(
    view_dims: Sequence[int],
    model_config: ModelConfig,
    graph_config: GraphConfig,
    ortho_config: OrthoConfig,
    *,
    learning_rate: float,
    seed: int,
    view_scales: Sequence[float] | np.ndarray | None = None,
) -> SpecRaGEState:
    """A fresh training state: initialized networks, R^-1 = I, Adam at ``learning_rate``."""
    if graph_config.scale_mode == "global" and view_scales is None:
        raise ValueError(
            "graph.scale_mode='global' needs view_scales (see train.estimate_view_scales), "
            "or use graph.scale_mode='batch'"
        )
    if view_scales is not None and not all(float(s) > 0 for s in view_scales):
        raise ValueError(f"view_scales must be positive, got {list(map(float, view_scales))}")
    model = SpecRaGENet(view_dims, model_config, rngs=nnx.Rngs(seed))
    graphdef, params, ortho = cast(tuple[nnx.GraphDef, nnx.State, nnx.State], nnx.split(model, nnx.Param, OrthoWeight))
    scales = jnp.ones((len(view_dims),), jnp.float32) if view_scales is None else jnp.asarray(view_scales, jnp.float32)
    chex.assert_shape(scales, (len(view_dims),))
    state = SpecRaGEState(
        step=jnp.zeros((), jnp.int32),
        params=params,
        ortho=ortho,
        opt_state=adam_optimizer().init(params),
        view_scales=scales,
        graphdef=graphdef,
        graph=graph_config,
        ortho_config=ortho_config,
    )
    return state.with_learning_rate(learning_rate)


@jax.jit
def predict(
    state: SpecRaGEState, views: tuple[jax.Array, ...], mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """(Y (m, k), alpha (m, V)) for a batch of samples, with the stored R^-1.

    ``mask`` (m, V) bool, True = view present: a missing view's rows are zeroed before the
    networks (they may hold NaN) and its weight is 0, the others renormalized. Every row
    needs at least one present view. None: all present.
    """
    return nnx.merge(state.graphdef, state.params, state.ortho)(views, mask)
