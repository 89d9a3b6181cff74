"""The configuration's sections, one frozen dataclass per concern: the networks (model), the
in-batch graph and Eq. 4 (graph), the QR layer (ortho), training (train), the pre-training stages
(siamese, autoencoder), the data (data), evaluation (eval) and checkpoints (checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specrage_jax.config.fields import (
    ACTIVATIONS,
    AUTO,
    AUTO_COMPONENTS,
    AUTO_MIN_LR,
    AUTO_STEPS_PER_EPOCH,
    AUTO_VIEW_NET_STEPS,
    AUTO_WIDTHS,
    DEGREE_NORMALIZATIONS,
    FUSIONS,
    MISSING_VIEW_DEGREES,
    OUTPUT_ROWS,
    OUTPUT_SCALINGS,
    PREPROCESS_KINDS,
    SIAMESE_POSITIVES,
    check_choice,
    check_positive,
    setting,
)


@dataclass(frozen=True)
class ModelConfig:
    """The networks: per-view MLPs, the weighting (fusion) MLP and its softmax temperature.

    Defaults: LeakyReLU view nets with linear output, their widths and k from the data, the
    paper's weighting net (three hidden layers of 100) at T 1; :meth:`paper` and
    :meth:`published_code` give the two published architectures exactly.
    """

    n_components: int = setting(
        AUTO_COMPONENTS,
        "embedding dimension k; 0 means the number of classes; -1 means resolved from the data at fit "
        "(the number of clusters, or a few more where their k-means partition cuts the kNN graph clearly less)",
    )
    view_hidden: tuple[int, ...] = setting(
        AUTO_WIDTHS,
        "hidden widths of every per-view MLP; (0,) means "
        "resolved from the data at fit (specrage_jax.training.defaults)",
    )
    hidden_activation: str = setting("leaky_relu", "view-net hidden activation: relu|leaky_relu|tanh|gelu")
    leaky_relu_slope: float = setting(0.01, "negative slope of leaky_relu")
    output_activation: str = setting("none", "view-net output activation: none (paper) | tanh (published code)")
    weighting_hidden: tuple[int, ...] = setting((100, 100, 100), "hidden widths of the weighting MLP")
    weighting_activation: str = setting("relu", "weighting-net hidden activation")
    temperature: float = setting(1.0, "softmax temperature T of the view weights (larger: more uniform)")
    fusion: str = setting(
        "weighting",
        "how view outputs fuse: weighting (the paper's per-sample MLP) | average | "
        "linear (learned global view weights) | concat (concatenate, project to k) | "
        "attention (cross-view attention)",
    )
    output_rows: str = setting(
        "unit",
        "what transform/embed return: raw (Y = Y~ R^-1, Y^T Y = m I) | unit (each row of Y "
        "scaled to unit L2 norm, the Ng-Jordan-Weiss embedding that k-means and SVMs see; "
        "training and R^-1 are unchanged) | auto (unit where some training sample misses a "
        "view, whose row norm then depends on the views it has; raw otherwise)",
    )

    output_scaling: str = setting(
        "heat",
        "the output map P fitted after training (Y -> Y P, before output_rows): heat (with more "
        "components than clusters k, rotate Y to its Rayleigh-Ritz directions on the training graph "
        "and scale direction j > k by exp(-(lambda_j - lambda_k) / lambda_k), so that k-means reads "
        "the extra directions less than the bottom k; with as many, Y as trained) | none (Y as "
        "trained, orthogonal: the paper's output)",
    )

    single_view_nets: bool = setting(
        True,
        "one more net per view (the view nets' widths), trained after the fusion to reproduce the "
        "fused output Y~ from that view alone (training/single_view.py): a sample given with one "
        "view is embedded by it, so it lands where the samples with every view land; samples with "
        "two or more views are fused as before. false: a one-view sample is its view net's output, "
        "which is only that view's part of the fused sum. Not in the paper",
    )

    def __post_init__(self) -> None:
        for name in ("hidden_activation", "output_activation", "weighting_activation"):
            check_choice("model", name, getattr(self, name), ACTIVATIONS)
        check_choice("model", "fusion", self.fusion, FUSIONS)
        check_choice("model", "output_rows", self.output_rows, (*OUTPUT_ROWS, AUTO))
        check_choice("model", "output_scaling", self.output_scaling, OUTPUT_SCALINGS)
        check_positive("model", "temperature", self.temperature)
        view_widths = () if self.view_hidden == AUTO_WIDTHS else self.view_hidden
        if self.n_components < AUTO_COMPONENTS or any(w < 1 for w in (*view_widths, *self.weighting_hidden)):
            raise ValueError(
                "model.n_components must be >= -1 and every hidden width >= 1 (model.n_components=-1 and "
                "model.view_hidden=(0,): resolved from the data)"
            )

    @classmethod
    def paper(cls, **changes: Any) -> ModelConfig:
        """The paper's appendix: ReLU MLPs 1024-1024-512, linear output, weighting net 3x100."""
        base = dict(
            view_hidden=(1024, 1024, 512),
            hidden_activation="relu",
            output_activation="none",
            weighting_hidden=(100, 100, 100),
        )
        return cls(**{**base, **changes})

    @classmethod
    def published_code(cls, **changes: Any) -> ModelConfig:
        """The authors' PyTorch code: LeakyReLU(0.01) view nets with tanh output, weighting net 50."""
        base = dict(
            view_hidden=(1024, 1024, 512),
            hidden_activation="leaky_relu",
            leaky_relu_slope=0.01,
            output_activation="tanh",
            weighting_hidden=(50,),
            weighting_activation="relu",
        )
        return cls(**{**base, **changes})


@dataclass(frozen=True)
class GraphConfig:
    """The in-batch kNN Gaussian affinity (the paper's affinity equation)."""

    n_neighbors: int = setting(0, "l: neighbours per point in the kNN graph; 0 means resolved from the data at fit")
    scale_neighbor: int = setting(0, "the neighbour whose distance sets sigma; 0 means n_neighbors")
    scale_mode: str = setting("global", "global (median over sampled batches, fixed before training) | batch")
    scale_sample_batches: int = setting(8, "batches sampled to compute the global scale")
    bandwidth_factor: float = setting(2.0, "kernel exp(-d^2/(factor*sigma^2)): 2 as the paper, 1 as the code")
    include_self: bool = setting(False, "count the point itself among its l neighbours (the published code)")
    symmetrize: str = setting("mean", "mean: (W+W^T)/2 | max: union of kNN graphs | none: directed")
    distinct_neighbors: bool = setting(
        True,
        "a non-empty row's exact copies (zero distance) take none of its l neighbour slots; "
        "false: copies count as neighbours, and a group of more than l copies (identical "
        "documents) is a component of its own (not in the paper)",
    )
    weights_in_affinity: bool = setting(
        False,
        "multiply W^(v)_ij by alpha_i alpha_j (Eq. 4); false: alpha enters "
        "only through the fused output (Eq. 1 on the fused Y)",
    )
    mass_normalized: bool = setting(
        False,
        "divide each view's weighted energy by its weighted edge mass "
        "a^T W a / 1^T W 1, so re-weighting cannot lower the loss by dropping "
        "edges (not in the paper)",
    )
    degree_normalization: str = setting(
        AUTO,
        "complete batches: none (each view's graph as built) | samples (W_ij / sqrt(d_i d_j) times the "
        "mean degree, d_i sample i's degree summed over the views, so the Rayleigh loss is about the "
        "normalized Laplacian's: a low-degree sample no longer makes a cheap cluster of its own) | auto "
        "(resolved at fit: samples where more than 20 clusters are asked for). Batches with missing "
        "views follow graph.missing_view_degrees. Not in the paper",
    )
    missing_view_degrees: str = setting(
        "views",
        "where views are missing, how each batch's graphs make up for the edges a sample loses with "
        "its views. views: sample i's edges scaled by sqrt(D / D_i) at each end, D the views' mean "
        "degrees summed, D_i that sum over i's own views (a one-view sample's degree rises to about "
        "the geometric mean of its own and a complete sample's where its neighbours are complete, "
        "to a complete sample's where they lack the same views); samples: W_ij / sqrt(d_i d_j) times the mean "
        "degree, d_i i's degree summed over its views (also evens out hubs); none: the graphs as "
        "built. Complete batches: unchanged. Not in the paper",
    )
    view_dropout: float = setting(
        0.0,
        "where views are missing, the share of a gradient batch's samples with two or more views "
        "whose fused output the loss takes from one of their views (drawn anew each step; the "
        "sample's graph edges and weights stay), so that a view's network learns to stand for the "
        "fusion of the samples that will have only that view. 0: off. Complete data: unchanged. "
        "Not in the paper",
    )
    view_alignment: float = setting(
        0.0,
        "mu: adds mu times Eq. 4 (held constant) times the views' disagreement D = sum_v sum_i "
        "||Y^(v)_i - Y_i||^2 / sum_i ||Y_i||^2 (Y^(v) view v's output through R^-1, Y the fused "
        "output held constant), so each view's output is itself the embedding: a sample with one "
        "view lands where the fused samples are, and a weight can leave out a view that is wrong "
        "for a sample. 0: the paper's form (the views' outputs are parts of the fused sum). Not in the paper",
    )
    weight_balance: float = setting(
        0.0,
        "lambda_b: adds lambda_b KL(mean_i alpha_i || uniform) to the loss, which "
        "forbids a global collapse of the view weights onto one view but lets each "
        "sample's weights move (not in the paper; 0: off)",
    )
    weight_entropy: float = setting(
        0.001,
        "lambda_e: adds lambda_e mean_i KL(alpha_i || uniform) to the loss, which "
        "holds samples the spectral loss is indifferent about (views that agree) "
        "at 1/V (not in the paper; 0: off)",
    )

    def __post_init__(self) -> None:
        check_choice("graph", "scale_mode", self.scale_mode, ("global", "batch"))
        check_choice("graph", "symmetrize", self.symmetrize, ("mean", "max", "none"))
        check_choice("graph", "missing_view_degrees", self.missing_view_degrees, MISSING_VIEW_DEGREES)
        check_choice("graph", "degree_normalization", self.degree_normalization, DEGREE_NORMALIZATIONS)
        if not 0 <= self.view_dropout <= 1:
            raise ValueError(f"graph.view_dropout must be in [0, 1]; got {self.view_dropout!r}")
        check_positive("graph", "bandwidth_factor", self.bandwidth_factor)
        for name in ("view_alignment", "weight_balance", "weight_entropy"):
            value = getattr(self, name)
            if not value >= 0 or value == float("inf"):
                raise ValueError(f"graph.{name} must be finite and >= 0; got {value!r}")
        if self.n_neighbors < 0 or not 0 <= self.scale_neighbor <= (self.n_neighbors or self.scale_neighbor):
            raise ValueError(
                f"graph.n_neighbors must be >= 0 (0: from the data) and 0 <= graph.scale_neighbor <= "
                f"n_neighbors; "
                f"got {self.n_neighbors}, {self.scale_neighbor}"
            )

    @property
    def sigma_neighbor(self) -> int:
        return self.scale_neighbor or self.n_neighbors


@dataclass(frozen=True)
class OrthoConfig:
    """The QR orthogonalization layer."""

    convention: str = setting("m_identity", "Y^T Y = m*I (m_identity, rows of unit scale) or = I (identity)")
    rank_tol: float = setting(1e-5, "ridge on R relative to ||Y||_F; keeps R^-1 finite for rank-deficient batches")
    refine: bool = setting(True, "a second QR pass (re-orthogonalization) for float32 accuracy")
    grad_through_r_inv: bool = setting(
        True, "grad_step differentiates R^-1(theta) on its ortho batch (PyTorch code); False: constant (TF)"
    )

    def __post_init__(self) -> None:
        check_choice("ortho", "convention", self.convention, ("m_identity", "identity"))
        check_positive("ortho", "rank_tol", self.rank_tol)


@dataclass(frozen=True)
class TrainConfig:
    """Optimization: Adam (or the optax optimizer given to ``create_state``) with the paper's
    plateau learning-rate policy."""

    epochs: int = setting(0, "maximum number of epochs; 0 means resolved from the data at fit (a budget of steps)")
    batch_size: int = setting(0, "mini-batch size m (capped at the training-set size); 0 means resolved from the data")
    steps_per_epoch: int = setting(
        AUTO_STEPS_PER_EPOCH,
        "gradient steps per epoch; 0 means ceil(n_train / m) (one pass); -1 means resolved from the data at fit "
        "(one pass, at least the defaults' fewest steps an epoch), whether the epochs are set or resolved",
    )
    missing_view_batch_growth: int = setting(
        4,
        "views missing for some training samples: the batch may double up to this factor until "
        "its graph splits as cleanly as a batch of complete samples (1 keeps batch_size)",
    )
    learning_rate: float = setting(
        1e-3,
        "initial Adam learning rate (the state's optimizer is built with it; a state built with "
        "another rate or optimizer must agree with it, or keep its rate inside, see create_state)",
    )
    lr_factor: float = setting(0.1, "learning-rate multiplier on a validation plateau")
    lr_patience: int = setting(10, "epochs without validation improvement before the learning rate drops")
    min_lr: float = setting(AUTO_MIN_LR, "training stops once the learning rate falls below this")
    spectral_init: bool = setting(
        True,
        "before the first step, set the view nets' output layers to the closed-form minimizer of the "
        "loss over their random hidden features on one training batch (a generalized eigenproblem; "
        "needs a weighted-sum fusion and a linear view-net output)",
    )
    view_net_steps: int = setting(
        AUTO_VIEW_NET_STEPS,
        "gradient steps after which the view nets stop training (checked between epochs); the "
        "fusion's parameters (the weighting net) and R^-1 go on training on their outputs until the "
        "schedule ends the run, without the view nets' forward and backward passes where the whole "
        "training set is one batch. 0: the view nets train throughout; -2: until the loss the schedule "
        "watches has not improved for train.view_net_patience epochs (or the learning rate dropped); -1: from the data",
    )
    view_net_patience: int = setting(
        3, "train.view_net_steps=-2: epochs without improvement of the watched loss after which the view nets freeze"
    )
    view_net_min_delta: float = setting(
        1e-4, "train.view_net_steps=-2: relative improvement of the watched loss that counts (view_net_patience)"
    )
    progress: bool = setting(True, "show a per-epoch progress bar")
    data_on_device: bool = setting(
        False,
        "hold the training set in device memory and run each epoch (SpecRaGE, autoencoders, Siamese "
        "nets) as one compiled scan (no per-step host gather: the fast path on a GPU; needs in-memory views)",
    )

    def __post_init__(self) -> None:
        for name in ("learning_rate", "lr_factor", "min_lr", "view_net_min_delta"):
            check_positive("train", name, getattr(self, name))
        if self.missing_view_batch_growth < 1:
            raise ValueError(f"train.missing_view_batch_growth must be >= 1, got {self.missing_view_batch_growth}")
        if self.view_net_patience < 1:
            raise ValueError(f"train.view_net_patience must be >= 1, got {self.view_net_patience}")
        if min(self.epochs, self.batch_size, self.steps_per_epoch + 1, self.lr_patience, self.view_net_steps + 2) < 0:
            raise ValueError(
                "train.epochs and train.batch_size must be >= 1 (0: from the data), "
                "train.steps_per_epoch >= 0 (-1: from the data), train.lr_patience >= 0, "
                "train.view_net_steps >= 0 (-1: from the data, -2: until the watched loss stalls)"
            )


@dataclass(frozen=True)
class SiameseConfig:
    """Per-view Siamese nets whose codes replace the raw inputs in the batch affinities."""

    enabled: bool = setting(False, "learn the affinities with a Siamese net per view")
    hidden: tuple[int, ...] = setting((1024, 1024, 512), "hidden widths of each Siamese MLP")
    out_dim: int = setting(10, "dimension of the Siamese codes")
    relu_output: bool = setting(True, "ReLU on the output layer too (the published code)")
    n_positive: int = setting(5, "positives per point: its nearest neighbours (3 for BDGP/Handwritten in the code)")
    margin: float = setting(1.0, "contrastive-loss margin")
    epochs: int = setting(20, "training epochs over the pairs")
    steps_per_epoch: int = setting(
        0,
        "steps per epoch (the held-out check), over fresh shuffles of the pairs; 0, or too few pairs to hold "
        "any out: one pass over the pairs",
    )
    batch_size: int = setting(512, "pairs per step")
    learning_rate: float = setting(1e-3, "Adam learning rate")
    pair_block: int = setting(8192, "neighbours are exact within random blocks of this many rows")
    max_samples: int = setting(
        0, "train on at most this many random training rows (0: all); every row is still encoded"
    )
    patience: int = setting(
        3, "stop once the loss of held-out pairs (5 %) has not improved by min_delta for this many epochs; 0: never"
    )
    min_delta: float = setting(0.01, "relative improvement of the held-out loss that counts (patience)")
    positives: str = setting(
        "own",
        "where the positive pairs come from: 'own' (each view's nearest neighbours), 'joint' (the nearest "
        "neighbours under all views together, among the samples that have every view), 'auto' (joint where "
        "some training sample lacks a view and all views together split those samples clearly more cleanly; "
        "the nets are then trained even if not enabled; own otherwise)",
    )

    def __post_init__(self) -> None:
        _check_early_stopping("siamese", self.patience, self.min_delta, self.steps_per_epoch)
        check_choice("siamese", "positives", self.positives, (*SIAMESE_POSITIVES, AUTO))


@dataclass(frozen=True)
class AutoencoderConfig:
    """Optional per-view autoencoder pre-embedding (its codes replace the raw views)."""

    enabled: bool = setting(False, "embed each view with an autoencoder first (the paper: BDGP, InfiniteMNIST)")
    hidden: tuple[int, ...] = setting((512, 512, 2048), "encoder widths; the decoder mirrors them")
    embedding_dim: int = setting(10, "code dimension")
    epochs: int = setting(100, "training epochs")
    steps_per_epoch: int = setting(
        0,
        "steps per epoch (the held-out check), over fresh shuffles of the rows; 0, or too few rows to hold "
        "any out: one pass over the rows",
    )
    batch_size: int = setting(256, "samples per step")
    learning_rate: float = setting(1e-3, "Adam learning rate")
    patience: int = setting(
        3, "stop once the loss of held-out rows (5 %) has not improved by min_delta for this many epochs; 0: never"
    )
    min_delta: float = setting(0.01, "relative improvement of the held-out loss that counts (patience)")

    def __post_init__(self) -> None:
        _check_early_stopping("autoencoder", self.patience, self.min_delta, self.steps_per_epoch)


def _check_early_stopping(section: str, patience: int, min_delta: float, steps_per_epoch: int) -> None:
    if patience < 0 or not 0.0 <= min_delta < 1.0 or steps_per_epoch < 0:
        raise ValueError(
            f"{section}.patience must be >= 0, {section}.steps_per_epoch >= 0 and {section}.min_delta in [0, 1); "
            f"got {patience}, {steps_per_epoch}, {min_delta}"
        )


@dataclass(frozen=True)
class DataConfig:
    """Splits and preprocessing (fitted on the training split only)."""

    test_fraction: float = setting(0.2, "fraction of samples held out for testing")
    val_fraction: float = setting(0.1, "fraction of the training part used for validation")
    preprocess: str = setting(
        AUTO,
        "per-view feature scaling: standard | minmax | none | l2 (rows to unit "
        "L2 norm) | standard_l2 (standard, then rows to unit norm) | svd_l2 (rows to "
        "unit norm, TruncatedSVD to data.svd_components, rows to unit norm) | idf_l2 (columns times their "
        "inverse document frequency, rows to unit norm) | hellinger (square roots, rows to unit norm) | auto "
        "(per view from its statistics: svd_l2 for sparse views, idf_l2 for sparse views at most "
        "data.svd_components wide, hellinger for dense views whose rows share one total (proportions, "
        "histograms), else standard_l2)",
    )
    svd_components: int = setting(100, "dimensions kept by svd_l2 (capped below the view's width and row count)")
    sparse_below: float = setting(0.1, "auto: a view whose fraction of nonzero entries is below this counts as sparse")
    graph_inputs: str = setting(
        AUTO,
        "what the kNN graph of an svd_l2 view is built on: model (the reduced rows the "
        "network sees) | unreduced (its unit-norm rows before the SVD: the full cosine "
        "geometry) | auto (unreduced when the whole training set is one batch, so the "
        "graph is built once)",
    )
    unrelated_views: str = setting(
        "leave_out",
        "keep (every view takes part) | leave_out (complete data: a view whose neighbourhoods no other "
        "view shares beyond chance (3 standard deviations), while two other views share theirs, and "
        "whose own kNN graph splits the rows less cleanly than theirs is left out of the fit, with a "
        "warning; transform still takes it and gives it weight 0)",
    )

    def __post_init__(self) -> None:
        check_choice("data", "preprocess", self.preprocess, PREPROCESS_KINDS)
        check_choice("data", "graph_inputs", self.graph_inputs, ("model", "unreduced", AUTO))
        check_choice("data", "unrelated_views", self.unrelated_views, ("keep", "leave_out"))
        if self.svd_components < 1 or not 0.0 <= self.sparse_below <= 1.0:
            raise ValueError(
                f"data.svd_components must be >= 1 and data.sparse_below in [0, 1]; got "
                f"{self.svd_components}, {self.sparse_below}"
            )


@dataclass(frozen=True)
class EvalConfig:
    """Downstream evaluation of the test embedding."""

    kmeans_n_init: int = setting(10, "k-means restarts")
    embed_batch_size: int = setting(4096, "samples per forward pass when embedding")
    acc_every_epochs: int = setting(
        0,
        "`specrage train`: every N SpecRaGE epochs, k-means ACC of the validation rows' embedding (at most "
        "10,000 rows), recorded in metrics.json under training.validation_acc: ACC against steps (0: off)",
    )

    def __post_init__(self) -> None:
        if self.kmeans_n_init < 1 or self.embed_batch_size < 1 or self.acc_every_epochs < 0:
            raise ValueError(
                f"eval.kmeans_n_init and eval.embed_batch_size must be >= 1 and eval.acc_every_epochs >= 0; got "
                f"{self.kmeans_n_init}, {self.embed_batch_size}, {self.acc_every_epochs}"
            )


@dataclass(frozen=True)
class CheckpointConfig:
    """Periodic training checkpoints (orbax) under OUT/checkpoints, and the inference model OUT/model.

    Neither changes what is trained: a run resumed from a checkpoint ends bitwise equal (on one
    CPU) to the same run uninterrupted.
    """

    every_epochs: int = setting(0, "save a training checkpoint every N epochs (0: off); `specrage train` defaults to 1")
    min_seconds: float = setting(
        0.0,
        "skip a due checkpoint until this many seconds have passed since the last one "
        "(or the start of training); `specrage train` defaults to 60 with every_epochs 1",
    )
    keep: int = setting(3, "training checkpoints kept (the newest)")
    save_model: bool = setting(True, "write the inference model (weights, R^-1, scalers, encoders) to OUT/model")

    def __post_init__(self) -> None:
        if self.every_epochs < 0 or self.keep < 1 or self.min_seconds < 0:
            raise ValueError(
                f"checkpoint.every_epochs and checkpoint.min_seconds must be >= 0 and checkpoint.keep "
                f">= 1; got {self.every_epochs}, {self.min_seconds}, {self.keep}"
            )
