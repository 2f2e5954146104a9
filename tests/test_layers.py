"""The library layer never imports dagster: every pretrain module imports without it."""

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
