"""5. Evaluation and diagnostics: clustering and SVM metrics, embedding health, per-epoch monitors
and the alignment baseline."""
