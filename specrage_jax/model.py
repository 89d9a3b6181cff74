"""The SpecRaGE network in Flax NNX.

    views --ViewNet_v--> Y^(v) (m, k)            one MLP per view
    concat(views) --WeightingNet--> alpha (m, V)  softmax(logits / T), rows on the simplex
    Y~ = sum_v alpha_v * Y^(v)                     the fused output
    Y  = Y~ R^-1                                   orthogonalization layer; R^-1 is an
                                                   ``OrthoWeight``: saved with the model, never
                                                   touched by the optimizer (which updates nnx.Param)
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import chex
import jax
import jax.numpy as jnp
from flax import nnx

from specrage_jax.config import ModelConfig


class OrthoWeight(nnx.Variable):
    """Non-trainable state of the orthogonalization layer (R^-1, shape (k, k))."""


def activation(name: str, *, leaky_slope: float = 0.01) -> Callable[[jax.Array], jax.Array]:
    """The activation function called ``name``."""
    table: dict[str, Callable[[jax.Array], jax.Array]] = {
        "relu": jax.nn.relu,
        "leaky_relu": partial(jax.nn.leaky_relu, negative_slope=leaky_slope),
        "tanh": jnp.tanh,
        "gelu": jax.nn.gelu,
        "none": lambda x: x,
    }
    if name not in table:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(table)}")
    return table[name]


class MLP(nnx.Module):
    """Dense layers: in_dim -> hidden... -> out_dim, ``hidden_act`` between, ``out_act`` last."""

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int,
        *,
        hidden_act: Callable[[jax.Array], jax.Array],
        out_act: Callable[[jax.Array], jax.Array],
        rngs: nnx.Rngs,
    ):
        widths = [in_dim, *hidden, out_dim]
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths[:-1], widths[1:])])
        self.hidden_act = hidden_act
        self.out_act = out_act

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers[:-1]:
            x = self.hidden_act(layer(x))
        return self.out_act(self.layers[-1](x))


class SpecRaGENet(nnx.Module):
    """Per-view MLPs, the weighting MLP, the fusion and the orthogonalization layer."""

    def __init__(self, view_dims: Sequence[int], config: ModelConfig, *, rngs: nnx.Rngs):
        if config.n_components < 1:
            raise ValueError(f"model.n_components must be >= 1, got {config.n_components}")
        if config.temperature <= 0:
            raise ValueError(f"model.temperature must be > 0, got {config.temperature}")
        k = config.n_components
        hidden_act = activation(config.hidden_activation, leaky_slope=config.leaky_relu_slope)
        self.view_dims = tuple(int(d) for d in view_dims)
        self.temperature = float(config.temperature)
        self.view_nets = nnx.List([
            MLP(d, config.view_hidden, k, hidden_act=hidden_act,
                out_act=activation(config.output_activation), rngs=rngs)
            for d in self.view_dims
        ])
        self.weighting_net = MLP(
            sum(self.view_dims), config.weighting_hidden, len(self.view_dims),
            hidden_act=activation(config.weighting_activation, leaky_slope=config.leaky_relu_slope),
            out_act=activation("none"), rngs=rngs,
        )
        self.r_inv = OrthoWeight(jnp.eye(k, dtype=jnp.float32))

    def view_outputs(self, views: Sequence[jax.Array]) -> jax.Array:
        """Y^(v) for every view: V arrays (m, d_v) -> (V, m, k)."""
        chex.assert_equal(len(views), len(self.view_nets))
        return jnp.stack([net(x) for net, x in zip(self.view_nets, views)])

    def view_weights(self, views: Sequence[jax.Array]) -> jax.Array:
        """alpha = softmax(logits / T) on the concatenated views: -> (m, V), rows sum to 1."""
        logits = self.weighting_net(jnp.concatenate(list(views), axis=1))
        return jax.nn.softmax(logits / self.temperature, axis=-1)

    def fuse(self, views: Sequence[jax.Array]) -> tuple[jax.Array, jax.Array]:
        """(Y~ (m, k), alpha (m, V)): the weighted sum of the view outputs, before R^-1."""
        per_view = self.view_outputs(views)
        alpha = self.view_weights(views)
        return jnp.einsum("vmk,mv->mk", per_view, alpha), alpha

    def __call__(self, views: Sequence[jax.Array]) -> tuple[jax.Array, jax.Array]:
        """(Y (m, k), alpha (m, V)) with the stored R^-1; never a QR of this batch."""
        y_tilde, alpha = self.fuse(views)
        return y_tilde @ self.r_inv[...], alpha
