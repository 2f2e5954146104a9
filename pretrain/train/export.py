"""Consolidated, topology-free export of a checkpoint: one weights file + its model config.

    python -m pretrain.train.export runs/b00/step-00000040 exports/b00-s000000040 [--dtype bf16]

    from pretrain.train.export import export_checkpoint, load_export
    export_checkpoint("runs/b00/step-00000040", "exports/b00-s000000040")
    model = load_export("exports/b00-s000000040")     # a plain Transformer on CPU

A DCP checkpoint is sharded by the world size that wrote it and carries optimizer state; the
export is what a downstream user needs: the full weights in one process-independent file,
``model.safetensors`` (``safetensors`` when importable, else ``model.pt``, a plain
``torch.save`` state dict), plus ``config.json`` (the :class:`ModelConfig`) and
``export.json`` (source checkpoint, step, dtype, lineage, and the weights fingerprint of the
source, which :func:`load_export` re-checks for fp32 exports). With tied embeddings only
``tok_embeddings.weight`` is stored (safetensors refuses aliased tensors); loading re-ties the
head. Written under a temporary name and committed with ``_COMMITTED``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from pretrain import storage
from pretrain.checkpoint.dcp import load_consolidated_model, read_meta, weights_fingerprint
from pretrain.errors import CheckpointError, ConfigError
from pretrain.model.config import ModelConfig
from pretrain.model.transformer import Transformer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TIED_HEAD = "output.weight"


def _has_safetensors() -> bool:
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        return False
    return True


def export_checkpoint(
    ckpt_dir: str | Path, out_dir: str | Path, *, dtype: str = "fp32", fmt: str = "auto"
) -> Path:
    """Write the consolidated export of ``ckpt_dir`` to ``out_dir``; returns the weights file.

    ``fmt``: ``"safetensors"``, ``"torch"`` or ``"auto"`` (safetensors when importable)."""
    if dtype not in DTYPES:
        raise ConfigError(f"export dtype {dtype!r}; use one of {sorted(DTYPES)}")
    if fmt == "auto":
        fmt = "safetensors" if _has_safetensors() else "torch"
    if fmt not in ("safetensors", "torch"):
        raise ConfigError(f"export format {fmt!r}; use 'safetensors', 'torch' or 'auto'")
    out, meta = Path(out_dir), read_meta(ckpt_dir)
    model = load_consolidated_model(str(ckpt_dir))
    state = {k: v.detach().to(DTYPES[dtype]).contiguous() for k, v in model.state_dict().items()}
    if model.cfg.tie_embeddings:
        state.pop(TIED_HEAD)
    tmp = out.with_name(f".tmp-{out.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights = tmp / ("model.safetensors" if fmt == "safetensors" else "model.pt")
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(weights), metadata={"format": "pt", "source": meta["key"]})
    else:
        torch.save(state, weights)
    (tmp / "config.json").write_text(json.dumps(model.cfg.to_dict(), indent=2, sort_keys=True))
    info: dict[str, Any] = {
        "source_checkpoint": str(Path(ckpt_dir).absolute()),
        "key": meta["key"],
        "step": meta["step"],
        "dtype": dtype,
        "format": fmt,
        "weights_file": weights.name,
        "weights_fingerprint": meta.get("weights_fingerprint"),
        "lineage": meta.get("lineage"),
    }
    (tmp / "export.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    storage.commit_marker(str(out), {"key": meta["key"]})
    return out / weights.name


def load_export(export_dir: str | Path, *, verify: bool = True) -> Transformer:
    """The exported model on CPU (eval mode). ``verify`` re-checks an fp32 export against the
    source checkpoint's weights fingerprint."""
    root = Path(export_dir)
    if not storage.is_committed(str(root)):
        raise CheckpointError(f"{root} is not a committed export (no {storage.COMMITTED})")
    info = json.loads((root / "export.json").read_text())
    cfg = ModelConfig.from_dict(json.loads((root / "config.json").read_text()))
    weights = root / info["weights_file"]
    if info["format"] == "safetensors":
        from safetensors.torch import load_file

        state = load_file(str(weights))
    else:
        state = torch.load(weights, weights_only=True)
    with torch.device("meta"):
        model = Transformer(cfg)
    model.to_empty(device="cpu")
    model.tie_weights()
    model.reset_rope()
    if cfg.tie_embeddings:
        state[TIED_HEAD] = state["tok_embeddings.weight"]
    model.load_state_dict({k: v.float() for k, v in state.items()})
    if verify and info["dtype"] == "fp32" and info.get("weights_fingerprint"):
        if weights_fingerprint(model) != info["weights_fingerprint"]:
            raise CheckpointError(f"{root}: weights differ from checkpoint {info['key']}")
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.train.export")
    parser.add_argument("checkpoint", help="a committed step-<N> checkpoint directory")
    parser.add_argument("out", help="export directory (replaced if it exists)")
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--format", default="auto", choices=["auto", "safetensors", "torch"])
    args = parser.parse_args(argv)
    path = export_checkpoint(args.checkpoint, args.out, dtype=args.dtype, fmt=args.format)
    print(json.dumps({"export": str(path), "bytes": path.stat().st_size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
