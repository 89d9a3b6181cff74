"""Stress variants of the development suite: regimes its seven files do not cover.

Every builder takes ``(data_dir, seed=0)`` and returns a ``MultiViewData``; it is pure NumPy,
deterministic for a seed, and writes no files. ``data_dir`` holds ``devsuite/*.mat``,
``handwritten.mat`` and ``mnist/`` (the shared datasets folder). Variants, by name:

* ``<set>@10pc``, ``<set>@16pc``: a stratified subsample with at most 10 (16) samples per class
  (a smaller class keeps all its rows) of each development-suite set, Handwritten (views 0 and 2)
  and digits: few samples per class.
* ``mnistpairs40x10``, ``mnistpairs100x16``: many classes with few samples each. A sample is two
  MNIST training digits side by side (a 28x56 image), its class the ordered pair (first digit,
  second digit); 40 seeded pairs with 10 samples each, or all 100 pairs with 16 each. Three views
  of the composite: 2x2-average-pooled pixels (392), a histogram of oriented gradients (7x7-pixel
  cells, 8 unsigned orientation bins, magnitude-weighted, each cell L2-normalized: 256) and the
  projection profiles (28 row sums, 56 column sums: 84).
* ``latent40x10``, ``latent100x16``: many separable classes with few samples each, generated: a
  sample is its class's centre in a 10-dimensional latent space (centres N(0, I)) plus N(0, s^2 I)
  noise, seen through three seeded random maps with their own noise: ReLU features (200), tanh
  features (100) and a linear projection (60). The spread s (0.6 for 40 classes, 0.5 for 100) puts
  the best naive baseline near 0.8, where the MNIST pairs sit near 0.3: classes a clustering can
  find, as in face or leaf collections of 10 to 16 images per class.
* ``20newsgroups+hubs``, ``BBC4view+hubs``, ``WebKB+hubs``: the sparse text sets (all rows) with,
  in every view, near-duplicate documents (5-8 same-class pairs, the same documents in every view;
  the copy loses one term and gains another, or is exact where the document has under 4 terms
  there, as in WebKB's link views), about 3 % single-term documents (only the row's largest entry
  kept) and one empty document (an all-zero row; a different sample in each view). Labels unchanged.
* ``20newsgroups+copies``, ``BBC4view+copies``, ``WebKB+copies``: the sparse text sets (all rows)
  with COPY_GROUPS groups of identical one-term documents: each group is COPY_GROUP_SHARE of the
  rows (at least MIN_COPY_GROUP), drawn at random across the classes, and in every view its
  documents keep only one of the view's most common terms (count 1), a different term per group.
  Such groups (stub documents, boilerplate) are exact copies of each other; with more copies than
  neighbour slots each group is a component of a kNN graph. Labels unchanged.
* ``20newsgroups+short``, ``BBC4view+short``, ``WebKB+short``: the sparse text sets (all rows) as short
  documents (snippets, titles): in every sparse view each document keeps SHORT_TERMS of its terms,
  drawn at random with their values (a document with fewer keeps all). Labels unchanged. Few
  shared terms leave the raw rows' neighbourhoods to chance words, while concatenated LSA rows
  still group them.
* ``handwritten+noise``, ``BBC4view+noise``: a set (Handwritten views 0 and 2; BBC4view) with one
  more view that carries nothing: a copy of view 0 with each column's entries shuffled across the
  samples on their own (seeded), so every feature keeps its values and the view its sparsity, but
  no row relates to its sample or to any other column. As a broken sensor or a mismatched table
  would. Labels unchanged.
* ``handwritten-imbalanced-narrow`` (and ``digits-imbalanced-narrow``): 4 classes of sizes
  200 / 70 / 46 / 35 (digits: 170 / 60 / 39 / 30), 57 / 20 / 13 / 10 %, a narrow informative view
  of 3 fixed features and two wide, weakly informative views: a real view padded with i.i.d.
  Gaussian noise columns to 400 features, the noise scaled to the view's mean feature standard
  deviation.
* ``BBC4view+agree3``, ``translations6``, ``WikipediaArticles-imbalanced-narrow``: see
  ``devsuite_text_variants.py`` (views that agree, views that translate one another, imbalance).

    from devsuite_variants import VARIANTS, build_variant
    data = build_variant("WebKB+hubs", "DATA", seed=0)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from specrage_jax.config import DataConfig
from specrage_jax.data import MultiViewData, load_dataset
from specrage_jax.data.loaders import load_mat
from specrage_jax.data.mnist import find_mnist_file, read_idx

DEVSUITE_SETS = ("20newsgroups", "BBC4view", "CiteSeer", "WebKB", "WikipediaArticles", "EYaleB10", "course3")
SWEEP_SETS = (*DEVSUITE_SETS, "handwritten", "digits")
PER_CLASS = (10, 16)
HUB_SETS = ("20newsgroups", "BBC4view", "WebKB")
NOISE_VIEW_SETS = ("handwritten", "BBC4view")
PAIR_CONFIGS = {"mnistpairs40x10": (40, 10), "mnistpairs100x16": (100, 16)}
LATENT_CONFIGS = {"latent40x10": (40, 10, 0.6), "latent100x16": (100, 16, 0.5)}  # classes, per class, spread
LATENT_DIM = 10
LATENT_VIEWS = (("relu", 200, 0.3), ("tanh", 100, 0.3), ("linear", 60, 0.8))  # map, width, noise scale
IMBALANCED_SIZES = (200, 70, 46, 35)  # 57 / 20 / 13 / 10 %
IMBALANCED_SIZES_DIGITS = (170, 60, 39, 30)  # the same shares of the ~180 digits per class
WIDE_VIEW_WIDTH = 400  # the wide views' width after the noise columns
SINGLE_TERM_FRACTION = 0.03
DUPLICATE_PAIRS = (5, 8)  # fewest and most near-duplicate pairs
MIN_TERMS_TO_PERTURB = 4
COPY_GROUPS = 5
SHORT_TERMS = 10  # terms a short document keeps
SPARSE_VIEW_BELOW = DataConfig().sparse_below  # the library's sparse-view bar (share of nonzero entries)
COPY_GROUP_SHARE = 0.03
MIN_COPY_GROUP = 8
HOG_CELL = 7
HOG_BINS = 8


def variant_rng(seed: int, name: str) -> np.random.Generator:
    """A generator for one variant: the seed and the variant's name, so variants draw independently."""
    return np.random.default_rng([seed, *name.encode()])


# --- base datasets -------------------------------------------------------------------------------


def load_base(name: str, data_dir: str, seed: int = 0) -> MultiViewData:
    """A development-suite set (all views), Handwritten (views 0 and 2, as the paper) or digits."""
    if name == "handwritten":
        return load_mat(Path(data_dir) / "handwritten.mat", views=(0, 2))
    if name == "digits":
        return load_dataset("digits", seed=seed, data_dir=data_dir)
    if name in DEVSUITE_SETS:
        return load_mat(Path(data_dir) / "devsuite" / f"{name}.mat")
    raise ValueError(f"unknown base dataset {name!r}; known: {', '.join(SWEEP_SETS)}")


def renamed(data: MultiViewData, name: str) -> MultiViewData:
    return MultiViewData(views=data.views, labels=data.labels, name=name, view_names=data.view_names)


# --- class-size sweep ----------------------------------------------------------------------------


def stratified_rows(labels: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted row indices: min(per_class, class size) rows of every class, drawn without replacement."""
    chosen = []
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        chosen.append(rng.choice(rows, size=min(per_class, rows.size), replace=False))
    return np.sort(np.concatenate(chosen))


def build_class_size(data_dir: str, seed: int = 0, *, base: str, per_class: int) -> MultiViewData:
    name = f"{base}@{per_class}pc"
    data = load_base(base, data_dir, seed)
    rows = stratified_rows(data.labels, per_class, variant_rng(seed, name))
    return renamed(data.subset(rows), name)


# --- MNIST pairs ---------------------------------------------------------------------------------


def mnist_train(data_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """MNIST training images (60000, 28, 28) float32 in [0, 1] and labels (60000,) int64."""
    folder = Path(data_dir)
    images = read_idx(find_mnist_file(folder, "train", "images", "idx3"))
    labels = read_idx(find_mnist_file(folder, "train", "labels", "idx1"))
    return images.astype(np.float32) / np.float32(255.0), labels.astype(np.int64)


def average_pool(images: np.ndarray, size: int = 2) -> np.ndarray:
    """(n, H, W) -> (n, H/size * W/size): the mean of every size x size block."""
    n, height, width = images.shape
    blocks = images.reshape(n, height // size, size, width // size, size)
    return blocks.mean(axis=(2, 4)).reshape(n, -1)


def hog_features(images: np.ndarray, cell: int = HOG_CELL, bins: int = HOG_BINS) -> np.ndarray:
    """A histogram of oriented gradients: central-difference gradients, unsigned orientations in
    ``bins`` bins over [0, pi), each pixel voting its gradient magnitude into its bin of its
    ``cell`` x ``cell`` cell, each cell's histogram L2-normalized. (n, H, W) -> (n, H/cell * W/cell * bins)."""
    n, height, width = images.shape
    gy, gx = np.gradient(images.astype(np.float64), axis=(1, 2))
    magnitude = np.hypot(gx, gy)
    orientation = np.mod(np.arctan2(gy, gx), np.pi)
    bin_index = np.minimum((orientation / np.pi * bins).astype(np.int64), bins - 1)
    cells_y, cells_x = height // cell, width // cell
    cell_index = (np.arange(height) // cell)[:, None] * cells_x + (np.arange(width) // cell)[None, :]
    flat = (cell_index[None] * bins + bin_index).reshape(n, -1)
    histograms = np.zeros((n, cells_y * cells_x * bins))
    np.add.at(histograms, (np.repeat(np.arange(n), height * width), flat.ravel()), magnitude.reshape(n, -1).ravel())
    histograms = histograms.reshape(n, cells_y * cells_x, bins)
    norms = np.linalg.norm(histograms, axis=2, keepdims=True)
    return (histograms / np.maximum(norms, 1e-12)).reshape(n, -1)


def projection_profiles(images: np.ndarray) -> np.ndarray:
    """(n, H, W) -> (n, H + W): the row sums, then the column sums."""
    return np.concatenate([images.sum(axis=2), images.sum(axis=1)], axis=1)


def draw_digit_pairs(
    digit_labels: np.ndarray, n_classes: int, per_class: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pairs (K, 2), first (K * per_class,), second (K * per_class,)): K seeded ordered digit pairs
    (a, b), sorted, and for the samples of class c (rows c * per_class ...) the indices of their left
    image (a digit a) and right image (a digit b). No image is used twice."""
    codes = np.sort(rng.choice(100, size=n_classes, replace=False))
    pairs = np.stack(np.divmod(codes, 10), axis=1)
    queues = [list(rng.permutation(np.flatnonzero(digit_labels == digit))) for digit in range(10)]
    first, second = [], []
    for a, b in pairs:
        for _ in range(per_class):
            first.append(queues[a].pop())
            second.append(queues[b].pop())
    return pairs, np.array(first, dtype=np.int64), np.array(second, dtype=np.int64)


def mnist_pairs_draw(data_dir: str, seed: int, n_classes: int, per_class: int) -> tuple[np.ndarray, ...]:
    """What ``build_mnist_pairs`` draws: (pairs, first, second, MNIST training labels)."""
    labels = read_idx(find_mnist_file(Path(data_dir), "train", "labels", "idx1")).astype(np.int64)
    rng = variant_rng(seed, f"mnistpairs{n_classes}x{per_class}")
    return (*draw_digit_pairs(labels, n_classes, per_class, rng), labels)


def build_mnist_pairs(data_dir: str, seed: int = 0, *, n_classes: int, per_class: int) -> MultiViewData:
    """Composite 28x56 images of two MNIST training digits; class c = the c-th drawn ordered pair."""
    name = f"mnistpairs{n_classes}x{per_class}"
    images, labels = mnist_train(data_dir)
    _, first, second = draw_digit_pairs(labels, n_classes, per_class, variant_rng(seed, name))
    composite = np.concatenate([images[first], images[second]], axis=2)
    views = (average_pool(composite), hog_features(composite), projection_profiles(composite))
    return MultiViewData(
        views=tuple(v.astype(np.float32) for v in views),
        labels=np.repeat(np.arange(n_classes), per_class),
        name=name,
        view_names=("pooled_pixels", "hog", "profiles"),
    )


def latent_view(z: np.ndarray, kind: str, width: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """(n, width) float32: latent points z (n, LATENT_DIM) through a seeded random map of ``kind``
    ("relu", "tanh" or "linear"), plus i.i.d. N(0, noise^2) noise."""
    projected = z @ (rng.standard_normal((z.shape[1], width)) / np.sqrt(z.shape[1]))
    mapped = {"relu": np.maximum(projected, 0.0), "tanh": np.tanh(projected), "linear": projected}[kind]
    return (mapped + noise * rng.standard_normal(mapped.shape)).astype(np.float32)


def build_latent_classes(
    data_dir: str, seed: int = 0, *, n_classes: int, per_class: int, spread: float
) -> MultiViewData:
    """Generated: n_classes latent clusters of per_class samples, three views (LATENT_VIEWS).
    ``data_dir`` is unused (the signature of every builder)."""
    name = f"latent{n_classes}x{per_class}"
    rng = variant_rng(seed, name)
    labels = np.repeat(np.arange(n_classes), per_class)
    centres = rng.standard_normal((n_classes, LATENT_DIM))
    z = centres[labels] + spread * rng.standard_normal((labels.size, LATENT_DIM))
    views = tuple(latent_view(z, kind, width, noise, rng) for kind, width, noise in LATENT_VIEWS)
    return MultiViewData(views=views, labels=labels, name=name, view_names=tuple(kind for kind, _, _ in LATENT_VIEWS))


# --- hubs and duplicates in sparse text ---------------------------------------------------------


def near_duplicate_pairs(labels: np.ndarray, usable: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(m, 2) pairs (i, j) of distinct same-class samples, m in DUPLICATE_PAIRS, no sample in two pairs;
    i will become a near copy of j. Only samples with ``usable`` True take part."""
    count = int(rng.integers(DUPLICATE_PAIRS[0], DUPLICATE_PAIRS[1] + 1))
    taken = ~usable.copy()
    pairs = []
    for i in rng.permutation(labels.size):
        if len(pairs) == count:
            break
        if taken[i]:
            continue
        partners = np.flatnonzero((labels == labels[i]) & ~taken)
        partners = partners[partners != i]
        if partners.size == 0:
            continue
        j = int(rng.choice(partners))
        taken[[i, j]] = True
        pairs.append((int(i), j))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def perturbed_copy(row: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``row`` with one random nonzero term removed and one random absent term added (its value
    drawn from the row's nonzero values); a row of fewer than MIN_TERMS_TO_PERTURB terms is copied
    exactly (dropping and adding a term would change most of it)."""
    out = row.copy()
    present = np.flatnonzero(out)
    if present.size < MIN_TERMS_TO_PERTURB:
        return out
    values = out[present]
    out[rng.choice(present)] = 0
    absent = np.flatnonzero(row == 0)
    out[rng.choice(absent)] = rng.choice(values)
    return out


def inject_hubs(data: MultiViewData, seed: int, name: str) -> tuple[MultiViewData, dict[str, list]]:
    """The hub variant of ``data`` and what was injected, per view: ``pairs`` (i, j), ``single``
    rows and the ``empty`` row. The near-duplicate pairs are the same documents in every view (a
    duplicated document); the single-term and empty documents are drawn per view."""
    rng = variant_rng(seed, name)
    views = [np.array(v, copy=True) for v in data.views]
    n = data.n_samples
    terms = np.stack([(v != 0).sum(axis=1) for v in views], axis=1)  # (n, V) terms per document
    pairs = near_duplicate_pairs(data.labels, (terms >= 2).all(axis=1), rng)
    in_pair = np.zeros(n, dtype=bool)
    in_pair[pairs.ravel()] = True
    empty_rows = []
    record: dict[str, list] = {"pairs": [], "single": [], "empty": []}
    n_single = max(1, int(round(SINGLE_TERM_FRACTION * n)))
    for v, view in enumerate(views):
        for i, j in pairs:
            view[i] = perturbed_copy(view[j], rng)
        # the empty document: a sample with terms here and in another view, outside the pairs
        elsewhere = (np.delete(terms, v, axis=1) >= 1).any(axis=1)
        candidates = np.flatnonzero((terms[:, v] >= 1) & elsewhere & ~in_pair & ~np.isin(np.arange(n), empty_rows))
        empty = int(rng.choice(candidates))
        empty_rows.append(empty)
        # single-term documents: samples with 2 or more terms here, outside the pairs
        candidates = np.flatnonzero((terms[:, v] >= 2) & ~in_pair & (np.arange(n) != empty))
        single = np.sort(rng.choice(candidates, size=min(n_single, candidates.size), replace=False))
        for i in single:
            keep = int(np.argmax(np.abs(view[i])))
            value = view[i, keep]
            view[i] = 0
            view[i, keep] = value
        view[empty] = 0
        record["pairs"].append(pairs.tolist())
        record["single"].append(single.tolist())
        record["empty"].append(empty)
    hubbed = MultiViewData(views=tuple(views), labels=data.labels, name=name, view_names=data.view_names)
    return hubbed, record


def build_hubs(data_dir: str, seed: int = 0, *, base: str) -> MultiViewData:
    name = f"{base}+hubs"
    return inject_hubs(load_base(base, data_dir, seed), seed, name)[0]


def hub_record(data_dir: str, seed: int = 0, *, base: str) -> dict[str, list]:
    """What ``build_hubs`` injected (see ``inject_hubs``)."""
    return inject_hubs(load_base(base, data_dir, seed), seed, f"{base}+hubs")[1]


def inject_copy_groups(data: MultiViewData, seed: int, name: str) -> MultiViewData:
    """The copies variant of ``data`` (see the module docstring): COPY_GROUPS disjoint groups of
    seeded rows, each made, in every view, a one-term document on one of the view's COPY_GROUPS
    most common terms (by document frequency), one term per group."""
    rng = variant_rng(seed, name)
    n = data.n_samples
    size = max(MIN_COPY_GROUP, int(round(COPY_GROUP_SHARE * n)))
    groups = rng.choice(n, size=(COPY_GROUPS, size), replace=False)
    views = []
    for view in data.views:
        view = np.array(view, dtype=np.float64, copy=True)
        common = np.argsort(-(view != 0).sum(axis=0), kind="stable")[:COPY_GROUPS]
        for rows, term in zip(groups, common):
            view[rows] = 0.0
            view[rows, term] = 1.0
        views.append(view)
    return MultiViewData(views=tuple(views), labels=data.labels, name=name, view_names=data.view_names)


def build_copies(data_dir: str, seed: int = 0, *, base: str) -> MultiViewData:
    name = f"{base}+copies"
    return inject_copy_groups(load_base(base, data_dir, seed), seed, name)


def short_documents(data: MultiViewData, seed: int, name: str) -> MultiViewData:
    """The short-documents variant of ``data`` (see the module docstring): in every view with under
    SPARSE_VIEW_BELOW nonzero entries, each row keeps SHORT_TERMS of its nonzero entries, seeded."""
    rng = variant_rng(seed, name)
    views = []
    for view in data.views:
        view = np.array(view, dtype=np.float64, copy=True)
        if np.count_nonzero(view) < SPARSE_VIEW_BELOW * view.size:
            for row in view:
                present = np.flatnonzero(row)
                if present.size > SHORT_TERMS:
                    row[rng.choice(present, size=present.size - SHORT_TERMS, replace=False)] = 0.0
        views.append(view)
    return MultiViewData(views=tuple(views), labels=data.labels, name=name, view_names=data.view_names)


def build_short(data_dir: str, seed: int = 0, *, base: str) -> MultiViewData:
    name = f"{base}+short"
    return short_documents(load_base(base, data_dir, seed), seed, name)


# --- a view that carries nothing ------------------------------------------------------------------


def shuffled_columns(view: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n, d) -> each column's entries permuted across the rows, independently per column."""
    view = np.asarray(view)
    return np.column_stack([view[rng.permutation(view.shape[0]), j] for j in range(view.shape[1])])


def with_noise_view(data: MultiViewData, seed: int, name: str) -> MultiViewData:
    """``data`` and one more view: view 0 with its columns shuffled (:func:`shuffled_columns`)."""
    noise = shuffled_columns(np.asarray(data.views[0], np.float64), variant_rng(seed, name))
    return MultiViewData(
        views=(*data.views, noise), labels=data.labels, name=name, view_names=(*data.view_names, "noise")
    )


def build_noise_view(data_dir: str, seed: int = 0, *, base: str) -> MultiViewData:
    name = f"{base}+noise"
    return with_noise_view(load_base(base, data_dir, seed), seed, name)


# --- class imbalance with a narrow informative view -----------------------------------------------


def imbalanced_rows(
    labels: np.ndarray, rng: np.random.Generator, sizes: tuple[int, ...] = IMBALANCED_SIZES
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, new labels): len(sizes) seeded classes, class c given sizes[c] seeded rows; new labels
    0, 1, ... in that order (0 the largest class)."""
    classes = rng.choice(np.unique(labels), size=len(sizes), replace=False)
    return class_rows(labels, classes, sizes, rng)


def class_rows(
    labels: np.ndarray, classes: np.ndarray, sizes: tuple[int, ...], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, new labels): sizes[i] seeded rows of class classes[i], given new label i."""
    rows, new_labels = [], []
    for new, (label, size) in enumerate(zip(classes, sizes)):
        members = np.flatnonzero(labels == label)
        if members.size < size:
            raise ValueError(f"class {label} has {members.size} rows, fewer than {size}")
        rows.append(np.sort(rng.choice(members, size=size, replace=False)))
        new_labels.append(np.full(size, new))
    return np.concatenate(rows), np.concatenate(new_labels)


def with_noise_columns(view: np.ndarray, width: int, rng: np.random.Generator) -> np.ndarray:
    """``view`` with i.i.d. N(0, s^2) columns appended up to ``width`` columns; s is the mean of
    the view's per-feature standard deviations."""
    scale = float(np.mean(np.std(view, axis=0)))
    noise = rng.standard_normal((view.shape[0], width - view.shape[1])) * scale
    return np.concatenate([view, noise], axis=1).astype(np.float32)


def build_imbalanced_handwritten(data_dir: str, seed: int = 0) -> MultiViewData:
    """Handwritten: narrow view = the first 3 columns of ``mor``; wide views = ``zer`` and ``kar``
    each padded with noise columns to WIDE_VIEW_WIDTH."""
    name = "handwritten-imbalanced-narrow"
    rng = variant_rng(seed, name)
    full = load_mat(Path(data_dir) / "handwritten.mat")
    by_name = dict(zip(full.view_names, full.views))
    missing = {"mor", "zer", "kar"} - set(by_name)
    if missing:
        raise ValueError(f"handwritten.mat: views {sorted(missing)} not found among {full.view_names}")
    rows, labels = imbalanced_rows(full.labels, rng)
    narrow = by_name["mor"][rows, :3]
    zer = with_noise_columns(by_name["zer"][rows], WIDE_VIEW_WIDTH, rng)
    kar = with_noise_columns(by_name["kar"][rows], WIDE_VIEW_WIDTH, rng)
    return MultiViewData(
        views=(narrow, zer, kar), labels=labels, name=name, view_names=("mor3", "zer+noise", "kar+noise")
    )


def build_imbalanced_digits(data_dir: str, seed: int = 0) -> MultiViewData:
    """digits: narrow view = the image's mean ink in three fixed horizontal bands (rows 0-2, 3-5,
    6-7); wide views = the image and the same-class noisy image, each padded with noise columns."""
    name = "digits-imbalanced-narrow"
    rng = variant_rng(seed, name)
    data = load_dataset("digits", seed=seed, data_dir=data_dir)
    rows, labels = imbalanced_rows(data.labels, rng, IMBALANCED_SIZES_DIGITS)
    image = data.views[0][rows].reshape(-1, 8, 8)
    narrow = np.stack(
        [image[:, 0:3].mean(axis=(1, 2)), image[:, 3:6].mean(axis=(1, 2)), image[:, 6:8].mean(axis=(1, 2))], 1
    )
    wide = tuple(with_noise_columns(view[rows], WIDE_VIEW_WIDTH, rng) for view in data.views)
    return MultiViewData(
        views=(narrow.astype(np.float32), *wide),
        labels=labels,
        name=name,
        view_names=("bands3", "image+noise", "same_class_noisy+noise"),
    )


# --- registry ------------------------------------------------------------------------------------


def _registry() -> dict[str, Callable[..., MultiViewData]]:
    variants: dict[str, Callable[..., MultiViewData]] = {}
    for per_class in PER_CLASS:
        for base in SWEEP_SETS:
            variants[f"{base}@{per_class}pc"] = functools.partial(build_class_size, base=base, per_class=per_class)
    for name, (n_classes, per_class) in PAIR_CONFIGS.items():
        variants[name] = functools.partial(build_mnist_pairs, n_classes=n_classes, per_class=per_class)
    for name, (n_classes, per_class, spread) in LATENT_CONFIGS.items():
        variants[name] = functools.partial(
            build_latent_classes, n_classes=n_classes, per_class=per_class, spread=spread
        )
    for suffix, builder in (("hubs", build_hubs), ("copies", build_copies), ("short", build_short)):
        variants.update({f"{base}+{suffix}": functools.partial(builder, base=base) for base in HUB_SETS})
    for base in NOISE_VIEW_SETS:
        variants[f"{base}+noise"] = functools.partial(build_noise_view, base=base)
    variants["handwritten-imbalanced-narrow"] = build_imbalanced_handwritten
    variants["digits-imbalanced-narrow"] = build_imbalanced_digits
    from devsuite_text_variants import TEXT_VARIANTS  # imported here: that module uses this one's helpers

    variants.update(TEXT_VARIANTS)
    return variants


VARIANTS: dict[str, Callable[..., MultiViewData]] = _registry()


def build_variant(name: str, data_dir: str, seed: int = 0) -> MultiViewData:
    """The variant ``name`` (a key of VARIANTS) built from the datasets in ``data_dir``."""
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name](str(data_dir), seed=seed)
