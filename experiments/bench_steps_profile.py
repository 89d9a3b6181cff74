"""The ``--profile`` of experiments/bench_steps.py: the same-run cost of the pieces of a training
iteration (forward, forward+backward, the affinity and its parts, the loss, the QR layer, the
gradient's core, Adam, each dense layer's matmul shape), each a small jitted function built from
the library's own functions, with two demonstrations of the same values computed differently."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

from specrage_jax.ops.affinity import knn_gaussian_affinity, nearest_neighbors, pairwise_sq_distances
from specrage_jax.ops.laplacian import weighted_laplacian_loss
from specrage_jax.ops.objective import batch_affinities
from specrage_jax.ops.ortho import orthonormalizer
from specrage_jax.training.steps import _fuse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_steps_flops import analytic_flops, network_layers
from bench_steps_timing import auto_inner, median_time, paired_fraction, time_fn


def profile_pieces(view_dims, pool, model_cfg, graph, state, *, repeats, warmup) -> dict:
    """Seconds and GFLOP/s of the pieces of an iteration, each a small jitted function built
    from the library's functions (pure; nothing donated)."""
    m = pool[0][0].shape[0]
    k = model_cfg.n_components
    params = state.params
    o, g = pool[0], pool[1]
    scales = state.view_scales
    fl = analytic_flops(view_dims, model_cfg, k, m)
    rows: dict[str, dict] = {}

    def add(name, fn, args, flops):
        t = time_fn(jax.jit(fn), args, repeats=repeats, warmup=warmup)
        rows[name] = {
            "median_s": t["median_s"],
            "min_s": t["min_s"],
            "flops": flops,
            "gflops": (flops / t["median_s"] / 1e9) if flops else None,
            "paired_fraction": paired_fraction(flops, t),
            "timing": t,
        }

    def forward(p, views):
        return _fuse(state, p, views)[0]

    def fwd_bwd(p, views):
        return jax.value_and_grad(lambda q: jnp.sum(jnp.square(forward(q, views))))(p)

    add("forward (1 batch)", forward, (params, g), fl["forward"])
    add("forward x2 (2 calls)", lambda p, a, b: (forward(p, a), forward(p, b)), (params, o, g), 2 * fl["forward"])
    add(
        "forward x2 (concat 2m)",
        lambda p, a, b: forward(p, tuple(jnp.concatenate([x, y]) for x, y in zip(a, b))),
        (params, o, g),
        2 * fl["forward"],
    )
    add("fwd+bwd nets (1 batch)", fwd_bwd, (params, g), fl["forward"] + fl["backward"])
    add(
        "fwd+bwd nets x2 (2 calls)",
        lambda p, a, b: (fwd_bwd(p, a), fwd_bwd(p, b)),
        (params, o, g),
        2 * (fl["forward"] + fl["backward"]),
    )
    add(
        "fwd+bwd nets x2 (concat 2m)",
        lambda p, a, b: fwd_bwd(p, tuple(jnp.concatenate([x, y]) for x, y in zip(a, b))),
        (params, o, g),
        2 * (fl["forward"] + fl["backward"]),
    )
    add("affinity, all views", lambda views: batch_affinities(views, scales, graph), (g,), fl["affinity"])
    x0 = g[0]
    add("  pairwise_sq_distances (view 0)", pairwise_sq_distances, (x0,), 2 * m * m * x0.shape[1])
    d2 = jax.jit(pairwise_sq_distances)(x0)
    add("  top_k l (view 0)", lambda d: nearest_neighbors(d, graph.n_neighbors), (d2,), 0)
    add(
        "  knn_gaussian_affinity (view 0)",
        lambda x: knn_gaussian_affinity(
            x,
            graph.n_neighbors,
            scales[0],
            bandwidth_factor=graph.bandwidth_factor,
            include_self=graph.include_self,
            symmetrize_how=graph.symmetrize,
        ),
        (x0,),
        2 * m * m * x0.shape[1],
    )
    aff = jax.jit(lambda views: batch_affinities(views, scales, graph))(g)
    y = jax.random.normal(jax.random.PRNGKey(0), (m, k), jnp.float32)
    alpha = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(1), (m, len(view_dims))), axis=-1)
    add(
        "loss fwd+bwd (dY, dalpha)",
        lambda yy, aa, ww: jax.value_and_grad(weighted_laplacian_loss, argnums=(0, 2))(yy, ww, aa),
        (y, alpha, aff),
        fl["loss"],
    )
    add("orthonormalizer (QR x2)", lambda yy: orthonormalizer(yy), (y,), 0)
    add("orthonormalizer fwd+bwd", jax.grad(lambda yy: jnp.sum(orthonormalizer(yy))), (y,), 0)
    # The cores of grad_step without the affinity and Adam: loss + gradient of the networks with
    # W precomputed, R^-1 constant or recomputed (QR) on the ortho batch and differentiated.
    r_inv = state.r_inv

    def core(p, views, ortho_views, w):
        def loss_fn(q):
            ri = r_inv if ortho_views is None else orthonormalizer(forward(q, ortho_views))
            yt, al = _fuse(state, q, views)
            return weighted_laplacian_loss(yt @ ri, w, al)

        return jax.value_and_grad(loss_fn)(p)

    add(
        "grad core, R^-1 const (no affinity/Adam)",
        lambda p, v, w: core(p, v, None, w),
        (params, g, aff),
        fl["grad_step"]["False"] - fl["affinity"],
    )
    add(
        "grad core, grad through (no affinity/Adam)",
        core,
        (params, g, o, aff),
        fl["grad_step"]["True"] - fl["affinity"],
    )

    # Suggestion demos (not library code): the same values computed differently.
    def core_concat(p, views, ortho_views, w):  # one 2m-row pass through the nets for both batches
        def loss_fn(q):
            both = tuple(jnp.concatenate([a, b]) for a, b in zip(ortho_views, views))
            yt, al = _fuse(state, q, both)
            ri = orthonormalizer(yt[:m])
            return weighted_laplacian_loss(yt[m:] @ ri, w, al[m:])

        return jax.value_and_grad(loss_fn)(p)

    add(
        "  demo: grad through, batches concatenated",
        core_concat,
        (params, g, o, aff),
        fl["grad_step"]["True"] - fl["affinity"],
    )

    def loss_per_view(yy, ww, aa):  # Eq. 4 without the (V, m, m) einsum: W~v = diag(a_v) W_v diag(a_v)
        n_views = ww.shape[0]
        total = 0.0
        for v in range(n_views):
            ys = yy * aa[:, v : v + 1]
            degrees = 0.5 * aa[:, v] * (ww[v] @ aa[:, v] + ww[v].T @ aa[:, v])  # of (W~ + W~^T)/2
            total = total + jnp.sum(degrees * jnp.sum(yy * yy, axis=1)) - jnp.sum(ys * (ww[v] @ ys))
        return 2.0 * total / (m * m * n_views)

    add(
        "  demo: loss fwd+bwd, per-view form",
        lambda yy, aa, ww: jax.value_and_grad(loss_per_view, argnums=(0, 2))(yy, ww, aa),
        (y, alpha, aff),
        fl["loss"],
    )
    rows["  demo: loss fwd+bwd, per-view form"]["max_abs_diff_vs_library"] = float(
        jnp.abs(jax.jit(loss_per_view)(y, aff, alpha) - jax.jit(weighted_laplacian_loss)(y, aff, alpha))
    )
    # Adam as grad_step applies it (update + apply_updates), buffers donated as in grad_step
    tx = state.tx  # the optimizer grad_step uses
    adam = jax.jit(
        lambda gr, p, s: (lambda u, s2: (optax.apply_updates(p, u), s2))(*tx.update(gr, s, p)), donate_argnums=(1, 2)
    )
    carry = [jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, state.opt_state)]
    grads = jax.tree.map(lambda x: 1e-3 * jnp.ones_like(x), params)

    def adam_once():
        carry[0], carry[1] = adam(grads, carry[0], carry[1])
        jax.block_until_ready(carry[0])

    adam_once()
    t = median_time(adam_once, repeats=repeats, warmup=warmup, inner=auto_inner(adam_once, 0.3))
    rows["Adam update+apply (donated)"] = {
        "median_s": t["median_s"],
        "min_s": t["min_s"],
        "flops": 0,
        "gflops": None,
        "paired_fraction": None,
        "timing": t,
    }
    # the achievable rate of each dense layer's matmul shape at this batch size
    for i, out in sorted({l for net in network_layers(view_dims, model_cfg, k) for l in net}):
        a = jax.random.normal(jax.random.PRNGKey(i), (m, i), jnp.float32)
        w = jax.random.normal(jax.random.PRNGKey(out), (i, out), jnp.float32)
        add(f"  matmul ({m}x{i})@({i}x{out})", lambda a, w: a @ w, (a, w), 2 * m * i * out)
    return rows
