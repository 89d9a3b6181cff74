"""Every fenced code block of README.md and docs/*.md runs, and every repository path and
``specrage_jax`` name that README.md, docs/*.md and BUILD_NOTES.md mention exists, so a rename
that breaks a page fails here.

What a page's author can rely on, and must follow:

* The README runs first, in a temporary directory holding ``my_views.npz`` (the two-view digits
  file docs/01 writes: ``view_0``, ``view_1``, ``labels``). Every other page runs in a fresh copy
  of that directory as the README's blocks left it, so a page may start from ``my_views.npz`` and
  from what the README's commands write (``runs/my-views``: the short ``specrage train`` run).
* A page's ``python`` blocks run in order in one namespace: a block may use the names an earlier
  block of the same page defined, never those of another page.
* ``bash`` / ``sh`` / ``shell`` / ``console`` blocks hold ``specrage`` commands only. Each command
  runs in the page's directory, in order with the page's python blocks, through
  ``specrage_jax.cli.main`` (``$ `` prompts and ``#`` comments are dropped, ``\\`` continuations
  joined), and must exit 0.
* A block that cannot run here (minutes of training, a dataset file, several processes, a GPU,
  an install) has ``<!-- not run: REASON -->`` on the line just above its opening fence.
* ``text`` blocks are printed output or listings and never run. A fence without a language, or
  with any other language, fails.
* A python block that makes the estimator warn about a degenerate embedding fails.

All pages run in one child process, so each jitted step compiles once for all of them: the pages'
examples share data and settings where they can (the digits file with ``max_epochs=1`` /
``--epochs 1``; blobs with ``ModelConfig(n_components=5, view_hidden=(64, 64))``,
``GraphConfig(n_neighbors=10, scale_mode="batch")`` and batches of 512).

Paths: a path whose first component is a top-level folder of the repository (``specrage_jax/``,
``experiments/``, ``tests/``, ``docs/``, ...) must be a tracked (or new, not ignored) file or
folder, unless git ignores it (outputs such as ``docs/_build/``); ``{a,b}`` alternatives are
expanded, and a path followed by ``<``, ``*`` or ``[`` is a pattern, not checked.
``training/loop.py``-style module paths are read under ``specrage_jax/``, and
``tests/FILE.py::name`` must name a test of that file. Names: every ``specrage_jax.a.b`` must
import and resolve; in README and docs, a code span's ``data.x`` / ``training.x`` / ... must
resolve under ``specrage_jax`` and its ``section.field`` must be a field of that
``ExperimentConfig`` section. The architecture page's layout listing must name every module.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from contextlib import chdir
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from specrage_jax.cli import main as specrage
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import load_dataset
from specrage_jax.evaluation.health import DegenerateEmbeddingWarning

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *(f"docs/{page.name}" for page in sorted((ROOT / "docs").glob("*.md")))]
CHECKED_TEXTS = [*PAGES, "BUILD_NOTES.md"]
ARCHITECTURE_PAGE = "docs/08-architecture.md"

SHELL = {"bash", "sh", "shell", "console"}
RUNNABLE = {"python", *SHELL}
NEVER_RUN = {"text"}
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[^\s`]*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
MARKER_LIKE = re.compile(r"<!--\s*not[ -]run")

FIRST_PAGE = "README.md"  # runs first; the other pages start from the directory it leaves


@dataclasses.dataclass(frozen=True)
class CodeBlock:
    """A fenced block of a page: its language, body, opening line (1-based) and not-run reason."""

    page: str
    line: int
    lang: str
    source: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@cache
def code_blocks(page: str) -> tuple[CodeBlock, ...]:
    """The fenced blocks of a page, in order."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening.group("fence")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        assert end is not None, f"{page}:{i + 1}: the code block opened here is never closed"
        above = NOT_RUN.match(lines[i - 1].strip()) if i > 0 else None
        body = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(CodeBlock(page, i + 1, opening.group("lang"), body, above.group("reason") if above else None))
        i = end + 1
    return tuple(blocks)


def prose(page: str) -> str:
    """A page's text with its fenced blocks blanked out (line numbers kept)."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    for block in code_blocks(page):
        for j in range(block.line - 1, block.line + block.source.count("\n") + 1):
            lines[j] = ""
    return "\n".join(lines)


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def shell_commands(block: CodeBlock) -> list[list[str]]:
    """The commands of a shell block as argument lists (prompts, comments and continuations handled)."""
    joined = re.sub(r"\\\n", " ", block.source)
    commands = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        words = shlex.split(line, comments=True)
        if words:
            commands.append(words)
    return commands


# --- the blocks: languages and markers ---------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_every_block_has_a_language_and_runs_or_says_why_not(page):
    problems = []
    text = (ROOT / page).read_text(encoding="utf-8")
    fence_lines = {block.line for block in code_blocks(page)}
    for number, line in enumerate(text.splitlines(), 1):
        if MARKER_LIKE.search(line) and not (NOT_RUN.match(line.strip()) and number + 1 in fence_lines):
            problems.append(
                f"{page}:{number}: a not-run marker must read '<!-- not run: REASON -->' on the line just above a fence"
            )
    for block in code_blocks(page):
        if block.lang not in RUNNABLE | NEVER_RUN:
            problems.append(f"{block.where}: fence language {block.lang or '(none)'!r}; use python, bash or text")
        elif block.lang in NEVER_RUN and block.not_run:
            problems.append(f"{block.where}: a text block never runs; drop its not-run marker")
        elif block.lang in SHELL and not block.not_run:
            for words in shell_commands(block):
                if words[0] != "specrage":
                    problems.append(f"{block.where}: {shlex.join(words)!r} is not a specrage command; mark the block")
    assert not problems, "\n".join(problems)


# --- the blocks: running them ----------------------------------------------------------------
#
# The pages run in one child process (``python tests/test_docs_snippets.py --run-pages OUT PAGE...``):
# each jitted step compiles once for all pages, and XLA's backend optimizations are off there
# (compiling is most of the cost; the blocks check the library's interface, not its speed), without
# touching the settings of the process that runs the rest of the suite.

FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def write_my_views(where: Path) -> None:
    """my_views.npz: the file docs/01 writes (scikit-learn's digits, two views)."""
    digits = load_dataset("digits")
    np.savez(where / "my_views.npz", view_0=digits.views[0], view_1=digits.views[1], labels=digits.labels)


def run_python(block: CodeBlock, namespace: dict) -> None:
    code = compile("\n" * (block.line) + block.source, str(ROOT / block.page), "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateEmbeddingWarning)
        exec(code, namespace)


def run_shell(block: CodeBlock) -> None:
    for words in shell_commands(block):
        assert words[0] == "specrage", f"{block.where}: {shlex.join(words)!r} is not a specrage command"
        try:
            code = specrage(words[1:])
        except SystemExit as exit_:  # --help and argparse errors exit
            code = exit_.code
        assert code in (0, None), f"{shlex.join(words)} exited with {code}"


def run_page(page: str, where: Path) -> dict:
    """A page's blocks in order in ``where``: how many ran, and the first failure with its traceback."""
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    with chdir(where):
        for block in code_blocks(page):
            if block.not_run or block.lang not in RUNNABLE:
                continue
            try:
                run_python(block, namespace) if block.lang == "python" else run_shell(block)
            except BaseException:
                return {
                    "ran": ran,
                    "failure": f"{block.where}: the {block.lang} block fails:\n{traceback.format_exc()}",
                }
            ran += 1
    return {"ran": ran, "failure": None}


def run_pages(out: Path, pages: list[str]) -> None:
    """In the child process: the README (always, first), then each page in a fresh copy of the
    directory the README left; the results of ``pages`` written to ``out`` as JSON after each page."""
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        first = Path(scratch) / "first"
        first.mkdir()
        write_my_views(first)
        readme = run_page(FIRST_PAGE, first)
        for page in pages:
            if page == FIRST_PAGE:
                results[page] = readme
            else:
                where = Path(scratch) / page.replace("/", "_")
                shutil.copytree(first, where)
                results[page] = run_page(page, where)
            out.write_text(json.dumps(results), encoding="utf-8")


@pytest.fixture(scope="module")
def page_results(request, tmp_path_factory) -> dict[str, dict]:
    """The child process's results for every page this test run executes."""
    pages = [
        item.callspec.params["page"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_page_code_runs"
    ]
    out = tmp_path_factory.mktemp("docs-pages") / "results.json"
    env = dict(os.environ, MPLBACKEND="Agg", XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip())
    child = subprocess.run(
        [sys.executable, __file__, "--run-pages", str(out), *pages],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    results = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    for page in pages:
        results.setdefault(page, {"ran": 0, "failure": f"the child process stopped before {page}"})
        if results[page]["failure"] and child.returncode != 0:
            results[page]["failure"] += (
                f"\nchild process exit {child.returncode}:\n{(child.stdout + child.stderr)[-3000:]}"
            )
    return results


@pytest.mark.slow  # the pages train real models end to end (the README's digits run): ~60-90 s in all
@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page, page_results):
    failure = page_results[page]["failure"]
    if failure:
        pytest.fail(failure, pytrace=False)


# --- paths and names -------------------------------------------------------------------------


@cache
def tracked() -> frozenset[str]:
    try:
        listing = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs a git checkout to tell tracked files from outputs")
    files = set(listing.stdout.split())
    folders = {str(Path(f).parent) for f in files} | {str(p) for f in files for p in Path(f).parents}
    return frozenset(files | folders - {"."})


def ignored(path: str) -> bool:
    """Whether git ignores ``path`` as a file or as a folder (an output, such as docs/_build/)."""
    for candidate in (path, f"{path}/"):
        if subprocess.run(["git", "check-ignore", "-q", "--no-index", candidate], cwd=ROOT).returncode == 0:
            return True
    return False


def expand_braces(path: str) -> list[str]:
    """'a.{json,md}' -> ['a.json', 'a.md']."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [
        x for alt in match.group(1).split(",") for x in expand_braces(path[: match.start()] + alt + path[match.end() :])
    ]


def subpackages() -> list[str]:
    return sorted({p.split("/")[1] for p in tracked() if p.startswith("specrage_jax/") and p.count("/") == 2})


def mentioned_paths(text: str) -> list[tuple[int, str, str]]:
    """(line, path as written, repository path) of every checkable path in a text."""
    tops = sorted({p.split("/")[0] for p in tracked() if "/" in p})
    found = []
    top_re = re.compile(rf"(?<![\w./:@~$-])((?:{'|'.join(map(re.escape, tops))})/[\w./{{}},+-]*)(::\w+)?")
    for match in top_re.finditer(text):
        written = match.group(1).rstrip(".,")
        if text[match.end(1) : match.end(1) + 1] in ("<", "*", "[") or written.endswith("{"):
            continue
        for path in expand_braces(written):
            found.append((line_of(text, match.start()), written + (match.group(2) or ""), path.rstrip("/")))
    module_re = re.compile(rf"(?<![\w./:@~$-])((?:{'|'.join(subpackages())})/\w+\.py)\b")
    for match in module_re.finditer(text):
        found.append((line_of(text, match.start()), match.group(1), f"specrage_jax/{match.group(1)}"))
    return found


@pytest.mark.parametrize("text_file", CHECKED_TEXTS)
def test_every_mentioned_repository_path_exists(text_file):
    text = (ROOT / text_file).read_text(encoding="utf-8")
    problems = []
    for line, written, path in mentioned_paths(text):
        if path not in tracked() and not ignored(path):
            problems.append(f"{text_file}:{line}: {written} (no tracked {path})")
        test = re.search(r"::(\w+)$", written)
        if test and path in tracked():
            if not re.search(rf"^def {test.group(1)}\(", (ROOT / path).read_text(encoding="utf-8"), re.M):
                problems.append(f"{text_file}:{line}: {written} (no test {test.group(1)} in {path})")
    assert not problems, "\n".join(problems)


def resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` imports as a module and the rest resolves as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


FILE_SUFFIXES = {"py", "json", "md", "npz", "npy", "mat", "png", "txt", "html", "sh", "gz", "toml"}


def config_fields() -> dict[str, set[str]]:
    config = ExperimentConfig()
    return {
        section.name: {f.name for f in dataclasses.fields(getattr(config, section.name))}
        for section in dataclasses.fields(config)
    }


@pytest.mark.parametrize("text_file", CHECKED_TEXTS)
def test_every_mentioned_name_resolves(text_file):
    text = (ROOT / text_file).read_text(encoding="utf-8")
    problems = [
        f"{text_file}:{line_of(text, m.start())}: {m.group(1)} does not resolve"
        for m in re.finditer(r"(?<![\w./-])(specrage_jax(?:\.[A-Za-z_]\w*)+)", text)
        if not resolves(m.group(1))
    ]
    if text_file in PAGES:  # code spans of the user-facing texts (BUILD_NOTES also records history)
        sections, packages = config_fields(), set(subpackages())
        body = prose(text_file)
        for span in re.finditer(r"`([^`\n]+)`", body):
            for token in re.findall(r"(?<![\w./:-])([a-z_]+(?:\.[A-Za-z_]\w*)+)", span.group(1)):
                head, *rest = token.split(".")
                if rest[-1] in FILE_SUFFIXES:
                    continue
                if head in packages and resolves(f"specrage_jax.{token}"):
                    continue
                if head in sections and len(rest) == 1 and rest[0] in sections[head]:
                    continue
                if head in packages or head in sections:
                    problems.append(
                        f"{text_file}:{line_of(body, span.start())}: `{token}` is neither a module path nor a setting"
                    )
    assert not problems, "\n".join(problems)


def layout_listing() -> set[str]:
    """The module files the architecture page's layout listing names."""
    block = next(b for b in code_blocks(ARCHITECTURE_PAGE) if b.lang == "text" and b.source.startswith("specrage_jax/"))
    listed, folder = set(), ""
    for line in block.source.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        name = line.split()[0] if line.strip() else ""
        if indent == 2 and name.endswith("/"):
            folder = name
        elif indent == 2:
            listed.add(f"specrage_jax/{name}")
        elif indent == 4:
            listed.add(f"specrage_jax/{folder}{name}")
    return listed


def test_the_layout_listing_names_every_module():
    modules = {p for p in tracked() if p.startswith("specrage_jax/") and p.endswith(".py")}
    required = {p for p in modules if not (p.endswith("/__init__.py") and p.count("/") > 1)}
    listed = layout_listing()
    assert not required - listed, f"{ARCHITECTURE_PAGE} lists no line for: {sorted(required - listed)}"
    assert not listed - modules, f"{ARCHITECTURE_PAGE} lists files that do not exist: {sorted(listed - modules)}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run-pages"]:
        run_pages(Path(sys.argv[2]), sys.argv[3:])
