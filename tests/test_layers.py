"""The library layer never imports dagster: every pretrain module imports without it."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pretrain

ROOT = Path(__file__).resolve().parents[1]


def library_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(pretrain.__path__, "pretrain.")
        if m.name != "pretrain.train.__main__"
    )


def test_library_has_modules() -> None:
    names = library_modules()
    assert "pretrain.storage" in names and "pretrain.train" in names and len(names) > 15


def test_pretrain_imports_without_dagster() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {library_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith(('dagster.', 'dagster_')))\n"
        "assert not bad, bad\n"
        "print('ok', len(sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_no_dagster_import_statement_in_library() -> None:
    offenders = [
        str(p)
        for p in (ROOT / "pretrain").rglob("*.py")
        if any(
            line.lstrip().startswith(("import dagster", "from dagster"))
            for line in p.read_text().splitlines()
        )
    ]
    assert offenders == []


# -- the Dagster side (issue 17) ----------------------------------------------------------------
PACKAGES = ("pretrain", "pretrain_assets", "jobs", "sensors", "resources")
# the entry points that wire everything together may import every package
# (jobs.ray_jobs builds the same Definitions with the Ray executor)
ENTRY_POINTS = {
    "pretrain_assets.definitions",
    "pretrain_assets.demo",
    "pretrain_assets.cli",
    "jobs.ray_jobs",
}
# leaf modules of jobs/ that assets and sensors may import: no assets, no sensors behind them
JOBS_LEAVES = {
    "jobs.partitions",
    "jobs.config",
    "jobs.stages",
    "jobs.train_config",
    "jobs.quarantine",
}


def project_imports() -> dict[str, set[str]]:
    """Module → project modules it imports anywhere (function bodies included, ``if
    TYPE_CHECKING:`` blocks excluded: they never run)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in PACKAGES:
            continue
        name = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        found = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_lazy_imports_included() -> None:
    assert cycles(project_imports()) == []


def test_dagster_side_imports_flow_one_way() -> None:
    """assets → jobs' leaf modules; sensors → jobs; jobs → never assets; resources → library."""
    bad = []
    for module, imports in project_imports().items():
        if module in ENTRY_POINTS:
            continue
        top = module.split(".")[0]
        for imported in imports:
            target = imported.split(".")[0]
            if top == "pretrain_assets" and (
                target == "sensors" or (target == "jobs" and imported not in JOBS_LEAVES)
            ):
                bad.append((module, imported))
            if top == "jobs" and (
                target == "pretrain_assets"
                or (target == "sensors" and imported != "sensors.recovery.campaign")
            ):
                bad.append((module, imported))
            if top == "resources" and target in ("pretrain_assets", "jobs", "sensors"):
                bad.append((module, imported))
            if top == "pretrain" and target != "pretrain":
                bad.append((module, imported))
    assert bad == []


def test_partitions_import_without_the_assets_package() -> None:
    code = (
        "import sys, jobs.partitions, sensors.recovery.training_runs\n"
        "bad = sorted(m for m in sys.modules if m.startswith('pretrain_assets'))\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
