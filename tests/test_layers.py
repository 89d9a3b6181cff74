"""The package's folders are its layers, and each layer imports only the layers below it.

config, presets,     settings, input checks and the version (import nothing else of the
overrides,           package)
validation, version
ops/                 pure math: affinities, Laplacian loss, QR orthogonalization
data/                datasets, loaders, splits, scalers, streaming
nets/                networks and their state; embedding with a state
training/            jitted steps, the loop, schedule, sharding, checkpoints, pre-training
evaluation/          metrics, embedding health, monitors, the alignment baseline
api/                 the scikit-learn estimator and the inference pipeline
runs/                experiment runs, resume records, robustness protocols, figures
cli                  the command line
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specrage_jax"
LAYERS = [
    "config",
    "presets",
    "overrides",
    "validation",
    "version",
    "ops",
    "data",
    "nets",
    "training",
    "evaluation",
    "api",
    "runs",
    "cli",
]
FOUNDATION = ("config", "presets", "overrides", "validation", "version")
RANK = {**dict.fromkeys(FOUNDATION, 0), **{name: i for i, name in enumerate(LAYERS[len(FOUNDATION) :], 1)}}


def layer_of(module: str) -> str | None:
    """'specrage_jax.training.steps' -> 'training'; None for the package's own __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the package inside ``path``, lazy ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specrage_jax"):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("specrage_jax")]
    return found


def upward_imports(path: Path) -> list[str]:
    """The imports in ``path`` that reach a higher layer than its own."""
    own = layer_of(module_name(path))
    if own is None:  # specrage_jax/__init__.py re-exports the public names of every layer
        return []
    problems = []
    for line, imported in package_imports(path):
        target = layer_of(imported)
        if target is None:
            problems.append(f"{path.name}:{line} imports the package root ({imported})")
        elif RANK[target] > RANK[own]:
            problems.append(f"{module_name(path)}:{line} ({own}) imports {imported} ({target})")
    return problems


def test_every_module_belongs_to_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer = layer_of(module_name(path))
        assert layer is None or layer in RANK, f"{path} is in no layer; add it to LAYERS in {__file__}"


def test_no_layer_imports_a_higher_one():
    problems = [p for path in sorted(PACKAGE.rglob("*.py")) for p in upward_imports(path)]
    assert not problems, "\n".join(problems)


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "specrage_jax" / "ops" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from specrage_jax.training.steps import grad_step\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "specrage_jax")
    assert upward_imports(fake) == ["specrage_jax.ops.bad:1 (ops) imports specrage_jax.training.steps (training)"]


@pytest.mark.parametrize(
    "name",
    [
        "SpecRaGE",
        "ExperimentConfig",
        "create_state",
        "ortho_step",
        "grad_step",
        "Batch",
        "embed",
        "save_model",
        "load_model",
        "train_loop",
        "History",
        "embed_batch",
        "DegenerateEmbeddingWarning",
        "CheckpointWarning",
        "CheckpointError",
        "preset",
        "ViewSplitter",
    ],
)
def test_the_public_names_stay_importable_from_the_package(name):
    import specrage_jax

    assert hasattr(specrage_jax, name) and name in specrage_jax.__all__
