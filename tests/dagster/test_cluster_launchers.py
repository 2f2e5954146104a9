"""Golden-file tests of the rendered Slurm batch script and Kubernetes PyTorchJob manifest.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/dagster/test_cluster_launchers.py``
and review the diff.
"""

import os
import subprocess
from pathlib import Path

import yaml

from resources.kubernetes import KubernetesLauncher
from resources.launching import PIPES_S3_INTERVAL_S, RemotePipes
from resources.slurm import SlurmLauncher

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; review and regenerate with UPDATE_GOLDEN=1"


def slurm() -> SlurmLauncher:
    return SlurmLauncher(
        nodes=4,
        gpus_per_node=8,
        partition="gpu",
        account="llm",
        setup_lines=["source /shared/venv/bin/activate"],
    )


def test_slurm_script_matches_golden_and_is_valid_bash(tmp_path: Path) -> None:
    script = slurm().render_sbatch(
        job_name="pretrain-b01", config_path="/shared/runs/b01/run.json", log_dir="/shared/runs/b01"
    )
    check_golden("slurm.sbatch", script)
    (tmp_path / "job.sbatch").write_text(script)
    subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")], check=True)
    assert "--nnodes=$SLURM_NNODES" in script and "--rdzv_backend=c10d" in script
    assert "#SBATCH --nodes=4" in script and "#SBATCH --gpus-per-node=8" in script


def test_pytorchjob_manifest_matches_golden() -> None:
    launcher = KubernetesLauncher(nodes=4, gpus_per_node=8, image="registry.local/pretrain:0.1.0")
    text = launcher.render_manifest(
        name="pretrain-b01",
        config_path="/shared/runs/b01/run.json",
        pipes_env={"DAGSTER_PIPES_CONTEXT": "ctx", "DAGSTER_PIPES_MESSAGES": "msg"},
    )
    check_golden("pytorchjob.yaml", text)
    job = yaml.safe_load(text)
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert master["replicas"] + worker["replicas"] == 4
    master_env = {e["name"] for e in master["template"]["spec"]["containers"][0]["env"]}
    worker_env = {e["name"] for e in worker["template"]["spec"]["containers"][0]["env"]}
    assert "DAGSTER_PIPES_CONTEXT" in master_env and "DAGSTER_PIPES_CONTEXT" not in worker_env
    assert worker["template"]["spec"]["containers"][0]["args"] == []  # only rank 0 reports


def test_both_launchers_declare_their_pipes_settings_once() -> None:
    """The Pipes-over-S3 settings live in ``RemotePipes``; both launchers inherit them, and
    Dagster's config schema of each shows them with the base's defaults."""
    pipes_fields = {"pipes_s3_bucket", "pipes_s3_prefix", "pipes_s3_interval_s", "s3"}
    assert set(RemotePipes.__annotations__) == pipes_fields
    for launcher in (SlurmLauncher, KubernetesLauncher):
        assert issubclass(launcher, RemotePipes)
        assert not pipes_fields & set(launcher.__annotations__), launcher.__name__
        fields = launcher().get_resource_definition().config_schema.config_type.fields
        defaults = {
            name: fields[name].default_value for name in ("pipes_s3_prefix", "pipes_s3_interval_s")
        }
        assert defaults == {"pipes_s3_prefix": "pipes", "pipes_s3_interval_s": PIPES_S3_INTERVAL_S}
        assert "pipes_s3_bucket" in fields  # s3 is a nested resource, not a config field
