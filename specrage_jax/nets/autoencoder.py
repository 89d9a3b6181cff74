"""The per-view autoencoder network (the paper's appendix: hidden 512-512-2048); its encoder's
codes replace the raw view where the paper uses it (BDGP, InfiniteMNIST, Reuters)."""

from __future__ import annotations

import jax
from flax import nnx

from specrage_jax.config import AutoencoderConfig
from specrage_jax.nets.model import MLP, activation


class Autoencoder(nnx.Module):
    """in -> hidden... -> embedding (linear) and the mirrored decoder back to in (linear)."""

    def __init__(self, in_dim: int, config: AutoencoderConfig, *, rngs: nnx.Rngs):
        relu, linear = activation("relu"), activation("none")
        self.encoder = MLP(in_dim, config.hidden, config.embedding_dim, hidden_act=relu, out_act=linear, rngs=rngs)
        self.decoder = MLP(
            config.embedding_dim, tuple(reversed(config.hidden)), in_dim, hidden_act=relu, out_act=linear, rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.decoder(self.encoder(x))
