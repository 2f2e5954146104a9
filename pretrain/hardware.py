"""Accelerator facts used for MFU and compute planning (torch-free, so planners can import it).

Peak dense bf16 throughput per device, from the vendors' datasheets (no sparsity):
A100 312 TFLOP/s, H100/H200 SXM 989 TFLOP/s. ``cpu`` is a nominal figure so that MFU on a
CPU test run is a finite, comparable number, not a claim about the machine.
"""

PEAK_BF16_FLOPS: dict[str, float] = {
    "cpu": 1e12,
    "a100": 312e12,
    "h100": 989e12,
    "h200": 989e12,
}


def peak_flops(device_kind: str) -> float:
    """Peak bf16 FLOP/s for ``device_kind`` (``a100``, ``h100``, ``h200``, ``cpu``)."""
    from pretrain.errors import ConfigError

    key = device_kind.lower()
    if key not in PEAK_BF16_FLOPS:
        raise ConfigError(
            f"unknown accelerator {device_kind!r}; use one of {sorted(PEAK_BF16_FLOPS)} "
            "or pass an explicit peak FLOP/s"
        )
    return PEAK_BF16_FLOPS[key]
