"""Copy a batch job's log from the node to the run root (no filesystem shared with Dagster).

A Slurm job whose config is on ``s3://`` writes its log on the node (``SlurmLauncher``'s
``node_log_dir``) and its batch script copies it next to the config, every ``--every`` seconds
while the job runs and once more when the batch script exits, so the op can show its tail::

    python -m pretrain.train.job_log /tmp/pretrain-1a2b3c4d-17.log s3://b/runs/b00/pretrain-1a2b3c4d-17.log
    python -m pretrain.train.job_log --every 60 SRC URI      # until killed

Each copy is the whole log in one PUT, so a reader sees the previous copy or the new one, never
half of one. Torch-free: it starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pretrain import storage


def copy_log(src: str | Path, uri: str) -> bool:
    """Upload ``src`` to ``uri`` (whole); False when the node has not written it yet."""
    path = Path(src)
    if not path.is_file():
        return False
    storage.write_bytes(path.read_bytes(), uri)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pretrain.train.job_log", description=__doc__.split("\n")[0]
    )
    parser.add_argument("src", help="the log on this node")
    parser.add_argument("uri", help="where it goes (s3://... or a path)")
    parser.add_argument("--every", type=float, help="copy every N seconds until killed")
    args = parser.parse_args(argv)
    if args.every is None:
        copy_log(args.src, args.uri)
        return 0
    if args.every <= 0:
        parser.error("--every must be > 0 seconds")
    while True:
        time.sleep(args.every)
        copy_log(args.src, args.uri)


if __name__ == "__main__":
    sys.exit(main())
