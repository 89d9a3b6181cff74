"""More stress variants of the development suite: regimes where a kNN graph per view is weak.

Registered in ``devsuite_variants.VARIANTS`` beside the others and built the same way (every
builder takes ``(data_dir, seed=0)``, returns a ``MultiViewData``, is deterministic for a seed and
writes no files):

* ``BBC4view+agree3``: small raw-count text whose views agree. A stratified draw of AGREE_PER_CLASS
  rows per class of BBC4view (5 classes: 170 rows) and the AGREE_VIEWS of its 4 views whose 10-NN
  neighbourhoods (cosine, on the drawn rows) overlap most, summed over the view pairs; the values
  stay raw term counts (BBC4view stores integer counts). BBC4view's views share about 0.28 of
  their 10 nearest neighbours on such a draw, 20newsgroups' about 0.11, hence the base.
* ``translations6``: views that are noisy translations of the same documents. TRANSLATION_PER_CLASS
  rows of each of CiteSeer's 6 classes (1200 rows) and its word view (binary word presence) as the
  source text, restricted to the words the drawn documents use; each of TRANSLATION_VIEWS views is
  a seeded "language": every source word maps to a word of a new vocabulary (a random order,
  MERGE_SHARE of the words merged into another word's slot, DROP_SHARE dropped), every token kept
  with probability KEEP_TOKEN (binomial thinning), 1 + Poisson(NEW_TERMS) random words of the new
  vocabulary added to every document, then tf-idf (smooth idf, rows L2-normalized). The views are
  linear re-codings of the same documents, each with its own noise.
* ``WikipediaArticles-imbalanced-narrow``: imbalanced classes with a narrow informative view beside
  wide weak ones. All 10 classes at the sizes NARROW_WIKI_SIZES (521 rows, 20 % down to 3 %, the
  largest class given the largest size), a narrow view of the 3 columns of the 10-topic text view
  with the highest class F-statistic on the drawn rows, and two wide views from the 128-dim image
  features: the image view and a noisy copy (Gaussian noise at NOISY_COPY_SCALE of each feature's
  standard deviation), each padded with noise columns to WIDE_VIEW_WIDTH (400) features.

    from devsuite_variants import build_variant
    data = build_variant("translations6", "DATA", seed=0)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np
import scipy.sparse
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import normalize

from specrage_jax.data import MultiViewData

AGREE_BASE = "BBC4view"
AGREE_PER_CLASS = 34
AGREE_VIEWS = 3
AGREE_NEIGHBORS = 10
TRANSLATIONS_NAME = "translations6"  # CiteSeer's 6 classes
TRANSLATION_BASE = "CiteSeer"
TRANSLATION_SOURCE_VIEW = 1  # CiteSeer's word view (view 0 is the citation graph)
TRANSLATION_PER_CLASS = 200
TRANSLATION_VIEWS = 5
KEEP_TOKEN = 0.7
MERGE_SHARE = 0.2
DROP_SHARE = 0.1
NEW_TERMS = 2.0  # mean of the Poisson count of random words added to a document (plus one)
NARROW_WIKI_SIZES = (104, 78, 68, 62, 52, 47, 42, 31, 21, 16)  # 20/15/13/12/10/9/8/6/4/3 %
NARROW_FEATURES = 3
NOISY_COPY_SCALE = 0.5


def _variants() -> ModuleType:
    """devsuite_variants, imported on first use: it registers this module's builders, so a
    top-level import here would be circular."""
    import devsuite_variants

    return devsuite_variants


# --- views that agree ---------------------------------------------------------------------------


def as_counts(view: np.ndarray) -> np.ndarray:
    """``view`` as term counts: unchanged when its values are integers, else scaled so that its
    smallest nonzero value is 1 and rounded."""
    view = np.asarray(view, dtype=np.float64)
    values = view[view != 0]
    if values.size == 0 or np.all(values == np.round(values)):
        return view
    return np.round(view / np.abs(values).min())


def cosine_neighbors(view: np.ndarray, n_neighbors: int = AGREE_NEIGHBORS) -> np.ndarray:
    """(n, n_neighbors) indices of every row's nearest rows by cosine distance, itself excluded."""
    unit = normalize(np.asarray(view, dtype=np.float64))
    return NearestNeighbors(n_neighbors=n_neighbors).fit(unit).kneighbors(return_distance=False)


def neighbor_overlap(views: Sequence[np.ndarray], n_neighbors: int = AGREE_NEIGHBORS) -> np.ndarray:
    """(V, V): for each pair of views the mean share of a row's 10 nearest neighbours they share."""
    neighbors = [cosine_neighbors(view, n_neighbors) for view in views]
    overlap = np.eye(len(views))
    for a, b in itertools.combinations(range(len(views)), 2):
        shared = [np.intersect1d(x, y).size for x, y in zip(neighbors[a], neighbors[b])]
        overlap[a, b] = overlap[b, a] = np.mean(shared) / n_neighbors
    return overlap


def most_agreeing_views(views: Sequence[np.ndarray], count: int) -> tuple[int, ...]:
    """The ``count`` view indices (sorted) with the largest summed pairwise neighbour overlap."""
    overlap = neighbor_overlap(views)
    return max(
        itertools.combinations(range(len(views)), count),
        key=lambda group: sum(overlap[a, b] for a, b in itertools.combinations(group, 2)),
    )


def build_agree3(data_dir: str, seed: int = 0) -> MultiViewData:
    name = f"{AGREE_BASE}+agree{AGREE_VIEWS}"
    dv = _variants()
    data = dv.load_base(AGREE_BASE, data_dir, seed)
    data = data.subset(dv.stratified_rows(data.labels, AGREE_PER_CLASS, dv.variant_rng(seed, name)))
    chosen = most_agreeing_views(data.views, AGREE_VIEWS)
    return MultiViewData(
        views=tuple(as_counts(data.views[v]).astype(np.float32) for v in chosen),
        labels=data.labels,
        name=name,
        view_names=tuple(data.view_names[v] for v in chosen),
    )


# --- translations of the same documents ----------------------------------------------------------


def vocabulary_map(width: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(target (width,), new width): the new-vocabulary word of every source word (-1: dropped).
    DROP_SHARE of the words are dropped, MERGE_SHARE share the slot of a kept word, and the kept
    words take the new vocabulary's slots in a random order."""
    draw = rng.random(width)
    dropped = draw < DROP_SHARE
    merged = (draw >= DROP_SHARE) & (draw < DROP_SHARE + MERGE_SHARE)
    owners = np.flatnonzero(~dropped & ~merged)
    target = np.full(width, -1, dtype=np.int64)
    target[owners[rng.permutation(owners.size)]] = np.arange(owners.size)
    target[merged] = target[rng.choice(owners, size=int(merged.sum()))]
    return target, int(owners.size)


def tfidf(counts: np.ndarray) -> np.ndarray:
    """tf-idf of a count matrix: counts x (log((1 + n) / (1 + df)) + 1), rows L2-normalized."""
    df = np.count_nonzero(counts, axis=0)
    idf = np.log((1.0 + counts.shape[0]) / (1.0 + df)) + 1.0
    return normalize(counts * idf)


def translated_view(source: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One seeded "language" of the count matrix ``source`` (n, d): the re-coded, thinned counts
    plus random words, as tf-idf (n, new width) float32 (module docstring)."""
    target, width = vocabulary_map(source.shape[1], rng)
    kept = np.flatnonzero(target >= 0)
    recode = scipy.sparse.csr_matrix((np.ones(kept.size), (kept, target[kept])), shape=(source.shape[1], width))
    thinned = rng.binomial(source.astype(np.int64), KEEP_TOKEN).astype(np.float64)
    counts = (scipy.sparse.csr_matrix(thinned) @ recode).toarray()
    n = source.shape[0]
    added = 1 + rng.poisson(NEW_TERMS, size=n)
    np.add.at(counts, (np.repeat(np.arange(n), added), rng.integers(0, width, size=added.sum())), 1.0)
    return tfidf(counts).astype(np.float32)


def build_translations(data_dir: str, seed: int = 0) -> MultiViewData:
    name = TRANSLATIONS_NAME
    dv = _variants()
    rng = dv.variant_rng(seed, name)
    data = dv.load_base(TRANSLATION_BASE, data_dir, seed)
    rows = dv.stratified_rows(data.labels, TRANSLATION_PER_CLASS, rng)
    source = as_counts(data.views[TRANSLATION_SOURCE_VIEW][rows])
    source = source[:, np.any(source != 0, axis=0)]  # the words the drawn documents use
    return MultiViewData(
        views=tuple(translated_view(source, rng) for _ in range(TRANSLATION_VIEWS)),
        labels=data.labels[rows],
        name=name,
        view_names=tuple(f"language{v}" for v in range(TRANSLATION_VIEWS)),
    )


# --- a narrow informative view beside wide weak ones, imbalanced ----------------------------------


def f_statistic(view: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(d,) one-way ANOVA F of every column against the class labels (a constant column: 0)."""
    view = np.asarray(view, dtype=np.float64)
    classes = np.unique(labels)
    means = np.stack([view[labels == c].mean(axis=0) for c in classes])
    sizes = np.array([np.sum(labels == c) for c in classes])[:, None]
    between = (sizes * (means - view.mean(axis=0)) ** 2).sum(axis=0) / (classes.size - 1)
    within = sum(((view[labels == c] - means[i]) ** 2).sum(axis=0) for i, c in enumerate(classes))
    within = within / (view.shape[0] - classes.size)
    return np.where(within > 0, between / np.maximum(within, 1e-300), 0.0)


def sized_rows(labels: np.ndarray, sizes: Sequence[int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(rows, new labels): the classes ranked by size (largest first, ties by label), the i-th
    given sizes[i] seeded rows and new label i."""
    classes, counts = np.unique(labels, return_counts=True)
    ranked = classes[np.lexsort((classes, -counts))][: len(sizes)]
    return _variants().class_rows(labels, ranked, tuple(sizes), rng)


def build_imbalanced_wikipedia(data_dir: str, seed: int = 0) -> MultiViewData:
    name = "WikipediaArticles-imbalanced-narrow"
    dv = _variants()
    rng = dv.variant_rng(seed, name)
    data = dv.load_base("WikipediaArticles", data_dir, seed)
    image, topics = (np.asarray(view, dtype=np.float64) for view in data.views)
    rows, labels = sized_rows(data.labels, NARROW_WIKI_SIZES, rng)
    image, topics = image[rows], topics[rows]
    informative = np.sort(np.argsort(-f_statistic(topics, labels), kind="stable")[:NARROW_FEATURES])
    noisy = image + NOISY_COPY_SCALE * image.std(axis=0) * rng.standard_normal(image.shape)
    return MultiViewData(
        views=(
            topics[:, informative].astype(np.float32),
            dv.with_noise_columns(image, dv.WIDE_VIEW_WIDTH, rng),
            dv.with_noise_columns(noisy, dv.WIDE_VIEW_WIDTH, rng),
        ),
        labels=labels,
        name=name,
        view_names=(f"topics{NARROW_FEATURES}", "image+noise", "noisy_image+noise"),
    )


TEXT_VARIANTS: dict[str, Callable[..., MultiViewData]] = {
    f"{AGREE_BASE}+agree{AGREE_VIEWS}": build_agree3,
    TRANSLATIONS_NAME: build_translations,
    "WikipediaArticles-imbalanced-narrow": build_imbalanced_wikipedia,
}
