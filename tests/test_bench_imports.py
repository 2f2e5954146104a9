"""Every project name a benchmark or script imports exists, function-level imports included.

Benchmarks import lazily (a part runs only when asked), so a moved module breaks them only
when that part runs, maybe an hour in; this reads their ``import`` statements instead:

    .venv/bin/pytest -q tests/test_bench_imports.py
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("pretrain", "resources", "foundation", "pretrain_assets", "jobs", "sensors",
        "app", "tests")  # fmt: skip
SCRIPTS = sorted([*ROOT.glob("bench/*.py"), *ROOT.glob("scripts/*.py")])


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import of one of our packages in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in OURS:
                found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in OURS]
    return found


def _missing(module: str, names: list[str]) -> list[str]:
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name == "ray" and importlib.util.find_spec("ray") is None:
            return []  # the ray extra is not installed: those modules cannot load here
        return [f"{module} ({error})"]
    missing = []
    for name in names:
        if hasattr(loaded, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ModuleNotFoundError:
            missing.append(f"{module}.{name}")
    return missing


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_imported_name_exists(path: Path) -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {item}"
        for line, module, names in _imports(path)
        for item in _missing(module, names)
    ]
    assert not problems, "imports of moved or renamed names:\n" + "\n".join(problems)
