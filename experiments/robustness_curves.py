"""Robustness curves (the paper's Fig. "robust_exp"): relative k-means ACC degradation (%) of
SpecRaGE and the alignment baseline (MvSCN-style, specrage_jax.evaluation.alignment) against the fraction
of contaminated samples (10-40 %), for outliers and for noise.

    PYTHONPATH=. python experiments/robustness_curves.py --datasets blobs
    PYTHONPATH=. python experiments/robustness_curves.py --datasets bdgp handwritten \
        --data-dir DATA --resume --reuse experiments/results/fusion_bdgp.json

Protocol (specrage_jax.runs.robustness): the whole dataset is contaminated before the split, so
training, validation and test rows are contaminated alike (the paper contaminates the data set
and clusters it). Outliers: ADBench global anomalies (alpha 1.1) replace view ``--outlier-view``
(default 0) of a fraction of the samples; noise: N(0, (1.2 std_j)^2) added to one random view
per chosen sample. The clean run and every contaminated run of a method use the same seed (same
split, initialization and batches; the contamination is seeded with it too), so the difference
is the contamination. Metric: test k-means ACC; degradation = 100 (ACC_clean - ACC) / ACC_clean
per seed, then mean and std over ``--seeds`` (the JSON records n_seeds).

Methods: "specrage" = the paper's method as published: the weighting fusion under Eq. 4 (the
per-sample weights alpha_i alpha_j inside every view's affinity, ``graph.weights_in_affinity=true``)
at the paper's temperature (T 250 on BDGP, T 90 on blobs and Handwritten; see
specrage_jax.runs.robustness.paper_loss_overrides; the presets themselves pin the weights with T 250000
on BDGP/Handwritten). Down-weighting a contaminated view then also removes its edges from that
view's graph, which is what makes the fusion robust (BUILD_NOTES.md, "Robustness and view weighting").
"alignment" = per-view SpectralNets + MSE alignment on
the same preprocessed splits (graph on the input views, l = the preset's, SpecRaGE's widths, k,
learning rate, batch size and step budget), evaluated on its concatenated embedding.

Writes experiments/results/robustness_<dataset>.json (header, curves, every run with its
signature; rewritten after every run) and robustness_<dataset>.png. ``--resume`` keeps the runs
already in the file; ``--reuse FILE`` takes runs with the same signature (e.g. the fusion
comparison's "weighting-eq4" runs are this script's "specrage" runs on BDGP).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specrage_jax.runs.robustness import Method, paper_loss_overrides
from specrage_jax.runs.robustness_report import add_curve_arguments, degradation_table, write_curve_file

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("specrage", "alignment")


def methods_for(dataset: str, names: list[str]) -> list[Method]:
    table = {
        "specrage": Method("specrage", paper_loss_overrides(dataset)),
        "alignment": Method("alignment", alignment=True),
    }
    return [table[name] for name in names]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["blobs"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--out-dir", default=str(RESULTS), help="where robustness_<dataset>.json/png go")
    add_curve_arguments(parser)
    args = parser.parse_args(argv)
    payloads = {}
    for dataset in args.datasets:
        out = Path(args.out_dir) / f"robustness_{dataset}.json"
        payloads[dataset] = write_curve_file(
            args,
            dataset,
            methods_for(dataset, args.methods),
            out,
            title=dataset,
            protocol=__doc__.split("Protocol")[1].split("Methods:")[0],
        )
        print(f"{dataset}: relative ACC degradation (%) at {args.fractions}; wrote {out}")
        print(degradation_table(payloads[dataset]["curves"]), flush=True)
    return payloads


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
