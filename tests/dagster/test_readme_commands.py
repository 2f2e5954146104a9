"""Every command of the README is run by a test, or skipped here with the reason (issue 44).

``WHO_RUNS`` names, for each command of the README's fenced ``bash`` blocks, the test that runs
it (at a small scale, on data it makes or that ``../shared/data`` holds; a service the tests
cannot start here runs against its local stand-in: moto for ``s3://``), or why none can. The
fast test fails on a README command missing from it, on an entry no command needs any more and
on a named test that does not exist, so the README cannot drift from the code unnoticed.

The commands this module runs itself:

- fast: the ``pretrain`` commands that read nothing (``plan``, ``demo --help``, ``experiments
  show`` on a spec it registers), in process; the Slurm and Kubernetes ``export`` blocks, by
  loading the definitions with those variables (the store and launcher they give);
- slow: the "Your own data" commands as a shell runs them, with the README's paths replaced by
  the test's own: the one-source demo from ``s3://bucket/crawl/2024-10`` on moto (300 Reuters
  stories, trained at 4 steps; its mixture search is skipped in one line), then ``pretrain
  experiments search`` on what it made (skipped too); ``pretrain data`` over news and books
  with a Wikipedia reference; ``make ui`` with an ``s3://`` root.

    .venv/bin/pytest -q tests/dagster/test_readme_commands.py            # add -m "not slow" for the fast
"""

from __future__ import annotations

import ast
import bz2
import contextlib
import gzip
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster_graphql import DagsterGraphQLClient

from tests.helpers.readme import ReadmeCommand, parse_commands, readme_command, readme_commands
from tests.helpers.shared_data import SHARED_DATA, SHARED_EVAL
from tests.servers.dagster_server import stop_group

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: the README's .venv/bin/
THIS = "tests/dagster/test_readme_commands.py"
NEWS = SHARED_DATA / "web" / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz"
BOOKS = SHARED_DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"
WIKI = SHARED_DATA / "books" / "enwiki_2016_pages-articles1_shortened_206pages.xml.bz2"
STEPS = 4  # the one-source demo's training steps


@dataclass(frozen=True)
class RunBy:
    """A test runs the command: ``tests/<file>.py::<test function or the fixture that runs it>``."""

    test: str
    how: str = ""  # what differs from the README's command (scale, paths, stand-ins)


@dataclass(frozen=True)
class Skipped:
    reason: str


OWN_DATA = f"{THIS}::test_readme_own_data_commands"
CHEAP = f"{THIS}::test_readme_commands_that_read_nothing_run"
E2E = "tests/dagster/test_end_to_end.py::campaign"
STATUS_EXPORT = "tests/dagster/test_end_to_end.py::test_cli_status_and_export_read_the_campaign"
OWN_JSONL = "tests/dagster/test_provenance_own_data.py::test_readme_own_data_command_on_plain_jsonl"
EXPERIMENTS_CLI = "tests/dagster/test_experiments_dagster.py::test_the_cli_reads_experiments_back"
RAY = "tests/dagster/test_ray_backfill.py::test_a_batch_of_shard_groups_runs_as_one_ray_job_each_group_its_own"
SLURM_CONFIG = (
    'export PRETRAIN_LAUNCHER_CONFIG=\'{ "nodes": 16, "gpus_per_node": 8, "cpus_per_task": 96, '
    '"partition": "gpu", "account": "llm", "python": "/opt/pretrain/.venv/bin/python", '
    '"setup_lines": ["module load cuda/12.4"], "pipes_s3_bucket": "campaign", '
    '"pipes_s3_prefix": "pipes", "s3": {"region_name": "us-east-1"} }\''
)
KUBERNETES_CONFIG = (
    'export PRETRAIN_LAUNCHER_CONFIG=\'{ "nodes": 4, "gpus_per_node": 8, "image": '
    '"registry.internal/pretrain:1.0", "namespace": "training", "volume_claim": "pretrain-runs", '
    '"mount_path": "/shared", "pipes_s3_bucket": "campaign" }\''
)
SETTINGS_DEMO = (
    ".venv/bin/pretrain demo --filter.heuristics.max_chars 5000000 --filter.urls null "
    '--dedup.threshold 0.7 --mixture.weights \'{"code": 0.5, "prose": 0.3, "license": 0.2}\' '
    "--train.optim.lr 1e-3"
)

WHO_RUNS: dict[str, RunBy | Skipped] = {
    # Two commands
    "make demo": RunBy(E2E, "run_demo, what make demo runs, on the embedded corpus, 30 steps"),
    "make test": Skipped(
        "the whole suite, this test included; CI (.ci/run) runs it on a fresh clone"
    ),
    # Your own data
    "mkdir -p .dagster_home && export DAGSTER_HOME=$PWD/.dagster_home": RunBy(OWN_DATA),
    ".venv/bin/pretrain data --source /data/my_crawl --source-name web": RunBy(
        OWN_JSONL, "on a folder of plain JSONL, with --toxicity.labelled_uris added"
    ),
    ".venv/bin/pretrain data --source /data/wire --source-name news --add-source "
    "books=/data/gutenberg --reference /data/wikipedia.jsonl.gz --languages en,de": RunBy(
        OWN_DATA, "Reuters stories, two Gutenberg books, Wikipedia pages as the reference"
    ),
    ".venv/bin/pretrain data --source /data/forum --source-name web --toxicity.labelled_uris "
    "'[\"/data/forum_labels.jsonl.gz\"]'": RunBy(OWN_JSONL, "its own stories and labels"),
    ".venv/bin/python -m app.demo --source s3://bucket/crawl/2024-10 --source-name web": RunBy(
        OWN_DATA, f"the bucket on moto, 300 Reuters stories, {STEPS} steps"
    ),
    "PRETRAIN_ROOT=s3://bucket/campaign PRETRAIN_S3_ENDPOINT_URL=http://127.0.0.1:9000 make ui": RunBy(
        f"{THIS}::test_readme_make_ui_on_an_s3_root", "moto as the endpoint, a free port"
    ),
    # The `pretrain` command
    ".venv/bin/pretrain plan --gpu h100 --gpus 256 --days 14": RunBy(CHEAP),
    ".venv/bin/pretrain plan --params 6.74e9 --tokens 2e12 --gpu a100": RunBy(CHEAP),
    ".venv/bin/pretrain status": RunBy(STATUS_EXPORT, "on the campaign, with --root"),
    ".venv/bin/pretrain export b00-s000000600 /tmp/export": RunBy(
        STATUS_EXPORT, "the campaign's last checkpoint, a temp folder, with --root"
    ),
    ".venv/bin/pretrain demo --steps 300": RunBy(E2E, "30 steps"),
    ".venv/bin/pretrain data --source DIR --source-name web": RunBy(
        OWN_JSONL, "with --toxicity.labelled_uris added"
    ),
    # Settings: defined once, reachable everywhere
    SETTINGS_DEMO: RunBy(E2E, "its options, read from this README, at the campaign's scale"),
    ".venv/bin/pretrain demo --help": RunBy(CHEAP),
    # Deciding data by experiment
    ".venv/bin/pretrain experiments search --search.candidates 32 --search.target mean_bpb": RunBy(
        OWN_DATA,
        "after the one-source demo: skipped, with the reason; a search that launches is "
        "the search_mixture job's launch_search, in tests/dagster/test_experiments_dagster.py",
    ),
    ".venv/bin/pretrain experiments list --kind search": RunBy(EXPERIMENTS_CLI, "with --root"),
    ".venv/bin/pretrain experiments list --root DIR": RunBy(
        "tests/dagster/test_experiments_cli.py::test_the_root_is_taken_before_or_after_the_subcommand",
        "on the test's corpus, the root given after the subcommand",
    ),
    ".venv/bin/pretrain experiments compare --group web-0007": RunBy(
        EXPERIMENTS_CLI, "the group the test admits, with --root"
    ),
    ".venv/bin/pretrain experiments show mix-0a1b2c3d-s0": RunBy(CHEAP, "a spec it registers"),
    ".venv/bin/pretrain plan --gpus 64 --days 14": RunBy(CHEAP),
    # Running the trainer without Dagster
    ".venv/bin/python -m pretrain.train --recipe debug_tiny --packed "
    ".pretrain/artifacts/packed_tokens --out /tmp/run": RunBy(
        "tests/unit/train/test_train.py::test_cli_single_process_learns_and_reports",
        "its main() in process, on a small packed corpus, 40 steps",
    ),
    ".venv/bin/torchrun --standalone --nproc_per_node=2 -m pretrain.train --config run.json": RunBy(
        "tests/unit/train/test_train.py::test_torchrun_fsdp2_checkpoints_metrics_wandb_and_exact_resume"
    ),
    # Deployment: a Ray cluster (tests/servers/ray_cluster.py starts a head and a worker with `ray start`)
    "ray start --head --num-cpus=16 --dashboard-host=0.0.0.0": RunBy(RAY, "127.0.0.1, 1 CPU"),
    "ray start --address=head.internal:6379 --num-cpus=16": RunBy(
        RAY, "a worker on this machine, 1 CPU"
    ),
    "export RAY_ADDRESS=http://head.internal:8265": RunBy(RAY, "the test's head's job API"),
    "export DAGSTER_HOME=/srv/dagster": RunBy(RAY, "a SQLite instance in a temp folder"),
    "dagster dev -m app.ray_definitions": RunBy(
        RAY, "the same module loaded as a code location by its dagster asset materialize"
    ),
    "dagster asset materialize -m app.ray_definitions --select raw_shards --partition web-0000": (
        RunBy(RAY, "one of the test's shard groups, on its two-node cluster")
    ),
    # Deployment: Slurm and Kubernetes with S3 artifacts (the variables dagster dev reads)
    "export PRETRAIN_ROOT=s3://campaign/artifacts": RunBy(CHEAP, "the store it gives"),
    "export PRETRAIN_LAUNCHER=slurm": RunBy(CHEAP, "the launcher it gives"),
    SLURM_CONFIG: RunBy(CHEAP, "the launcher it gives"),
    "dagster dev -w workspace.yaml": RunBy(
        "tests/faults/test_training_cancel.py::test_terminate_from_dagster_stops_every_training_process",
        "PRETRAIN_LAUNCHER=slurm on a one-node cluster (skipped without slurm-wlm); with an s3:// "
        "root: tests/dagster/test_slurm_s3.py",
    ),
    "export PRETRAIN_LAUNCHER=kubernetes": RunBy(CHEAP, "the launcher it gives"),
    KUBERNETES_CONFIG: RunBy(CHEAP, "the launcher it gives"),
}


def ran_by(test: str) -> list[ReadmeCommand]:
    """The README commands ``WHO_RUNS`` gives to ``test``, in README order."""
    return [c for c in readme_commands() if getattr(WHO_RUNS.get(c.text), "test", None) == test]


def defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


# -- fast: every command accounted for ----------------------------------------------------------
def test_every_readme_command_is_run_by_a_test_or_skipped_with_a_reason() -> None:
    commands = readme_commands()
    assert len(commands) >= 30, "the README parser found too few commands"
    unaccounted = [f"README line {c.line}: {c.text}" for c in commands if c.text not in WHO_RUNS]
    assert not unaccounted, (
        "README commands no test runs (run each in a test, or list it in WHO_RUNS with the "
        "test that runs it or the reason it cannot run):\n" + "\n".join(unaccounted)
    )
    stale = sorted(set(WHO_RUNS) - {c.text for c in commands})
    assert not stale, f"WHO_RUNS entries for commands the README no longer has: {stale}"
    for text, who in WHO_RUNS.items():
        if isinstance(who, Skipped):
            assert len(who.reason) > 20, (text, who)
            continue
        file, _, name = who.test.partition("::")
        assert (ROOT / file).is_file(), (text, who.test)
        assert name in defined_names(ROOT / file), f"{who.test} (for {text!r}) does not exist"


def test_the_parser_splits_commands_as_a_shell_would() -> None:
    markdown = "\n".join([
        "# Start", "```bash", "# a comment line", "", "make demo    # with a comment",
        "pretrain data --source /d \\", "    --add-source 'b=/x # not a comment'",
        "export CONFIG='{", '  "nodes": 2', "}'", "```", "```yaml", "key: value", "```",
        "## Next", "```bash", "A=1 make ui", "```",
    ])  # fmt: skip
    commands = parse_commands(markdown)
    assert [c.text for c in commands] == [
        "make demo",
        "pretrain data --source /d --add-source 'b=/x # not a comment'",
        "export CONFIG='{ \"nodes\": 2 }'",
        "A=1 make ui",
    ]
    assert commands[1].argv == (
        "pretrain",
        "data",
        "--source",
        "/d",
        "--add-source",
        "b=/x # not a comment",
    )
    assert [c.line for c in commands] == [5, 6, 8, 17]
    assert commands[2].exports == {"CONFIG": '{\n  "nodes": 2\n}'} == commands[0].exports
    assert [c.section for c in commands] == ["Start"] * 3 + ["Next"]
    with pytest.raises(ValueError, match="open quote"):
        parse_commands("```bash\necho 'never closed\n```")


# -- fast: the commands that read nothing --------------------------------------------------------
def run_pretrain(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """``pretrain ARGV`` in this process: its output; fails unless it exits 0."""
    from app.cli import main

    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's --help
        code = exit_.code or 0
    out, err = capsys.readouterr()
    assert code == 0 and out.strip(), (argv, out[-2000:], err[-2000:])
    return out


def check_exports(command: ReadmeCommand, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The definitions that ``dagster dev`` loads with the variables of the command's block:
    the store at its ``PRETRAIN_ROOT`` and the launcher of ``PRETRAIN_LAUNCHER``, with every
    field of ``PRETRAIN_LAUNCHER_CONFIG``."""
    from app.definitions import LAUNCHERS, build_definitions

    monkeypatch.setenv("PRETRAIN_ROOT", str(tmp_path / "default-root"))
    for name, value in command.exports.items():
        monkeypatch.setenv(name, value)
    resources = build_definitions().resources
    assert resources["store"].root == os.environ["PRETRAIN_ROOT"]
    launcher = resources["launcher"]
    assert type(launcher) is LAUNCHERS[os.environ.get("PRETRAIN_LAUNCHER", "torchrun")]
    for field, value in json.loads(os.environ.get("PRETRAIN_LAUNCHER_CONFIG", "{}")).items():
        given = getattr(launcher, field)
        if field == "s3":
            assert {k: getattr(given, k) for k in value} == value
        else:
            assert (list(given) if isinstance(given, tuple) else given) == value, field


def test_readme_commands_that_read_nothing_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from pretrain.experiments import registry

    monkeypatch.setenv("PRETRAIN_ROOT", str(tmp_path / "artifacts"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    (spec,) = registry.search_specs("search-readme", [{"web": 0.5, "news": 0.5}], recipe="proxy_tiny",
                                    seeds=(0,), labels=["c000"])  # fmt: skip
    registry.register(str(tmp_path / "artifacts"), spec)
    names = {"mix-0a1b2c3d-s0": spec.name}  # the README's example name: a spec of this test's
    commands = ran_by(CHEAP)
    assert len(commands) == 11, [c.text for c in commands]  # PRETRAIN_ROOT's export twice
    for command in commands:
        if command.argv[0] == "export":
            with monkeypatch.context() as scoped:
                check_exports(command, scoped, tmp_path)
            continue
        assert command.argv[0] == ".venv/bin/pretrain", command.text
        out = run_pretrain([names.get(word, word) for word in command.argv[1:]], capsys)
        if command.argv[1:3] == ("experiments", "show"):
            shown, _, result = out.partition("not run yet")
            assert json.loads(shown)["name"] == spec.name and result.strip() == ""
        if command.argv[1:] == ("demo", "--help"):  # "every --<stage>.<field> option"
            assert "--train.optim.lr" in out and "--filter.urls" in out, out[:2000]
        if command.argv[1:2] == ("plan",):
            assert "FLOPs" in out or "| chinchilla |" in out, out


# -- slow: "Your own data", as a shell runs it ---------------------------------------------------
def substituted(command: ReadmeCommand, replacements: dict[str, str]) -> str:
    """The command's shell text with the README's placeholders replaced; each must be there."""
    shell = command.shell
    for old, new in replacements.items():
        assert old in shell, f"README command {command.text!r} lacks {old!r}: update this test"
        shell = shell.replace(old, new)
    return shell


def run_script(cwd: Path, lines: list[str], env: dict[str, str], timeout: int) -> list[str]:
    """Run ``lines`` as one ``bash -e`` script in ``cwd``; the output of each line (stdout and
    stderr together); fails on a non-zero exit with the whole output. Prints each line's wall
    time."""
    marks = [f'echo "@@ {i} $(date +%s.%N)"\n{line}' for i, line in enumerate(lines)]
    script = "set -e\n" + "\n".join([*marks, f'echo "@@ {len(lines)} $(date +%s.%N)"'])
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:]
    parts = re.split(r"^@@ \d+ ([\d.]+)\n", done.stdout, flags=re.M)
    assert len(parts) == 2 * len(lines) + 3, done.stdout[-6000:]
    times = [float(t) for t in parts[1::2]]
    for line, begun, ended in zip(lines, times, times[1:], strict=False):
        print(f"{ended - begun:6.1f} s  {line[:90]}")
    return parts[2:-1:2]


def news_stories(count: int, skip: int = 0) -> list[dict]:
    """Reuters stories as plain records (``id``, ``text``)."""
    found = []
    with gzip.open(NEWS, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= skip:
                record = json.loads(line)
                found.append({"id": record["id"], "text": record["text"]})
            if len(found) == count:
                break
    return found


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return path


def wikipedia_pages(count: int) -> list[dict]:
    """The text of ``count`` Wikipedia pages of 2,000 to 20,000 characters (wikitext as
    exported)."""
    xml = bz2.open(WIKI, "rt", encoding="utf-8").read()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", xml, flags=re.S)]
    return [{"text": t} for t in texts if 2000 < len(t) < 20_000][:count]


def gutenberg_books(names: tuple[str, ...]) -> list[dict]:
    with gzip.open(BOOKS, "rt", encoding="utf-8") as f:
        books = [json.loads(line) for line in f]
    return [b for b in books if b["id"].rsplit("/", 1)[-1] in names]


def shell_env(tmp_path: Path) -> dict[str, str]:
    """What the README's commands need around them here: the artifacts under the test's folder
    (the default root is the checkout's .pretrain), the shared eval copies, the Hub unreachable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRETRAIN_ROOT": str(tmp_path / "artifacts"),
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip
    env.pop("DAGSTER_HOME", None)  # the README's first line sets it
    env["PRETRAIN_EVAL_DIR"] = str(SHARED_EVAL if SHARED_EVAL.is_dir() else tmp_path / "evals")
    return env


def sources_in(mixture: Path) -> set[str]:
    return set(pq.read_table(mixture / "train.parquet", columns=["source"])["source"].to_pylist())


@pytest.mark.slow
@pytest.mark.skipif(
    not NEWS.is_file(), reason="needs ../shared/data (Reuters, Gutenberg, Wikipedia)"
)
def test_readme_own_data_commands(tmp_path: Path) -> None:
    """The one-source demo of issue 44 from an S3 prefix (moto), then a search on what it
    made; and the multi-source ``pretrain data`` command."""
    from tests.servers.s3_server import moto_s3

    started = time.monotonic()
    commands = {c.text: c for c in ran_by(OWN_DATA)}
    assert len(commands) == 4, list(commands)
    home = readme_command("mkdir -p .dagster_home").shell
    demo = readme_command(".venv/bin/python -m app.demo --source s3://")
    bin_dir = {".venv/bin/": f"{BIN}/"}
    # a small scale; one checkpoint, so one evaluation
    small = (f" --steps {STEPS} --vocab-size 512 --seq-len 64 --eval-examples 20"
             f" --train.checkpoint.every_steps {STEPS}")  # fmt: skip
    with moto_s3(bucket="bucket"):
        import boto3

        body = "".join(json.dumps(r) + "\n" for r in news_stories(300)).encode()
        boto3.client("s3").put_object(Bucket="bucket", Key="crawl/2024-10/stories.jsonl", Body=body)
        out = run_script(tmp_path / "one", [
            home,
            substituted(demo, bin_dir) + small,
            substituted(readme_command(".venv/bin/pretrain experiments search"), bin_dir),
        ], shell_env(tmp_path / "one"), timeout=900)  # fmt: skip
    demo_wall = time.monotonic() - started
    print(out[1][-2500:])  # with -s: the end of what the user sees
    one_source = "the corpus has one source, 'web': a mixture of one source has nothing to decide"
    searching = [line for line in out[1].splitlines() if "mixture search" in line]
    assert searching == [
        f"  mixture search skipped: {one_source}; training on the configured weights"
    ]
    assert "experiment_basis" not in out[1] and "proxy_runs" not in out[1]
    assert "pretrain demo: the whole asset graph materialized" in out[1]
    assert re.search(rf"steps trained +{STEPS}\n", out[1]), out[1][-3000:]
    artifacts = tmp_path / "one" / "artifacts"
    manifest = json.loads((artifacts / "manifests" / "web-0000.json").read_text())
    assert [f["uri"] for f in manifest["files"]] == ["s3://bucket/crawl/2024-10/stories.jsonl"]
    assert sources_in(artifacts / "data_mixture") == {"web"}
    assert (tmp_path / "one" / ".dagster_home").is_dir()  # the README's first line made it
    assert [p.name for p in (artifacts / "eval_reports").iterdir()] == [f"b00-s{STEPS:09d}"]
    assert out[2].strip().splitlines()[-1].startswith(f"mixture search skipped: {one_source}")
    assert not (artifacts / "mixture_search").exists()  # nothing launched, nothing recorded

    # news and books, a Wikipedia reference for the quality classifier, two languages kept
    data = readme_command(".venv/bin/pretrain data --source /data/wire")
    folder = tmp_path / "two"
    wire = write_jsonl(folder / "wire" / "stories.jsonl", news_stories(150, skip=300)).parent
    books = write_jsonl(folder / "gutenberg" / "books.jsonl",
                        gutenberg_books(("chesterton-brown.txt", "chesterton-thursday.txt"))).parent  # fmt: skip
    wiki = write_jsonl(folder / "wikipedia.jsonl.gz", wikipedia_pages(12))
    env = shell_env(folder)
    env["PRETRAIN_EVAL_DIR"] = str(folder / "no_evals")  # no 13-gram decontamination: faster
    out = run_script(folder, [home, substituted(data, {
        **bin_dir, "/data/wire": str(wire), "/data/gutenberg": str(books),
        "/data/wikipedia.jsonl.gz": str(wiki)})], env, timeout=600)  # fmt: skip
    summary = json.loads(out[1].strip().splitlines()[-1])
    assert summary["quality_classifier"] == "trained", summary
    assert summary["train_docs"] > 50 and summary["raw_rejected"] == 0, summary
    mixture = folder / "artifacts" / "data_mixture"
    assert sources_in(mixture) == {"news", "books"}
    languages = pq.read_table(mixture / "train.parquet", columns=["language"])["language"]
    assert set(languages.to_pylist()) <= {"en", "de"}
    print(
        f"one-source demo and its commands {demo_wall:.0f} s; all {time.monotonic() - started:.0f} s"
    )


@pytest.mark.slow
def test_readme_make_ui_on_an_s3_root(tmp_path: Path) -> None:
    """``make ui`` with the README's S3 root, moto as the endpoint: the UI loads the project,
    and a job launched from it (through the daemon) writes its output to the bucket."""
    from tests.servers.dagster_server import free_port, wait_for
    from tests.servers.s3_server import moto_s3

    (command,) = ran_by(f"{THIS}::test_readme_make_ui_on_an_s3_root")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    if (
        BIN != ROOT / ".venv" / "bin"
        or subprocess.run(["make", "-q", "install"], cwd=ROOT).returncode
    ):
        pytest.skip("make ui needs this checkout's .venv, installed (make install)")
    port = free_port()
    with moto_s3(bucket="bucket") as endpoint:
        import boto3

        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "PORT": str(port)}
        env.pop("PRETRAIN_ROOT", None)
        shell = substituted(command, {"http://127.0.0.1:9000": endpoint})
        with open(tmp_path / "ui.log", "wb") as log, _started(shell, env, log) as ui:
            wait_for("the UI", lambda: _answers(port, ui, tmp_path / "ui.log"), timeout_s=120)
            client = DagsterGraphQLClient("127.0.0.1", port_number=port)
            run_id = wait_for(
                "the code location", lambda: _submit(client, "scaling_plan_job"), timeout_s=60
            )
            s3 = boto3.client("s3")

            def plan_written() -> bool:
                found = s3.list_objects_v2(Bucket="bucket", Prefix="campaign/scaling_plan/")
                return any(o["Key"].endswith("plan.json") for o in found.get("Contents", []))

            wait_for(f"run {run_id} to write s3://bucket/campaign/scaling_plan", plan_written, 180)
    assert (tmp_path / "home" / "dagster.yaml").is_file()  # make ui's home target


@contextlib.contextmanager
def _started(shell: str, env: dict[str, str], log: io.BufferedWriter) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(["bash", "-c", shell], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        stop_group(proc)


def _answers(port: int, proc: subprocess.Popen, log: Path) -> bool:
    assert proc.poll() is None, log.read_text()[-3000:]
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
    except OSError:
        return False
    return True


def _submit(client: DagsterGraphQLClient, job: str) -> str | None:
    try:
        return client.submit_job_execution(job)
    except Exception:  # the code location is still loading
        return None
