"""Where tests find the third-party data of ``../shared/data`` (the product never reads it).

Tests that need it skip cleanly when it is absent. ``PRETRAIN_SHARED_DATA`` points elsewhere
(for a checkout that is not next to ``shared/``, such as a git worktree)::

    from tests.helpers.shared_data import SHARED_DATA
    pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data absent")
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("PRETRAIN_SHARED_DATA")
    or Path(__file__).resolve().parents[3] / "shared" / "data"
)
SHARED_EVAL = SHARED_DATA / "eval"
