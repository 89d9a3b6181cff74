"""The per-view Siamese affinity network: its codes z = h(x) replace x in the batch affinities."""

from __future__ import annotations

from flax import nnx

from specrage_jax.config import SiameseConfig
from specrage_jax.nets.model import MLP, activation


def siamese_net(in_dim: int, config: SiameseConfig, *, seed: int) -> MLP:
    """Linear+ReLU on every layer, the output included (as the published code)."""
    relu = activation("relu")
    return MLP(
        in_dim,
        config.hidden,
        config.out_dim,
        hidden_act=relu,
        out_act=relu if config.relu_output else activation("none"),
        rngs=nnx.Rngs(seed),
    )
