"""Copies in the kNN graph (``graph.distinct_neighbors``): a non-empty row's exact copies take one
of its neighbour slots between them, in the jitted batch affinity and in the host-side kNN lists
that the data-aware defaults and the exact spectral solution read."""

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


def test_copies_take_one_slot_so_every_copy_links_to_the_rest():
    x, group = with_copy_group()
    directed = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, symmetrize_how="none", distinct=True))
    assert components(directed + directed.T) == 1
    within = directed[np.ix_(group, group)] > 0
    assert np.all(within.sum(axis=1) == 1)  # one copy each: the lowest-index other one
    np.testing.assert_array_equal(np.argmax(within, axis=1), [1, *([0] * (GROUP - 1))])
    assert np.all((directed[group] > 0).sum(axis=1) == L)  # and L - 1 rows of the ring


def test_a_pair_of_copies_stays_linked():
    x, _ = with_copy_group()
    x[1] = x[0]  # a duplicated sample: its copy is its nearest neighbour with or without the rule
    plain = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, 1.0, distinct=False))  # sigma fixed: the
    ruled = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, 1.0, distinct=True))  # group moves the median
    np.testing.assert_allclose(ruled[:52, :52], plain[:52, :52], atol=1e-6)
    assert ruled[0, 1] > 0


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


def test_host_lists_keep_one_copy_and_pad_rows_without_enough_others():
    x, group = with_copy_group()
    d2, idx = knn_lists(x.astype(np.float64), L)
    assert np.all(np.isin(idx[group], group).sum(axis=1) == 1)
    assert np.all(np.isfinite(d2))
    tiny = np.repeat(np.eye(2), [5, 1], axis=0)  # 5 copies of one row and 1 other row
    d2, idx = knn_lists(tiny, 3)
    np.testing.assert_array_equal(idx[0, :2], [1, 5])  # its first copy, then the other row
    assert np.isinf(d2[0, 2]) and idx[0, 2] == 0  # no third slot left
    plain_d2, _ = knn_lists(tiny, 3, distinct=False)
    assert np.all(plain_d2[0, :3] == 0)  # without the rule the copies fill every slot


def test_exact_solution_graph_matches_the_batch_affinity():
    x, _ = with_copy_group()
    graph = dataclasses.replace(GraphConfig(), n_neighbors=L)
    host = sparse_knn_affinity(x.astype(np.float64), graph).toarray()
    batch = np.asarray(knn_gaussian_affinity(jnp.asarray(x), L, None, distinct=True))
    np.testing.assert_allclose(host, batch, atol=1e-5)
    assert components(host) == 1
