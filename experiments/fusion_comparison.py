"""Fusion comparison (the paper's Fig. "fusion"): relative k-means ACC degradation (%) of
SpecRaGE with different fusion modules against the fraction of contaminated samples (10-40 %),
for outliers and for noise, on BDGP by default.

    PYTHONPATH=. python experiments/fusion_comparison.py --data-dir DATA
    PYTHONPATH=. python experiments/fusion_comparison.py --data-dir DATA --resume \
        --fusions weighting average concat linear attention

Protocol: as experiments/robustness_curves.py (specrage_jax.runs.robustness): the whole dataset is
contaminated before the split (train, validation and test rows alike); outliers = ADBench global
anomalies (alpha 1.1) in view ``--outlier-view`` (default 0, BDGP's visual view); noise = N(0,
(1.2 std_j)^2) in one random view per chosen sample; clean and contaminated runs share the seed;
degradation = 100 (ACC_clean - ACC) / ACC_clean of the test k-means ACC per seed, mean/std over
``--seeds``.

Methods: the dataset preset plus the same graph/temperature settings for every fusion
(``graph.weights_in_affinity=false``, the paper's T: 250 on BDGP), differing only in
``model.fusion``: weighting (the paper's per-sample weighting MLP, learnable), average, concat
(concatenate, one linear layer to k), linear (learned global view weights), attention
(cross-view attention); and "weighting-eq4", the weighting fusion under the paper's Eq. 4 loss
(alpha_i alpha_j inside each view's affinity, ``graph.weights_in_affinity=true``, same T), where
down-weighting a contaminated view also removes its edges from that view's graph.
Pre-training (BDGP: the Siamese nets) depends only on the data, so each contamination level
pre-trains once and every fusion trains on the same codes.

Writes experiments/results/fusion_<dataset>.json (rewritten after every run) and the PNG beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specrage_jax.config import FUSIONS
from specrage_jax.runs.robustness import Method, learnable_weight_overrides, paper_loss_overrides
from specrage_jax.runs.robustness_report import add_curve_arguments, degradation_table, write_curve_file

RESULTS = Path(__file__).resolve().parent / "results"
PAPER_LOSS = "weighting-eq4"


def fusion_methods(dataset: str, fusions: list[str]) -> list[Method]:
    """One method per fusion name; PAPER_LOSS is the weighting fusion under Eq. 4."""
    methods = []
    for name in fusions:
        if name == PAPER_LOSS:
            methods.append(Method(name, (*paper_loss_overrides(dataset), "model.fusion=weighting")))
        else:
            methods.append(Method(name, (*learnable_weight_overrides(dataset), f"model.fusion={name}")))
    return methods


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bdgp")
    parser.add_argument(
        "--fusions", nargs="+", default=["weighting", "average", "concat"], choices=(*FUSIONS, PAPER_LOSS)
    )
    parser.add_argument("--out", default=None, help="JSON path (default results/fusion_<dataset>.json)")
    add_curve_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else RESULTS / f"fusion_{args.dataset}.json"
    protocol = __doc__.split("Protocol: ")[1].split("Methods:")[0]
    payload = write_curve_file(
        args,
        args.dataset,
        fusion_methods(args.dataset, args.fusions),
        out,
        title=f"{args.dataset} fusions",
        protocol=protocol,
    )
    print(f"{args.dataset}: relative ACC degradation (%) at {args.fractions}; wrote {out}")
    print(degradation_table(payload["curves"]), flush=True)
    return payload


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
