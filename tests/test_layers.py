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


# -- the declared order of layers ----------------------------------------------------------------
# Imports flow one way: a module may import its own layer and the layers before it, never a later
# one. The library follows the data: text and data primitives, then the stages in pipeline order,
# then the training runtime, then what reads checkpoints. Every module belongs to exactly one
# layer (the longest matching prefix wins): a new package or top-level module must be placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: no knowledge of any stage
    (
        "pretrain",  # the package itself (__version__); matches no submodule
        "pretrain.errors",
        "pretrain.tmpfiles",
        "pretrain.hashset",
        "pretrain.storage",
        "pretrain.settings",
        "pretrain.charts",
        "pretrain.hardware",
        "pretrain.checks",
        "pretrain.identity",
        "pretrain.text",
        "pretrain.fasttext_models",
        "pretrain.run_files",
        "pretrain.eval_cache",
    ),
    ("pretrain.data",),  # raw records, extraction, the document schema
    ("pretrain.quality",),  # the classifier the filter stage applies
    ("pretrain.filters",),
    ("pretrain.dedup",),
    ("pretrain.decontam", "pretrain.mixture"),
    ("pretrain.tokenizer",),
    ("pretrain.packing",),  # owns the one packed-token format and its reader
    ("pretrain.model", "pretrain.scaling"),
    ("pretrain.distributed",),  # the process, its group, seeding, RNG state
    ("pretrain.checkpoint",),  # takes a CheckpointConfig, never the whole TrainConfig
    ("pretrain.train",),  # the training loop
    # what reads checkpoints and runs
    ("pretrain.recovery", "pretrain.eval", "pretrain.quarantine", "pretrain.hf_export"),
    ("pretrain.experiments",),  # proxies: train and evaluate small models on data variants
    ("pretrain.verify",),  # invariant checks over every stage's outputs
    # the Dagster layer: foundation -> assets -> jobs -> sensors, the application on top
    ("resources",),  # the resources: storage, metrics, launchers
    ("foundation",),  # config from the library, the stage registry, partitions, the asset factory
    ("pretrain_assets",),  # the assets, one module per stage
    ("jobs",),  # the jobs, each named after what it materializes
    ("sensors",),  # the sensors and the backfill schedule
    ("app",),  # the one Definitions, the pretrain command, the demo
)
PACKAGES = (
    "pretrain",
    "resources",
    "foundation",
    "pretrain_assets",
    "jobs",
    "sensors",
    "app",
)


def layer_of(module: str) -> int:
    """Index in LAYERS of the longest declared prefix of ``module``."""
    best, best_len = -1, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            covers = module == prefix or (prefix != "pretrain" and module.startswith(prefix + "."))
            if covers and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


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


def test_every_module_has_a_declared_layer() -> None:
    unplaced = sorted(m for m in project_imports() if layer_of(m) < 0)
    assert unplaced == [], f"place these modules in LAYERS (tests/test_layers.py): {unplaced}"


def test_imports_follow_the_declared_layers() -> None:
    """No module imports a later layer, lazy imports included."""
    upward = sorted(
        f"{module} (layer {layer_of(module)}) imports {imported} (layer {layer_of(imported)})"
        for module, imports in project_imports().items()
        for imported in imports
        if layer_of(imported) > layer_of(module)
    )
    assert upward == [], "imports that run back up:\n" + "\n".join(upward)


def test_the_layer_check_catches_an_upward_import() -> None:
    """The checker itself: a library module importing the Dagster layer is refused."""
    assert layer_of("pretrain.filters.pipeline") < layer_of("pretrain.train.loop")
    assert layer_of("pretrain.filters.pipeline") < layer_of("foundation.stages")
    assert layer_of("pretrain.some_new_module") == -1  # must be placed before it passes
    assert layer_of("sensors.eval_sensor") < layer_of("app.definitions")


def test_partitions_import_without_the_assets_package() -> None:
    code = (
        "import sys, foundation.partitions, sensors.recovery.training_runs\n"
        "bad = sorted(m for m in sys.modules if m.startswith('pretrain_assets'))\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
