"""7. Experiment machinery: one run from a dataset name to metrics.json, its record for resume, the
robustness protocols and figures."""
