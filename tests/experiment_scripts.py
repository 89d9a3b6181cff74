"""A script under experiments/ loaded as a module, the way the tests of those scripts use it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def load_experiment(name: str, *, module_name: str | None = None) -> ModuleType:
    """experiments/<name>.py executed as a fresh module, registered in ``sys.modules`` under
    ``module_name`` (default ``name``): dataclasses look their module up there while a class is
    built, and the scripts import one another by that name, from their folder on ``sys.path`` as
    when one runs as a script."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    registered = module_name or name
    spec = importlib.util.spec_from_file_location(registered, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[registered] = module
    spec.loader.exec_module(module)
    return module
