"""experiments/devsuite.py's records: the table names the fits' seed, and the CPU line tells one
generation of a CPU family from another."""

from __future__ import annotations

from experiment_scripts import load_experiment

devsuite = load_experiment("devsuite")

ROW = {
    "protocol": "all rows",
    "n": 203,
    "ACC": 0.798,
    "NMI": 0.458,
    "fit_seconds": 18.5,
    "baseline": {"name": "concat_kmeans/l2", "ACC": 0.677},
    "ratio": 0.798 / 0.677,
    "resolved": {"graph.n_neighbors": {"value": 30}, "data.preprocess": {"value": ["svd_l2", "svd_l2"]}},
}


def test_the_table_names_the_seed_the_fits_ran_with():
    table = devsuite.markdown_table({"WebKB": ROW}, "some CPU", seed=3)
    assert table.startswith("Default estimator, seed 3, ") and "fit seconds on some CPU." in table
    assert (
        "| WebKB | all rows | 203 | 0.798 | 0.458 | 18 | 0.677 (concat_kmeans/l2) | 1.18 | - | 30 | svd_l2, svd_l2 |"
        in table
    )
    assert devsuite.markdown_table({"WebKB": ROW}, "some CPU").startswith("Default estimator, seed 0, ")


def test_the_table_puts_the_best_linear_cca_beside_the_bar():
    cca = {"WebKB": {"cca_best": {"name": "mcca/c0.5", "ACC": 0.7153}}}
    table = devsuite.markdown_table({"WebKB": ROW}, "some CPU", cca=cca)
    assert "| 0.677 (concat_kmeans/l2) | 1.18 | 0.715 (mcca/c0.5) | 30 |" in table


def test_the_cpu_line_carries_family_and_model_where_the_kernel_gives_them(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
    )
    real_path = devsuite.Path
    monkeypatch.setattr(devsuite, "Path", lambda p: real_path(info) if p == "/proc/cpuinfo" else real_path(p))
    assert devsuite.cpu_model() == "AMD EPYC (family 25, model 1)"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    assert devsuite.cpu_model() == "Some CPU"
