"""The trainer's ``main()``, then a record of the native threads still alive in this process.

Run under torchrun in place of ``-m pretrain.train`` (same arguments); each rank writes
``<EXIT_PROBE_DIR>/rank-<RANK>.json`` with its thread names (``/proc/self/task/*/comm``) after
``main()`` returned, i.e. what is still running when the interpreter exits::

    EXIT_PROBE_DIR=/tmp/probe torchrun --standalone --nproc_per_node=2 \\
        -m tests.helpers.exit_probe --config run.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pretrain.train.__main__ import main


def native_threads() -> list[str]:
    tasks = Path("/proc/self/task")
    return sorted((tasks / t / "comm").read_text().strip() for t in os.listdir(tasks))


if __name__ == "__main__":
    code = main()
    record = {"exit_code": code, "threads": native_threads()}
    out = Path(os.environ["EXIT_PROBE_DIR"]) / f"rank-{os.environ.get('RANK', '0')}.json"
    out.write_text(json.dumps(record))
    sys.exit(code)
