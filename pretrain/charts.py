"""PNG charts for asset metadata: matplotlib on the Agg backend, byte-stable output.

    from pretrain.charts import figure_png, png_markdown, pyplot
    plt = pyplot()
    fig, ax = plt.subplots()
    ...
    blob = figure_png(fig)                   # PNG bytes, no "Software" stamp, figure closed
    md = png_markdown("loss curve", blob)    # Markdown the Dagster UI renders inline

The Dagster UI renders Markdown metadata with an ``![](data:image/png;base64,…)`` image inline.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from pretrain.errors import ConfigError


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (a clear error when matplotlib is missing)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("charts need matplotlib: pip install 'matplotlib==3.11.2'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any) -> bytes:
    """Render ``fig`` to PNG bytes (the same figure gives the same bytes) and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    pyplot().close(fig)
    return buf.getvalue()


def png_markdown(name: str, blob: bytes) -> str:
    """A titled Markdown image with the PNG inline as a base64 data URI."""
    return f"**{name}**\n\n![{name}](data:image/png;base64,{base64.b64encode(blob).decode()})"
