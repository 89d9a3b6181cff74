"""The SpecRaGE network in Flax NNX.

views --ViewNet_v--> Y^(v) (m, k)            one MLP per view
concat(views) --WeightingNet--> alpha (m, V)  softmax(logits / T), rows on the simplex
Y~ = sum_v alpha_v * Y^(v)                     the fused output
Y  = Y~ R^-1                                   orthogonalization layer; R^-1 is an
                                               ``OrthoWeight``: saved with the model, never
                                               touched by the optimizer (which updates nnx.Param)
view_v --SingleViewNet_v--> Y~ of a one-view sample (``model.single_view_nets``: trained after
                                               the rest to reproduce the fused Y~ from view v alone)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import chex
import jax
import jax.numpy as jnp
from flax import nnx

from specrage_jax.config import ModelConfig


class OrthoWeight(nnx.Variable):
    """Non-trainable state of the orthogonalization layer (R^-1, shape (k, k))."""


ACTIVATION_NAMES = ("relu", "leaky_relu", "tanh", "gelu", "none")
OUTPUT_LAYER_FUSIONS = ("weighting", "average", "linear")  # Y~ = sum_v alpha_v Y^(v): linear in the last layers


def output_layers_linear(fusion: str, output_activation: str) -> bool:
    """Whether the fused output Y~ is linear in the view nets' last layers: a weighted-sum fusion
    (OUTPUT_LAYER_FUSIONS) of view nets with a linear output."""
    return fusion in OUTPUT_LAYER_FUSIONS and output_activation == "none"


@dataclass(frozen=True)
class Activation:
    """An activation function named by value, so that two networks built from equal configs have
    equal (hashable, picklable) graph definitions and share compiled steps; a lambda or a
    ``partial`` would compare by identity and force a recompile for every new state."""

    name: str
    leaky_slope: float = 0.01

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.name == "relu":
            return jax.nn.relu(x)
        if self.name == "leaky_relu":
            return jax.nn.leaky_relu(x, negative_slope=self.leaky_slope)
        if self.name == "tanh":
            return jnp.tanh(x)
        if self.name == "gelu":
            return jax.nn.gelu(x)
        return x


def activation(name: str, *, leaky_slope: float = 0.01) -> Callable[[jax.Array], jax.Array]:
    """The activation function called ``name`` (one of ACTIVATION_NAMES)."""
    if name not in ACTIVATION_NAMES:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATION_NAMES)}")
    return Activation(name, float(leaky_slope) if name == "leaky_relu" else 0.01)


class MLP(nnx.Module):
    """Dense layers: in_dim -> hidden... -> out_dim, ``hidden_act`` between, ``out_act`` last."""

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int,
        *,
        hidden_act: Callable[[jax.Array], jax.Array],
        out_act: Callable[[jax.Array], jax.Array],
        rngs: nnx.Rngs,
    ):
        widths = [in_dim, *hidden, out_dim]
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths[:-1], widths[1:])])
        self.hidden_act = hidden_act
        self.out_act = out_act

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out_act(self.layers[-1](self.last_hidden(x)))

    def last_hidden(self, x: jax.Array) -> jax.Array:
        """What the last layer reads: (m, in_dim) -> (m, hidden[-1]) (the input itself when there
        are no hidden layers)."""
        for layer in self.layers[:-1]:
            x = self.hidden_act(layer(x))
        return x


class SpecRaGENet(nnx.Module):
    """Per-view MLPs, the weighting MLP, the fusion and the orthogonalization layer."""

    def __init__(self, view_dims: Sequence[int], config: ModelConfig, *, rngs: nnx.Rngs):
        if config.n_components < 1:
            raise ValueError(f"model.n_components must be >= 1, got {config.n_components}")
        if config.temperature <= 0:
            raise ValueError(f"model.temperature must be > 0, got {config.temperature}")
        k = config.n_components
        self.config = config  # static (hashable): what rebuilds this network, e.g. for checkpoints
        hidden_act = activation(config.hidden_activation, leaky_slope=config.leaky_relu_slope)
        self.view_dims = tuple(int(d) for d in view_dims)
        self.temperature = float(config.temperature)
        self.view_nets = nnx.List(
            [
                MLP(
                    d,
                    config.view_hidden,
                    k,
                    hidden_act=hidden_act,
                    out_act=activation(config.output_activation),
                    rngs=rngs,
                )
                for d in self.view_dims
            ]
        )
        n_views = len(self.view_dims)
        self.fusion = config.fusion
        if config.fusion == "weighting":
            self.weighting_net = MLP(
                sum(self.view_dims),
                config.weighting_hidden,
                n_views,
                hidden_act=activation(config.weighting_activation, leaky_slope=config.leaky_relu_slope),
                out_act=activation("none"),
                rngs=rngs,
            )
        elif config.fusion == "linear":
            self.view_logits = nnx.Param(jnp.zeros((n_views,), jnp.float32))
        elif config.fusion == "concat":
            self.concat_projection = nnx.Linear(n_views * k, k, rngs=rngs)
        elif config.fusion == "attention":
            self.attention_query = nnx.Linear(k, k, use_bias=False, rngs=rngs)
            self.attention_key = nnx.Linear(k, k, use_bias=False, rngs=rngs)
        self.r_inv = OrthoWeight(jnp.eye(k, dtype=jnp.float32))
        # built last, so the other layers draw the same initial values with or without them
        self.single_view_nets = (
            nnx.List([single_view_net(d, config, hidden_act, rngs) for d in self.view_dims])
            if config.single_view_nets
            else None
        )

    def view_outputs(self, views: Sequence[jax.Array]) -> jax.Array:
        """Y^(v) for every view: V arrays (m, d_v) -> (V, m, k)."""
        chex.assert_equal(len(views), len(self.view_nets))
        return jnp.stack([net(x) for net, x in zip(self.view_nets, views)])

    def view_weights(self, views: Sequence[jax.Array], mask: jax.Array | None = None) -> jax.Array:
        """alpha = softmax(logits / T) on the concatenated views: -> (m, V), rows sum to 1.

        ``mask`` (m, V) bool, True = view present: a missing view's logit is -inf, so its
        weight is exactly 0 and the present views' weights are renormalized. A row with no
        view present would be NaN; callers reject it (validation.view_presence). The views
        must already be finite (see :meth:`fuse`).
        """
        if self.fusion != "weighting":
            return self._fixed_fusion_weights(views, mask)
        logits = self.weighting_net(jnp.concatenate(list(views), axis=1)) / self.temperature
        if mask is not None:
            chex.assert_shape(mask, (logits.shape[0], len(self.view_nets)))
            logits = jnp.where(mask, logits, -jnp.inf)
        return jax.nn.softmax(logits, axis=-1)

    def fuse(self, views: Sequence[jax.Array], mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """(Y~ (m, k), alpha (m, V)): the weighted sum of the view outputs, before R^-1.

        With ``mask`` (m, V) bool (True = present), a missing view's rows are replaced by zeros
        before any network sees them (NaN * 0 is NaN) and its weight is 0, so the sample's
        fusion uses its present views only.
        """
        views, per_view = self._present_view_outputs(views, mask)
        return self._fused(views, per_view, mask)

    def fuse_with_fewer_views(
        self, views: Sequence[jax.Array], mask: jax.Array, fewer: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(Y~ under ``mask``, Y~ under ``fewer``, alpha under ``mask``), each (m, k) / (m, V), from
        one pass of the view networks. ``fewer`` (m, V), a subset of ``mask``, fuses each sample
        exactly as a sample that has only those views is fused (the view dropout of training,
        :func:`training.steps.loss_fusion_mask`)."""
        chex.assert_shape(fewer, (views[0].shape[0], len(views)))
        per_view = self.present_view_outputs(views, mask)
        y_tilde, alpha = self.fuse_outputs(views, per_view, mask)
        return y_tilde, self.fuse_outputs(views, per_view, fewer)[0], alpha

    def present_view_outputs(self, views: Sequence[jax.Array], mask: jax.Array | None = None) -> jax.Array:
        """Y^(v) (V, m, k) of every view as :meth:`fuse` takes them: a missing view's rows (``mask``
        (m, V) False) are zeros before its network sees them."""
        return self._present_view_outputs(views, mask)[1]

    def fuse_outputs(
        self, views: Sequence[jax.Array], per_view: jax.Array, mask: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """(Y~ (m, k), alpha (m, V)) as :meth:`fuse` gives them, from view outputs computed before
        (``per_view`` (V, m, k), :meth:`present_view_outputs`): only the fusion runs. ``mask`` may
        be a subset of the one ``per_view`` was computed under (the view dropout's fewer views)."""
        chex.assert_shape(per_view, (len(self.view_nets), views[0].shape[0], None))
        if mask is not None:
            chex.assert_shape(mask, (views[0].shape[0], len(views)))
            views = [_zero_missing(x, mask[:, v]) for v, x in enumerate(views)]
        return self._fused(views, per_view, mask)

    def output_layer_features(
        self, views: Sequence[jax.Array], mask: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """(Phi (m, p), alpha (m, V)) with Y~ = Phi C, C the view nets' last-layer kernels stacked
        over their biases ((p, k), see :meth:`set_output_layers`): Phi = [alpha_1 H_1 | ... |
        alpha_V H_V | alpha], H_v (m, h_v) view v's last hidden features, p = sum_v h_v + V.
        Only a weighted-sum fusion with a linear view-net output is linear in C
        (:data:`OUTPUT_LAYER_FUSIONS`); ValueError otherwise."""
        if not output_layers_linear(self.fusion, self.view_nets[0].out_act.name):  # type: ignore[attr-defined]
            raise ValueError(
                f"the fused output is linear in the view nets' last layers only for model.fusion in "
                f"{OUTPUT_LAYER_FUSIONS} with model.output_activation 'none'; this model has fusion "
                f"{self.fusion!r} and output activation {self.view_nets[0].out_act.name!r}"  # type: ignore[attr-defined]
            )
        if mask is not None:
            chex.assert_shape(mask, (views[0].shape[0], len(views)))
            views = [_zero_missing(x, mask[:, v]) for v, x in enumerate(views)]
        alpha = self.view_weights(views, mask)
        hidden = [alpha[:, v : v + 1] * net.last_hidden(x) for v, (net, x) in enumerate(zip(self.view_nets, views))]
        return jnp.concatenate([*hidden, alpha], axis=1), alpha

    def set_output_layers(self, coefficients: jax.Array) -> None:
        """Sets the view nets' last layers from C (p, k) laid out as :meth:`output_layer_features`
        says: view v's kernel is the next h_v rows, then one bias row per view."""
        widths = [int(net.layers[-1].kernel.value.shape[0]) for net in self.view_nets]
        chex.assert_shape(coefficients, (sum(widths) + len(widths), self.r_inv[...].shape[0]))
        offsets = [sum(widths[:v]) for v in range(len(widths) + 1)]
        for v, net in enumerate(self.view_nets):
            last = net.layers[-1]
            if last.bias is None:  # MLP builds every layer with a bias
                raise ValueError(f"view {v}: its net's output layer has no bias")
            last.kernel.value = coefficients[offsets[v] : offsets[v + 1]]
            last.bias.value = coefficients[offsets[-1] + v]

    def _present_view_outputs(
        self, views: Sequence[jax.Array], mask: jax.Array | None
    ) -> tuple[Sequence[jax.Array], jax.Array]:
        """(the views with missing rows zeroed, Y^(v) (V, m, k))."""
        if mask is not None:
            chex.assert_shape(mask, (views[0].shape[0], len(views)))
            views = [_zero_missing(x, mask[:, v]) for v, x in enumerate(views)]
        return views, self.view_outputs(views)

    def _fused(
        self, views: Sequence[jax.Array], per_view: jax.Array, mask: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        """(Y~, alpha) from the view outputs (V, m, k) and the (zero-filled) views under ``mask``."""
        if self.fusion == "concat":
            return self._concat_fusion(per_view, mask)
        if self.fusion == "attention":
            return self._attention_fusion(per_view, mask)
        alpha = self.view_weights(views, mask)
        return jnp.einsum("vmk,mv->mk", per_view, alpha), alpha

    def _fixed_fusion_weights(self, views: Sequence[jax.Array], mask: jax.Array | None) -> jax.Array:
        """alpha (m, V) of the non-MLP fusions: uniform (average, concat), softmax of learned
        global logits (linear); attention's are the mean attention each view receives."""
        m, n_views = views[0].shape[0], len(self.view_nets)
        if self.fusion == "attention":
            return self._attention_fusion(self.view_outputs(views), mask)[1]
        logits = self.view_logits[...] if self.fusion == "linear" else jnp.zeros((n_views,), jnp.float32)
        logits = jnp.broadcast_to(logits, (m, n_views))
        if mask is not None:
            logits = jnp.where(mask, logits, -jnp.inf)
        return jax.nn.softmax(logits, axis=-1)

    def _concat_fusion(self, per_view: jax.Array, mask: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """Concatenation [Y^(1) ... Y^(V)] (m, V k) projected to k by one linear layer; a missing
        view's block is zero. alpha is uniform over the present views (it weights W~ only)."""
        if mask is not None:
            per_view = per_view * jnp.transpose(mask)[:, :, None]
        stacked = jnp.concatenate(list(per_view), axis=1)
        alpha = self._fixed_fusion_weights([per_view[v] for v in range(per_view.shape[0])], mask)
        return self.concat_projection(stacked), alpha

    def _attention_fusion(self, per_view: jax.Array, mask: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """Cross-view attention per sample: the V view outputs are the tokens; every view
        queries every view (scaled dot product, softmax over keys, missing keys masked), and the
        fused output is the mean over the present queries of the attended outputs. alpha (m, V)
        is the attention each view receives, averaged over the queries (rows sum to 1)."""
        tokens = jnp.transpose(per_view, (1, 0, 2))  # (m, V, k)
        scores = jnp.einsum("mvk,mwk->mvw", self.attention_query(tokens), self.attention_key(tokens))
        scores = scores / jnp.sqrt(jnp.float32(tokens.shape[-1]))
        present = jnp.ones(tokens.shape[:2], bool) if mask is None else mask
        attention = jax.nn.softmax(jnp.where(present[:, None, :], scores, -jnp.inf), axis=-1)  # (m, V, V)
        query_weight = present / jnp.sum(present, axis=1, keepdims=True)  # mean over present queries
        alpha = jnp.einsum("mv,mvw->mw", query_weight, attention)
        return jnp.einsum("mw,mwk->mk", alpha, tokens), alpha

    def __call__(self, views: Sequence[jax.Array], mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """(Y (m, k), alpha (m, V)) with the stored R^-1; never a QR of this batch.

        ``mask`` (m, V) bool marks the present views (see :meth:`fuse`); None: all present.
        """
        y_tilde, alpha = self.fuse(views, mask)
        return y_tilde @ self.r_inv[...], alpha

    def embedding(self, views: Sequence[jax.Array], mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """(Y (m, k), alpha (m, V)) as inference gives them: :meth:`__call__`, except that a sample
        with one present view takes Y~ from that view's single-view net once those are trained
        (``model.single_view_nets``; an untrained one, its output layer still zero, defers to the
        fusion). The single-view nets run only for a batch that holds such a sample."""
        y_tilde, alpha = self.fuse(views, mask)
        if self.single_view_nets is None or mask is None:
            return y_tilde @ self.r_inv[...], alpha
        chex.assert_shape(mask, (y_tilde.shape[0], len(views)))
        one_view = jnp.sum(mask, axis=1) == 1
        use = jnp.any(one_view) & self.single_view_nets_trained()
        y_tilde = jax.lax.cond(use, lambda: self._single_view_rows(views, mask, one_view, y_tilde), lambda: y_tilde)
        return y_tilde @ self.r_inv[...], alpha

    def single_view_outputs(self, views: Sequence[jax.Array]) -> jax.Array:
        """Each view's single-view net on its rows: V arrays (m, d_v) -> (V, m, k)."""
        if self.single_view_nets is None:
            raise ValueError("this model has no single-view nets (model.single_view_nets is false)")
        return jnp.stack([net(x) for net, x in zip(self.single_view_nets, views)])

    def single_view_nets_trained(self) -> jax.Array:
        """() bool: whether the single-view nets were trained (their output layers start at zero)."""
        if self.single_view_nets is None:
            return jnp.asarray(False)
        return jnp.any(jnp.stack([jnp.any(net.layers[-1].kernel[...] != 0) for net in self.single_view_nets]))

    def _single_view_rows(
        self, views: Sequence[jax.Array], mask: jax.Array, one_view: jax.Array, y_tilde: jax.Array
    ) -> jax.Array:
        """y_tilde (m, k) with each one-view row replaced by its view's single-view output."""
        views = [_zero_missing(x, mask[:, v]) for v, x in enumerate(views)]
        alone = jnp.einsum("vmk,mv->mk", self.single_view_outputs(views), mask.astype(y_tilde.dtype))
        return jnp.where(one_view[:, None], alone, y_tilde)


def single_view_net(
    in_dim: int, config: ModelConfig, hidden_act: Callable[[jax.Array], jax.Array], rngs: nnx.Rngs
) -> MLP:
    """A view's single-view net: the view nets' widths, a linear output layer set to zero (an
    untrained net outputs 0, which :meth:`SpecRaGENet.embedding` reads as "not trained")."""
    net = MLP(
        in_dim, config.view_hidden, config.n_components, hidden_act=hidden_act, out_act=activation("none"), rngs=rngs
    )
    last = net.layers[-1]
    last.kernel[...] = jnp.zeros_like(last.kernel[...])
    if last.bias is not None:
        last.bias[...] = jnp.zeros_like(last.bias[...])
    return net


def _zero_missing(x: jax.Array, present: jax.Array) -> jax.Array:
    """x (m, d) with the rows of absent samples (``present`` (m,) False) set to zero."""
    return jnp.where(present[:, None], x, jnp.zeros((), x.dtype))
