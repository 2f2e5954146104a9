"""``KubernetesLauncher``: multi-node training as a Kubeflow ``PyTorchJob`` (via ``kubectl``).

``PipesK8sClient`` launches a single pod, so multi-node training renders a PyTorchJob
(training-operator v1: one Master + N-1 Workers, ``nprocPerNode`` GPUs each; the operator sets
``PET_*`` variables that torchrun reads for the rendezvous). The run directory — checkpoints
and the Pipes message file — is a ReadWriteMany volume mounted by every pod and by Dagster.
Only the master pod gets the Pipes bootstrap variables (rank 0 reports).

Stopping (:meth:`KubernetesLauncher.terminate`): ``kubectl delete pytorchjob --wait`` gives every
pod SIGTERM (the trainer finishes its step and checkpoints) and SIGKILL after
``terminationGracePeriodSeconds``; the op re-raises only when no pod of the job is left.
When the job ends, the master pod's log is saved as ``<run_dir>/<job>.log``: the
``LaunchResult``'s log, which the op shows on failure. ``kubectl`` is the one external tool
(tests/dagster/test_kubernetes_launcher.py drives the launcher with a fake that plays back pod states).

    launcher = KubernetesLauncher(nodes=4, gpus_per_node=8, image="registry/pretrain:1.0")
    print(launcher.render_manifest(name="pretrain-b00", config_path="/shared/runs/b00/run.json",
                                   pipes_env={}))
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from dagster import OpExecutionContext

from resources.launching import (
    PIPES_EVENT_SINK,
    LaunchResult,
    MessageDrain,
    OnMessage,
    RemotePipes,
    pipes_session,
    read_log_tail,
    stopping_on_interrupt,
    warn_if_a_stop_is_hindered,
)


class KubernetesLauncher(RemotePipes):
    """Multi-node torchrun as a PyTorchJob; the run volume must be shared (RWX)."""

    nodes: int = 2
    gpus_per_node: int = 8
    image: str = "pretrain:latest"
    namespace: str = "default"
    volume_claim: str = "pretrain-runs"
    mount_path: str = "/shared"
    cpu: str = "64"
    memory: str = "1000Gi"
    termination_grace_s: int = 300
    poll_interval_s: float = 30.0
    kubectl: str = "kubectl"  # the kubectl binary (its context selects the cluster)
    # Pipes through S3 instead of the RWX volume (RemotePipes: pipes_s3_bucket, s3 for the
    # op's side); pods get S3 access from their service account or a Secret, never the manifest

    def render_manifest(self, *, name: str, config_path: str, pipes_env: Mapping[str, str]) -> str:
        def replica(count: int, env: dict[str, str], reports: bool) -> dict[str, Any]:
            container = {
                "name": "pytorch",
                "image": self.image,
                "command": ["torchrun", "-m", "pretrain.train", "--config", config_path],
                "args": ["--event-sink", PIPES_EVENT_SINK] if reports else [],
                "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                "resources": {
                    "limits": {"nvidia.com/gpu": self.gpus_per_node},
                    "requests": {"cpu": self.cpu, "memory": self.memory},
                },
                "volumeMounts": [
                    {"name": "runs", "mountPath": self.mount_path},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
            return {
                "replicas": count,
                "restartPolicy": "Never",  # crash-resume belongs to the Dagster sensor
                "template": {
                    "spec": {
                        "terminationGracePeriodSeconds": self.termination_grace_s,
                        "containers": [container],
                        "volumes": [
                            {
                                "name": "runs",
                                "persistentVolumeClaim": {"claimName": self.volume_claim},
                            },
                            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        ],
                    }
                },
            }

        base_env = {"OMP_NUM_THREADS": "8"}
        specs = {"Master": replica(1, {**base_env, **pipes_env}, reports=True)}
        if self.nodes > 1:
            specs["Worker"] = replica(self.nodes - 1, base_env, reports=False)
        manifest = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {"app": "pretrain"}},
            "spec": {
                "nprocPerNode": str(self.gpus_per_node),
                "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "All"},
                "pytorchReplicaSpecs": specs,
            },
        }
        return yaml.safe_dump(manifest, sort_keys=False)

    def launch(
        self,
        context: OpExecutionContext,
        *,
        config_path: str,
        run_dir: str,
        on_message: OnMessage,
    ) -> LaunchResult:
        """Apply the PyTorchJob, relay Pipes messages until it ends; delete it on interrupt."""
        name = f"pretrain-{context.run_id[:8]}"
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        log_path = Path(run_dir) / f"{name}.log"
        warn_if_a_stop_is_hindered(context, self.longest_stop_s())
        drain = MessageDrain(on_message)
        injector, reader = self.channels(context, run_dir=run_dir, job_name=name)
        with pipes_session(context, injector, reader) as session:
            manifest = self.render_manifest(
                name=name, config_path=config_path, pipes_env=session.get_bootstrap_env_vars()
            )
            self._kubectl(["apply", "-f", "-"], stdin=manifest)
            context.log.info(f"applied PyTorchJob {self.namespace}/{name} (log: {log_path})")
            with stopping_on_interrupt(context, f"PyTorchJob {name}", lambda: self.terminate(name)):
                while (state := self.job_state(name)) not in ("Succeeded", "Failed"):
                    drain(session)
                    time.sleep(self.poll_interval_s)
            self.save_master_log(name, log_path)
        drain(session)  # messages read after the job ended
        return LaunchResult(
            returncode=0 if state == "Succeeded" else 1,
            job_id=name,
            log_path=str(log_path),
            log_tail=read_log_tail(log_path),
        )

    def job_state(self, name: str) -> str:
        out = self._kubectl(["get", "pytorchjob", name, "-n", self.namespace, "-o", "json"])
        conditions = json.loads(out).get("status", {}).get("conditions", [])
        return conditions[-1]["type"] if conditions else "Created"

    def save_master_log(self, name: str, log_path: Path) -> None:
        """The master pod's log (rank 0's output) into the run folder, atomically."""
        pod = f"{name}-master-0"  # the training operator's pod name for the Master replica
        try:
            text = self._kubectl(["logs", pod, "-n", self.namespace, "--tail=2000"])
        except subprocess.CalledProcessError as exc:
            text = f"(kubectl logs {pod} failed: {exc.stderr.strip()})"
        partial = log_path.with_name(log_path.name + ".partial")
        partial.write_text(text + "\n")
        os.replace(partial, log_path)

    def longest_stop_s(self) -> float:
        """The pods' grace period after SIGTERM (then the kubelet kills them)."""
        return float(self.termination_grace_s)

    def terminate(self, job_id: str) -> None:
        """Delete the job and wait until none of its pods is left."""
        self._kubectl(["delete", "pytorchjob", job_id, "-n", self.namespace, "--wait=true"])
        selector = f"training.kubeflow.org/job-name={job_id}"
        while self._kubectl(["get", "pods", "-n", self.namespace, "-l", selector, "-o", "name"]):
            time.sleep(min(self.poll_interval_s, 5.0))

    def _kubectl(self, args: list[str], stdin: str | None = None) -> str:
        done = subprocess.run(
            [self.kubectl, *args],
            input=stdin,
            env=dict(os.environ),
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()
