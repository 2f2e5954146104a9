"""The embedded default corpus: real text already on any machine that has this install.

Nothing is downloaded. Candidates are enumerated deterministically (sorted paths):

| source    | what                                                                 | kind       |
|-----------|----------------------------------------------------------------------|------------|
| `code`    | Python standard-library `.py` files (no `site-packages`, tests optional) | `text`  |
| `prose`   | long descriptions in installed distributions' `METADATA`/`PKG-INFO`  | `metadata` |
| `prose`   | `.md`/`.rst` docs shipped inside installed packages                 | `text`     |
| `license` | licence files in `*.dist-info` (`LICENSE*`, `COPYING*`, `licenses/*`) | `text`    |

Licence files are real near-duplicates of each other (many MIT/BSD/Apache copies), which is
what the dedup stage should find. Usage::

    from pretrain.data.harvest import discover_embedded
    files = discover_embedded(max_files_per_source={"code": 200, "prose": 100, "license": 100})
    files[0]  # RawFile(uri='/usr/lib/python3.11/__future__.py', source='code', kind='text')

Undecodable files are not dropped here: the reader turns them into ``undecodable`` rejects.
"""

from __future__ import annotations

import importlib.metadata
import re
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from pretrain.data.readers import RawFile
from pretrain.errors import ConfigError

SOURCES = ("code", "prose", "license")
MAX_FILE_BYTES = 1_000_000
_LICENSE_PREFIXES = ("license", "licence", "copying", "notice")
_DOC_SUFFIXES = (".md", ".rst")
_TEST_DIRS = {"test", "tests", "testing", "idlelib", "__pycache__"}


def discover_embedded(
    *,
    max_files_per_source: dict[str, int] | int | None = None,
    include_tests: bool = False,
) -> list[RawFile]:
    """All embedded-corpus files, grouped by source (code, prose, license), sorted by path.

    ``max_files_per_source`` caps each source (an int caps all; a dict caps the named ones).
    A cap keeps an evenly spaced subsample of the sorted list, so it still spans the stdlib.
    """
    caps = _caps(max_files_per_source)
    dists = _distributions()
    found = {
        "code": [RawFile(uri=p, source="code", kind="text") for p in _stdlib_files(include_tests)],
        "prose": _metadata_files(dists) + _package_docs(dists),
        "license": [RawFile(uri=p, source="license", kind="text") for p in _license_files(dists)],
    }
    out: list[RawFile] = []
    for source in SOURCES:
        files = sorted(found[source], key=lambda f: f.uri)
        out.extend(_spread(files, caps.get(source)))
    return out


def _caps(max_files_per_source: dict[str, int] | int | None) -> dict[str, int]:
    if max_files_per_source is None:
        return {}
    if isinstance(max_files_per_source, int):
        caps = dict.fromkeys(SOURCES, max_files_per_source)
    else:
        unknown = set(max_files_per_source) - set(SOURCES)
        if unknown:
            raise ConfigError(
                f"max_files_per_source has unknown sources {sorted(unknown)}; use {SOURCES}"
            )
        caps = dict(max_files_per_source)
    for source, cap in caps.items():
        if cap < 0:
            raise ConfigError(f"max_files_per_source[{source!r}]={cap}: use a count >= 0")
    return caps


def _spread(files: list[RawFile], cap: int | None) -> list[RawFile]:
    """Evenly spaced, order-preserving subsample of ``cap`` files (all when no cap)."""
    if cap is None or len(files) <= cap:
        return files
    return [files[i * len(files) // cap] for i in range(cap)]


def _stdlib_files(include_tests: bool) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in root.rglob("*.py"):
        parts = set(path.relative_to(root).parts[:-1])
        if any(p in ("site-packages", "dist-packages") for p in parts):
            continue
        if not include_tests and parts & _TEST_DIRS:
            continue
        if _small_file(path):
            out.append(str(path))
    return sorted(out)


def _small_file(path: Path) -> bool:
    try:
        return path.is_file() and 0 < path.stat().st_size <= MAX_FILE_BYTES
    except OSError:
        return False


def _distributions() -> list[importlib.metadata.Distribution]:
    """Distributions installed in this environment's site-packages, one per name.

    Only site-packages counts, so the result does not depend on the working directory
    (``sys.path`` may hold ``''``, which would add a source checkout's ``*.egg-info``).
    """
    site_dirs = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    by_name: dict[str, tuple[Path, importlib.metadata.Distribution]] = {}
    for dist in importlib.metadata.distributions():
        meta_dir = getattr(dist, "_path", None)  # the *.dist-info / *.egg-info folder
        if meta_dir is None or Path(meta_dir).resolve().parent not in site_dirs:
            continue
        name = re.sub(r"[-_.]+", "-", str(dist.metadata["Name"] or "")).lower()
        path = Path(meta_dir).resolve()
        if name not in by_name or path < by_name[name][0]:
            by_name[name] = (path, dist)
    return [dist for _, dist in sorted(by_name.values(), key=lambda item: item[0])]


def _dist_paths(dists: list[importlib.metadata.Distribution]) -> Iterable[tuple[list[str], Path]]:
    """(RECORD path parts, local path) for each doc or licence candidate of each distribution."""
    for dist in dists:
        for entry in dist.files or []:
            listed = str(entry)
            lower = listed.lower()
            name = lower.rpartition("/")[2]
            if (
                lower.endswith(_DOC_SUFFIXES)
                or name.startswith(_LICENSE_PREFIXES)
                or ("/licenses/" in lower)
            ):
                yield listed.split("/"), Path(str(dist.locate_file(entry)))


def _metadata_files(dists: list[importlib.metadata.Distribution]) -> list[RawFile]:
    out = []
    for dist in dists:
        # _distributions() kept only distributions with this folder; typeshed declares the
        # private attribute on PathDistribution alone
        meta_dir = Path(dist._path).resolve()  # type: ignore[attr-defined]
        for name in ("METADATA", "PKG-INFO"):
            path = meta_dir / name
            if _small_file(path) and _has_body(path):
                out.append(RawFile(uri=str(path), source="prose", kind="metadata"))
                break
    return out


def _has_body(path: Path) -> bool:
    """Whether METADATA holds a long description (many distributions ship headers only)."""
    data = path.read_bytes().replace(b"\r\n", b"\n")
    _, sep, body = data.partition(b"\n\n")
    return bool(sep and body.strip()) or b"\nDescription:" in data


def _license_files(dists: list[importlib.metadata.Distribution]) -> set[str]:
    out = set()
    for parts, path in _dist_paths(dists):
        in_meta = any(p.endswith((".dist-info", ".egg-info")) for p in parts[:-1])
        is_license = parts[-1].lower().startswith(_LICENSE_PREFIXES) or "licenses" in parts
        if in_meta and is_license and _small_file(path):
            out.add(str(path.resolve()))
    return out


def _package_docs(dists: list[importlib.metadata.Distribution]) -> list[RawFile]:
    paths = set()
    for parts, path in _dist_paths(dists):
        if any(p.endswith((".dist-info", ".egg-info")) or p in _TEST_DIRS for p in parts):
            continue
        name = parts[-1].lower()
        if parts[0] in ("..", "") or not name.endswith(_DOC_SUFFIXES):
            continue
        if name.startswith(_LICENSE_PREFIXES):
            continue  # licences belong to the `license` source
        if _small_file(path):
            paths.add(str(path.resolve()))
    return [RawFile(uri=p, source="prose", kind="text") for p in sorted(paths)]
