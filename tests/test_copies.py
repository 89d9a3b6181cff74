"""Copies in the kNN graph (``graph.distinct_neighbors``): a non-empty row's exact copies take
none of its neighbour slots, in the jitted batch affinity and in the host-side kNN lists that the
data-aware defaults and the exact spectral solution read."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from specrage_jax.config import GraphConfig
from specrage_jax.ops.affinity import copy_pairs, knn_gaussian_affinity, pairwise_sq_distances
from specrage_jax.ops.neighbors import knn_lists
from specrage_jax.ops.spectral import sparse_knn_affinity

L = 5
GROUP = L + 3  # more copies than neighbour slots


def with_copy_group(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x (60, 4) float32, group rows): 52 points on a ring, then GROUP copies of one point set
    apart from the ring (a one-term document: far from the others, identical to its copies)."""
    rng = np.random.default_rng(seed)
    angles = np.sort(rng.uniform(0, 2 * np.pi, 52))
    ring = np.stack([np.cos(angles), np.sin(angles), 0.05 * rng.standard_normal(52), np.zeros(52)], axis=1)
    copy = np.array([[1.3, 0.0, 0.0, 0.0]])
    x = np.concatenate([ring, np.repeat(copy, GROUP, axis=0)]).astype(np.float32)
    return x, np.arange(52, 52 + GROUP)


def components(w: np.ndarray | sp.spmatrix) -> int:
    return int(csgraph.connected_components(sp.csr_matrix(np.asarray(w) if not sp.issparse(w) else w) > 0)[0])


def test_copies_count_as_neighbours_without_the_rule_and_cut_the_group_off():
    x, group = with_copy_group()
    w = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, distinct=False))
    assert components(w) == 2  # the group keeps its L slots among its copies
    assert np.all(w[np.ix_(group, np.arange(52))] == 0)


def test_distinct_neighbours_link_every_copy_to_the_rest_and_no_copy_to_another():
    x, group = with_copy_group()
    directed = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, symmetrize_how="none", distinct=True))
    assert components(directed + directed.T) == 1
    assert np.all(directed[np.ix_(group, group)] == 0)
    assert np.all((directed[group] > 0).sum(axis=1) == L)  # L distinct neighbours each, all on the ring


def test_empty_rows_keep_each_other_as_neighbours():
    x, _ = with_copy_group()
    x[:6] = 0.0  # six empty documents: absences, not copies of one document
    pairs = np.asarray(copy_pairs(jnp.asarray(x), pairwise_sq_distances(jnp.asarray(x))))
    assert not pairs[:6].any()
    directed = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, symmetrize_how="none", distinct=True))
    assert np.all((directed[:6, :6] > 0).sum(axis=1) == L)  # each has its 5 fellow empty rows


def test_near_copies_are_not_copies():
    x, group = with_copy_group()
    x[group[0], 3] = 1e-2  # a near-duplicate (one term changed): a neighbour like any other
    pairs = np.asarray(copy_pairs(jnp.asarray(x), pairwise_sq_distances(jnp.asarray(x))))
    assert not pairs[group[0]].any()
    assert pairs[group[1], group[2]]


def test_host_lists_skip_copies_and_pad_rows_without_enough_distinct_others():
    x, group = with_copy_group()
    d2, idx = knn_lists(x.astype(np.float64), L)
    assert not np.isin(idx[group], group).any()
    assert np.all(np.isfinite(d2))
    tiny = np.repeat(np.eye(3), [4, 1, 1], axis=0)  # 4 copies of one row and 2 other rows
    d2, idx = knn_lists(tiny, 3)
    assert np.all(np.isinf(d2[0, 2:])) and idx[0, 2] == 0  # only 2 distinct others: the 3rd slot is empty
    plain_d2, plain_idx = knn_lists(tiny, 3, distinct=False)
    assert np.all(plain_d2[0, :3] == 0)  # without the rule the copies come first


def test_exact_solution_graph_matches_the_batch_affinity():
    x, _ = with_copy_group()
    graph = dataclasses.replace(GraphConfig(), n_neighbors=L)
    host = sparse_knn_affinity(x.astype(np.float64), graph).toarray()
    batch = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, distinct=True))
    np.testing.assert_allclose(host, batch, atol=1e-5)
    assert components(host) == 1
