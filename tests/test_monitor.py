"""Per-epoch diagnostics against the exact joint eigenvectors."""

from __future__ import annotations

import numpy as np

from specrage_jax.config import OrthoConfig
from specrage_jax.data import make_blobs_views
from specrage_jax.evaluation.monitor import SpectralMonitor, spectral_reference
from specrage_jax.nets.state import create_state
from specrage_jax.ops.diagnostics import grassmann_distance_sq
from specrage_jax.training.loop import train_loop
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train


def test_monitor_records_a_falling_grassmann_distance_and_quadratic_forms_on_blobs():
    data = make_blobs_views(n_samples=900, seed=0)
    k = data.n_classes
    graph = fixed_graph(n_neighbors=15, scale_mode="batch")
    train, val = [v[:700] for v in data.views], [v[700:] for v in data.views]
    reference = spectral_reference(val, graph, k)
    assert reference.eigenvectors.shape == (200, k) and reference.laplacians.shape == (2, 200, 200)
    # the reference is the exact minimizer: its own distance is 0, a random subspace's is large
    assert grassmann_distance_sq(reference.eigenvectors, reference.eigenvectors) < 1e-8
    monitor = SpectralMonitor(reference)
    state = create_state(
        data.view_dims,
        fixed_model(n_components=k, view_hidden=(64, 64), temperature=1e6),
        graph,
        OrthoConfig(),
        learning_rate=1e-3,
        seed=0,
    )
    train_loop(state, train, val, fixed_train(epochs=8, batch_size=350, progress=False), seed=0, on_epoch_end=monitor)
    curve = monitor.grassmann_curve()
    assert len(curve) == 8 and all(0.0 <= g <= k + 1e-9 for g in curve)
    assert curve[-1] < curve[0]
    forms = monitor.records[-1]["quadratic_forms"]
    assert forms.shape == (2, k, k)
    np.testing.assert_allclose(forms, np.transpose(forms, (0, 2, 1)), atol=1e-8)
    assert np.all(np.linalg.eigvalsh(forms) > -1e-8)  # Laplacians are PSD
