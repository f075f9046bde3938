"""`compilekit env`: versions, and the device's measured ceilings (measured once, then cached).

Every report carries these so "TFLOP/s" can be read against what this card actually does.
"""

from __future__ import annotations

import os
import platform
import time

from compilekit.model.store import read_json, write_json


def versions() -> dict:
    """torch, triton, depyf, CUDA, cuDNN, driver and GPU, as the running process sees them."""
    import torch

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    for name in ("triton", "depyf"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            gpu_count=torch.cuda.device_count(),
            gpu_memory_gb=round(props.total_memory / 1e9, 1),
            sm_count=props.multi_processor_count,
            cudnn=torch.backends.cudnn.version(),
        )
        try:
            import subprocess

            info["driver"] = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                .stdout.strip()
                .splitlines()[0]
            )
        except (OSError, IndexError, subprocess.SubprocessError):
            info["driver"] = None
    return info


def installed_version(name: str) -> str | None:
    """A package's version from its metadata (nothing imported), None when not installed."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cell_env(device: str) -> dict:
    """Where a cell was measured, kept in its result.json `env`: the host, the versions of
    compilekit, torch, triton and Python, and the GPU's name (so a report can tell when cells
    from different machines are compared)."""
    import socket

    import torch

    from compilekit import __version__

    return {
        "host": socket.gethostname(),
        "compilekit": __version__,
        "torch": torch.__version__,
        "triton": installed_version("triton"),
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
    }


def _median_time_s(fn, device: str, reps: int) -> float:
    import statistics

    import torch

    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure_ceilings(device: str) -> dict:
    """A large matmul (bf16 on GPU, fp32 on CPU) in TFLOP/s and a large copy in GB/s.

    Random inputs, not zeros (zeros run faster than real data). Copy bandwidth counts bytes read
    plus bytes written.
    """
    import torch

    if device == "cuda":
        n, dtype, copy_bytes, reps = 8192, torch.bfloat16, 2 << 30, 20
    else:
        n, dtype, copy_bytes, reps = 1024, torch.float32, 256 << 20, 5
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    matmul_s = _median_time_s(lambda: a @ b, device, reps)
    src = torch.randn(copy_bytes // 4, device=device)
    dst = torch.empty_like(src)
    copy_s = _median_time_s(lambda: dst.copy_(src), device, reps)
    return {
        "matmul_dtype": str(dtype).replace("torch.", ""),
        "matmul_n": n,
        "matmul_tflops": 2 * n**3 / matmul_s / 1e12,
        "copy_gbps": 2 * copy_bytes / copy_s / 1e9,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def device_ceilings(device: str, cache_root: str, remeasure: bool = False) -> dict:
    """The device's measured ceilings (measure_ceilings), kept in cache_root per device model and
    torch version: measured once, then read back."""
    import torch

    name = (
        torch.cuda.get_device_name(0)
        if device == "cuda"
        else (platform.processor() or platform.machine())
    )
    key = f"{name}-{torch.__version__}-{device}"
    path = os.path.join(
        cache_root, "ceilings-" + "".join(c if c.isalnum() else "_" for c in key) + ".json"
    )
    if os.path.exists(path) and not remeasure:
        return read_json(path)
    ceilings = measure_ceilings(device)
    os.makedirs(cache_root, exist_ok=True)
    write_json(path, ceilings)
    return ceilings


def environment(device: str, cache_root: str, remeasure: bool = False) -> dict:
    """Versions plus ceilings for `device`; ceilings come from the cache when already measured."""
    return {
        **versions(),
        "device": device,
        "ceilings": device_ceilings(device, cache_root, remeasure),
    }
