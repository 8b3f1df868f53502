"""A steady GPU load for scripts/device/nvml_check.sh: bf16 matmuls plus a known allocation.

Usage: python nvml_torch_load.py --ready FILE [--stop FILE] [--seconds 60] [--gib 8] [--size 8192]

Allocates `--gib` GiB on cuda:0, warms up, writes FILE (JSON: pid, GPU UUID, bytes allocated and
reserved by PyTorch, device name), then runs matmuls back to back until `--stop` FILE appears or
`--seconds` pass. Needs PyTorch with CUDA; nothing of gpuledger.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _uuid(props: object) -> str | None:
    """`GPU-…` as NVML spells it, where this PyTorch exposes the device UUID (2.1+)."""
    raw = getattr(props, "uuid", None)
    if raw is None:
        return None
    text = str(raw)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready", type=Path, required=True)
    parser.add_argument("--stop", type=Path, default=None)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--gib", type=float, default=8.0)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("nvml_torch_load: PyTorch sees no CUDA device")
    device = torch.device("cuda:0")
    started = time.monotonic()
    ballast = torch.empty(int(args.gib * (1 << 30)), dtype=torch.uint8, device=device)
    ballast.fill_(1)  # touch every page so the driver really commits it
    a = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=device, dtype=torch.bfloat16)
    for _ in range(20):  # warm-up: cuBLAS heuristics, clocks up
        c = a @ b
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(device)
    info = {
        "pid": os.getpid(),
        "gpu_uuid": _uuid(props),
        "device_name": props.name,
        "allocated_bytes": int(torch.cuda.memory_allocated(device)),
        "reserved_bytes": int(torch.cuda.memory_reserved(device)),
        "ballast_bytes": int(ballast.numel()),
        "matmul_size": args.size,
        "startup_s": round(time.monotonic() - started, 2),
        "torch": torch.__version__,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    tmp = args.ready.with_name(args.ready.name + ".tmp")
    tmp.write_text(json.dumps(info, indent=2))
    os.replace(tmp, args.ready)

    deadline = time.monotonic() + args.seconds
    iterations = 0
    while time.monotonic() < deadline and not (args.stop and args.stop.exists()):
        for _ in range(50):
            c = a @ b
        torch.cuda.synchronize()
        iterations += 50
    flops = 2 * args.size**3 * iterations
    elapsed = time.monotonic() - started
    print(json.dumps({"iterations": iterations, "tflop": round(flops / 1e12, 1), "s": elapsed}))
    del c, ballast


if __name__ == "__main__":
    main()
