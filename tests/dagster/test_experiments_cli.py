"""``pretrain experiments``: bad arguments are one line at the command, before anything is
registered or launched (issue 38, §4).

Each case runs the real command in this process (``app.cli.main``) against a real
Dagster instance in a temporary ``DAGSTER_HOME`` and a root that holds two shard groups, their
token pools and an experiment basis, written as the stages leave them (identities and
``pool.json``; no documents, no training)::

    .venv/bin/pytest -q tests/dagster/test_experiments_cli.py
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance

from app.cli import main as cli_main
from pretrain import identity, storage
from pretrain.experiments.pools import POOL_FILE, PoolInfo
from resources.storage import ArtifactStore
from tests.helpers.experiments import deduplicated_groups

GROUPS = {"web-0000": "web", "news-0000": "news"}


def _made(uri: str, stage: str) -> None:
    identity.write(uri, identity.Identity(stage=stage, code_version="t", config_hash="h",
                                          version=f"{stage}-{storage.basename(uri)}"))  # fmt: skip


ROOT = Path(__file__).resolve().parents[2]


def make_corpus(folder: Path) -> tuple[Path, str]:
    """(a ``DAGSTER_HOME`` whose instance knows the corpus, an artifact root holding it)."""
    home = folder / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "config" / "dagster.yaml", home / "dagster.yaml")
    store = ArtifactStore(root=str(folder / "artifacts"))
    with DagsterInstance.from_config(str(home)) as instance:
        deduplicated_groups(instance, list(GROUPS))
    for (group, source), sequences in zip(GROUPS.items(), (400, 100), strict=True):
        _made(store.uri("deduped_shards", group), "deduped_shards")
        pools = store.uri("proxy_pools", group)
        pool = PoolInfo(group=group, source=source, documents=50, excluded_documents=5,
                        sequences=sequences, tokens=sequences * 64, seq_len=64,
                        tokenizer_sha256="0" * 64, path=storage.join(pools, source))  # fmt: skip
        storage.write_json([pool.as_metadata()], storage.join(pools, POOL_FILE))
        _made(pools, "proxy_pools")
    _made(store.uri("experiment_basis"), "experiment_basis")
    storage.write_json({"shard_groups": list(GROUPS), "seq_len": 64},
                       store.uri("experiment_basis", "basis.json"))  # fmt: skip
    return home, store.root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def root(corpus: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared corpus's root (a refused command registers nothing in it)."""
    monkeypatch.setenv("DAGSTER_HOME", str(corpus[0]))
    return corpus[1]


def experiments(root: str, *args: str) -> int:
    return cli_main(["experiments", "--root", root, *args])


def error_line(capsys: pytest.CaptureFixture[str], status: int) -> str:
    """The one line a user error prints (exit status 1, nothing else on stderr)."""
    err = capsys.readouterr().err
    assert status == 1, err
    [line] = err.splitlines()
    assert line.startswith("pretrain experiments: error: "), line
    return line


def launched(root: str) -> tuple[bool, int]:
    """(any spec registered, backfills launched)."""
    with DagsterInstance.get() as instance:
        backfills = len(instance.get_backfills())
    return Path(root, "experiment_specs").exists(), backfills


@pytest.mark.parametrize(
    "args, said",
    [
        (["add", "p", "--weights", '{"web": Infinity, "news": 1}'], "must be finite, >= 0"),
        (["add", "p", "--weights", '{"web": -1, "news": 1}'], "must be finite, >= 0"),
        (["add", "p", "--seeds", "-1"], "seed=-1; use a seed >= 0"),
        (["add", "p", "--weights", "not json"],
         """--weights takes a JSON object, e.g. '{"web": 0.5, "news": 0.5}'; got 'not json'"""),
        (["ablate", "q", "--arm", "not json"], "--arm takes a JSON object, e.g. '{"),
        (["ablate", "q", "--arm", '"a string"'], "--arm takes a JSON object, e.g. '{\"min_qual"),
        (["ablate", "q", "--arm", '{"no_such_field": 1}'],
         "FilterConfig has no setting 'no_such_field'"),
        (["add", "p", "--filter", '{"no_such_field": 1}'],
         "FilterConfig has no setting 'no_such_field'"),
        (["admit", "nosuch-group"], "unknown shard group 'nosuch-group': the groups with"),
        (["add", "p", "--include", "nosuch"], "unknown shard group 'nosuch'"),
        (["add", "p", "--weights", '{"web": 1, "nosuch": 1}'],
         "weights name sources ['nosuch'] that no token pool"),
        (["search", "--search.candidates", "400"], "more than --search.confirm_above=300: add --yes"),
        (["search", "--search.seeds", "[-1]"], "use seeds >= 0"),
        (["admit", "web-0000", "--admission.seeds", "[-1, 0]"], "use seeds >= 0"),
    ],
)  # fmt: skip
def test_a_bad_argument_is_one_line_and_nothing_is_registered(
    root: str, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    line = error_line(capsys, experiments(root, *args))
    assert said in line, line
    assert launched(root) == (False, 0)


def test_search_honours_no_launch_and_asks_for_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, root = make_corpus(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert experiments(root, "search", "--search.candidates", "8", "--no-launch") == 0
    specs = list(Path(root, "experiment_specs").glob("mix-*.json"))
    assert len(specs) == 8 + 2  # the candidates and both anchors, registered
    assert launched(root) == (True, 0)  # and nothing launched
    assert not Path(root, "mixture_search", "launched").exists()  # nor handed to the sensor
    big = ["search", "--search.candidates", "8", "--search.confirm_above", "9"]
    assert "add --yes to launch them" in error_line(capsys, experiments(root, *big))
    assert experiments(root, *big, "--yes") == 0
    assert launched(root) == (True, 1)  # one backfill of the candidates
    assert len(list(Path(root, "mixture_search", "launched").glob("search-*.json"))) == 1


def test_search_on_an_empty_root_says_to_materialize_the_basis(
    tmp_path: Path, root: str, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = str(tmp_path / "empty")  # (the instance of ``root`` knows other shard groups)
    line = error_line(capsys, experiments(empty, "search"))
    assert f"no experiment basis under {empty}: materialize experiment_basis first" in line


def test_the_root_is_taken_before_or_after_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["experiments", "list", "--root", str(tmp_path)],
                 ["experiments", "--root", str(tmp_path), "list"],
                 ["experiments", "--root", "elsewhere", "list", "--root", str(tmp_path)]):  # fmt: skip
        assert cli_main(args) == 0
        assert capsys.readouterr().out == f"no experiments registered under {tmp_path}\n"


def _option_helps(text: str) -> dict[str, str]:
    """``--option`` → its help text, from argparse's ``--help`` output."""
    helps: dict[str, str] = {}
    option = None
    for line in text.splitlines():
        found = re.match(r"^  (--[\w.-]+)(?: [A-Z{\[][^ ]*)?(?:\s{2,}(.*))?$", line)
        if found:
            option = found.group(1)
            helps[option] = found.group(2) or ""
        elif option and line.startswith(" " * 10):
            helps[option] += " " + line.strip()
        else:
            option = None
    return {k: " ".join(v.split()) for k, v in helps.items()}


@pytest.mark.parametrize("command", ["admit", "search", "add", "ablate"])
def test_help_shows_each_options_default_and_a_line_of_its_own(
    capsys: pytest.CaptureFixture[str], command: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as done:
        cli_main(["experiments", command, "--help"])
    assert done.value.code == 0
    helps = _option_helps(capsys.readouterr().out)
    assert "--no-launch" in helps and len(helps) >= 4, helps
    if command == "admit":
        assert helps["--admission.policy.admit_at"].endswith("(default: 0.6)")
        assert helps["--admission.seeds"].endswith("(default: [0, 1, 2])")
    for option, text in helps.items():
        if option in ("--arm", "--weights", "--include", "--exclude", "--filter"):
            assert text, option  # no default: absent means "not given"
            continue
        assert re.search(r"\S.* \(default: [^)]+\)$", text), (option, text)
    own = [re.sub(r" \(default: .*\)$", "", text) for text in helps.values()]
    assert len(set(own)) == len(own), [t for t in own if own.count(t) > 1]
