"""Seeded, stratified train / validation / test splits."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import train_test_split


@dataclass(frozen=True)
class SplitIndices:
    """Disjoint sorted sample indices that together cover 0..n-1: train (n_tr,), val (n_va,), test (n_te,)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def _split_stratified_if_possible(
    indices: np.ndarray, labels: np.ndarray, fraction: float, seed: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Splits `indices` into (kept, held_out) with about `fraction` held out, stratified by label."""
    try:
        kept, held = train_test_split(indices, test_size=fraction, stratify=labels, random_state=seed)
    except ValueError as error:
        # Too few members in some class (or fewer held-out samples than classes).
        warnings.warn(f"{what} split is not stratified: {error}", stacklevel=3)
        kept, held = train_test_split(indices, test_size=fraction, random_state=seed)
    return np.sort(kept), np.sort(held)


def split_indices(
    labels: np.ndarray, *, seed: int, test_fraction: float = 0.2, val_fraction: float = 0.1
) -> SplitIndices:
    """The paper's split: `test_fraction` of all samples for test, then `val_fraction` of the
    remaining training part for validation; both stratified by class and seeded.

    Args:
      labels: (n,) class labels.
      seed: random seed; the same seed gives the same split.
      test_fraction: fraction of all samples held out for test, in (0, 1).
      val_fraction: fraction of the training part held out for validation, in [0, 1).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"split: labels must be 1-D (n_samples,), got shape {labels.shape}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"split: test_fraction must be in (0, 1), got {test_fraction}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"split: val_fraction must be in [0, 1), got {val_fraction}")
    n = labels.shape[0]
    n_test = int(np.ceil(test_fraction * n))
    n_val = int(np.ceil(val_fraction * (n - n_test)))
    if n - n_test - n_val < 1:
        raise ValueError(
            f"split: {n} samples leave no training sample with test_fraction={test_fraction}, "
            f"val_fraction={val_fraction}"
        )
    train_val, test = _split_stratified_if_possible(np.arange(n), labels, test_fraction, seed, "test")
    if val_fraction == 0.0:
        return SplitIndices(train=train_val, val=np.empty(0, dtype=train_val.dtype), test=test)
    train, val = _split_stratified_if_possible(train_val, labels[train_val], val_fraction, seed, "validation")
    return SplitIndices(train=train, val=val, test=test)
