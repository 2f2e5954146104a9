#!/usr/bin/env python3
"""A fake ``kubectl`` for the KubernetesLauncher tests (no cluster is available here).

It records every call (arguments and stdin) in ``$FAKE_KUBECTL_DIR/calls.jsonl`` and plays back
the PyTorchJob states listed in ``$FAKE_KUBECTL_DIR/states.json`` (one per ``get pytorchjob``, the
last one repeating). When the job first reports ``Running`` it plays the master pod's rank 0: it
opens Dagster Pipes from the ``DAGSTER_PIPES_*`` variables of the applied manifest's Master
replica and reports the custom messages in ``$FAKE_KUBECTL_DIR/messages.json``. After ``delete``
the job's pods linger for one more ``get pods`` (as pods do while terminating), then are gone.
"""

import json
import os
import sys
from pathlib import Path

import yaml

STATE = Path(os.environ["FAKE_KUBECTL_DIR"])


def load(name: str, default):
    path = STATE / name
    return json.loads(path.read_text()) if path.exists() else default


def save(name: str, value) -> None:
    (STATE / name).write_text(json.dumps(value))


def play_rank0(manifest: dict) -> None:
    master = manifest["spec"]["pytorchReplicaSpecs"]["Master"]
    env = {e["name"]: e["value"] for e in master["template"]["spec"]["containers"][0]["env"]}
    os.environ.update({k: v for k, v in env.items() if k.startswith("DAGSTER_PIPES")})
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        for message in load("messages.json", []):
            pipes.report_custom_message(message)


def main(args: list[str]) -> int:
    stdin = sys.stdin.read() if "-f" in args and "-" in args else None
    with open(STATE / "calls.jsonl", "a") as calls:
        calls.write(json.dumps({"args": args, "stdin": stdin}) + "\n")
    world = load("world.json", {"gets": 0, "deleted": False, "pod_gets_after_delete": 0})
    if args[0] == "apply":
        manifest = yaml.safe_load(stdin)
        (STATE / "manifest.yaml").write_text(stdin)
        print(f"pytorchjob.kubeflow.org/{manifest['metadata']['name']} created")
    elif args[:2] == ["get", "pytorchjob"]:
        states = load("states.json", ["Running"])
        state = states[min(world["gets"], len(states) - 1)]
        world["gets"] += 1
        if state == "Running" and not world.get("played"):
            world["played"] = True
            play_rank0(yaml.safe_load((STATE / "manifest.yaml").read_text()))
        conditions = [] if state == "Created" else [{"type": "Created"}, {"type": state}]
        print(json.dumps({"status": {"conditions": conditions}}))
    elif args[:2] == ["delete", "pytorchjob"]:
        world["deleted"] = True
        print(f"pytorchjob.kubeflow.org/{args[2]} deleted")
    elif args[:2] == ["get", "pods"]:
        name = args[args.index("-l") + 1].split("=", 1)[1]
        if world["deleted"]:
            world["pod_gets_after_delete"] += 1
        if not world["deleted"] or world["pod_gets_after_delete"] <= 1:
            print(f"pod/{name}-master-0\npod/{name}-worker-0")
    elif args[0] == "logs":
        print(load("pod_log.json", f"log of {args[1]}"))
    else:
        print(f"fake kubectl: unsupported {args}", file=sys.stderr)
        return 1
    save("world.json", world)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
