"""``KubernetesLauncher`` driven end to end against a fake ``kubectl`` (tests/servers/fake_kubectl.py).

The fake records every call and plays back PyTorchJob states; rank 0 of the master pod is played
by real Dagster Pipes (``open_dagster_pipes`` from the manifest's variables), so checkpoint
messages travel back as they would from a pod. Checked: the ``train`` job succeeds and
materializes the reported checkpoints; a failed job shows the master pod's log; an interrupted
launch deletes the PyTorchJob and waits until no pod is left.

    pytest -q tests/dagster/test_kubernetes_launcher.py
"""

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import AssetKey, OpExecutionContext, instance_for_test, job, op

from jobs.training import train_job
from resources.kubernetes import KubernetesLauncher
from resources.launching import Launcher
from resources.storage import ArtifactStore
from tests.helpers.training import make_packed

FAKE = Path(__file__).resolve().parents[2] / "tests" / "servers" / "fake_kubectl.py"
CHECKPOINT = {"event": "checkpoint", "branch": "b00", "step": 4, "key": "b00-s000000004",
              "path": "/shared/runs/b00/step-00000004", "loss": 3.5, "tokens_seen": 1024}  # fmt: skip


class Interrupted(BaseException):
    """What Dagster raises in the op when the run is terminated."""


def fake_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **world: Any) -> Path:
    folder = tmp_path / "kubectl"
    folder.mkdir()
    for name, value in world.items():
        (folder / f"{name}.json").write_text(json.dumps(value))
    script = folder / "kubectl"
    script.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_KUBECTL_DIR", str(folder))
    monkeypatch.setenv("PYTHONPATH", os.getcwd())
    return folder


def calls(folder: Path) -> list[list[str]]:
    return [json.loads(line)["args"] for line in (folder / "calls.jsonl").read_text().splitlines()]


def launcher(folder: Path) -> KubernetesLauncher:
    return KubernetesLauncher(nodes=2, gpus_per_node=1, kubectl=str(folder / "kubectl"),
                              poll_interval_s=0.05)  # fmt: skip


def train(artifacts: Path, k8s: KubernetesLauncher, instance: Any) -> Any:
    make_packed(artifacts / "packed_tokens", num_train=64)
    config = {
        "run": {"max_steps": 4, "resume": "none"},
        "checkpoint": {"every_steps": 4},
        "metrics": {"wandb_mode": "disabled"},
    }
    return train_job.execute_in_process(
        run_config={"ops": {"train_model": {"config": config}}},
        resources={"store": ArtifactStore(root=str(artifacts)), "launcher": k8s},
        instance=instance,
        raise_on_error=False,
    )


def test_kubernetes_launcher_implements_the_launcher_protocol() -> None:
    assert isinstance(KubernetesLauncher(), Launcher)


def test_train_job_on_kubernetes_materializes_reported_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = {"event": "finished", "step": 4, "final_loss": 3.5, "tokens_seen": 1024}
    folder = fake_kubectl(
        tmp_path, monkeypatch, states=["Created", "Running", "Running", "Succeeded"],
        messages=[CHECKPOINT, finished],
    )  # fmt: skip
    with instance_for_test() as instance:
        result = train(tmp_path / "artifacts", launcher(folder), instance)
        assert result.success
        assert result.output_for_node("train_model")["checkpoints"] == ["b00-s000000004"]
        assert instance.get_materialized_partitions(AssetKey("checkpoints")) == {"b00-s000000004"}
    made = calls(folder)
    assert made[0] == ["apply", "-f", "-"]
    assert [c[:2] for c in made[1:5]] == [["get", "pytorchjob"]] * 4
    name = f"pretrain-{result.run_id[:8]}"
    assert made[-1][:2] == ["logs", f"{name}-master-0"]
    assert not any(c[0] == "delete" for c in made)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    assert manifest["metadata"]["name"] == name
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 1 and specs["Master"]["replicas"] == 1


def test_failed_pytorchjob_shows_the_master_pod_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fake_kubectl(
        tmp_path, monkeypatch, states=["Running", "Failed"], messages=[CHECKPOINT],
        pod_log="rank0: torch.OutOfMemoryError: CUDA out of memory",
    )  # fmt: skip
    with instance_for_test() as instance:
        result = train(tmp_path / "artifacts", launcher(folder), instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.user_failure_data
    assert "training did not finish (exit code 1" in failure.step_failure_data.error.message
    assert "CUDA out of memory" in error.metadata["log_tail"].text
    assert error.metadata["log_path"].value.endswith(f"pretrain-{result.run_id[:8]}.log")
    assert error.metadata["checkpoints"].value == ["b00-s000000004"]


def test_interrupted_launch_deletes_the_job_and_waits_for_its_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fake_kubectl(tmp_path, monkeypatch, states=["Running"], messages=[CHECKPOINT])
    k8s = launcher(folder)

    def interrupt(message: dict[str, Any]) -> None:
        raise Interrupted(message["key"])  # the run is terminated while the job runs

    @op
    def launch(context: OpExecutionContext) -> None:
        k8s.launch(context, config_path="/shared/run.json", run_dir=str(tmp_path / "run"),
                   on_message=interrupt)  # fmt: skip

    @job
    def one_launch() -> None:
        launch()

    with pytest.raises(Interrupted, match="b00-s000000004"):
        one_launch.execute_in_process()
    made = calls(folder)
    [delete] = [c for c in made if c[0] == "delete"]
    assert delete[:3] == ["delete", "pytorchjob", delete[2]] and "--wait=true" in delete
    pod_gets = [c for c in made[made.index(delete) :] if c[:2] == ["get", "pods"]]
    assert len(pod_gets) == 2  # waited until the lingering pods were gone
    assert f"training.kubeflow.org/job-name={delete[2]}" in pod_gets[-1]
