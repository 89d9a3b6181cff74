"""6. The user-facing layer: the scikit-learn estimator ``SpecRaGE``, the inference pipeline (raw
views -> embedding) and how a fitted estimator is saved, loaded and pickled."""
