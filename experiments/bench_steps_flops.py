"""The analytic FLOP count of one SpecRaGE training iteration (ortho_step + grad_step) for
experiments/bench_steps.py: the dense layers of every network, then the counts of the forward and
backward passes, the affinity and the loss (the formula in the script's docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from specrage_jax.config import ModelConfig


def network_layers(view_dims: Sequence[int], cfg: ModelConfig, k: int) -> list[list[tuple[int, int]]]:
    """(in, out) of every dense layer, one list per network (view nets, then the weighting net)."""
    nets = []
    for d in view_dims:
        w = [d, *cfg.view_hidden, k]
        nets.append(list(zip(w[:-1], w[1:])))
    w = [sum(view_dims), *cfg.weighting_hidden, len(view_dims)]
    nets.append(list(zip(w[:-1], w[1:])))
    return nets


def analytic_flops(view_dims: Sequence[int], cfg: ModelConfig, k: int, m: int) -> dict:
    nets = network_layers(view_dims, cfg, k)
    fwd = sum(2 * m * i * o for net in nets for (i, o) in net)
    first = sum(2 * m * net[0][0] * net[0][1] for net in nets)
    bwd = 2 * fwd - first
    affinity = sum(2 * m * m * d for d in view_dims)
    loss = 6 * m * m * k
    ortho = fwd
    grad_const = fwd + bwd + affinity + loss
    grad_through = grad_const + fwd + bwd
    return {
        "forward": fwd,
        "backward": bwd,
        "backward_naive_2x": 2 * fwd,
        "affinity": affinity,
        "loss": loss,
        "ortho_step": ortho,
        "grad_step": {"False": grad_const, "True": grad_through},
        "iteration": {"False": ortho + grad_const, "True": ortho + grad_through},
        "n_params": sum(i * o + o for net in nets for (i, o) in net),
    }
