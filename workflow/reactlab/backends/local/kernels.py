"""Which CPU kernels torch runs here: what a reader needs to reproduce a model's greedy text.

A greedy continuation is a chain of argmaxes over logits, and the logits are sums whose
order (and, in bfloat16, whose rounding) is the kernel's: the same weights and prompt give
bit-identical logits only with the same kernels on the same shapes. On a CPU torch picks
them when it starts:

* matrix products in float32: MKL's SGEMM (``MKL_VERBOSE`` names the code path on an
  Intel CPU; ``MKL_ENABLE_INSTRUCTIONS`` caps it);
* matrix products in bfloat16: oneDNN's matmul, whose implementation depends on the CPU
  (``brg_matmul:avx512_core_bf16`` with AVX512-BF16, ``brg_matmul:avx512_core_amx`` with
  AMX, ``gemm:jit:bf16`` on plain AVX-512; capped by ``ONEDNN_MAX_CPU_ISA``), or, where
  oneDNN has no bfloat16 kernel for the CPU (AVX2 only), ATen's own;
* attention, norms, activations: ATen's vectorised kernels of the CPU capability torch
  detected (``torch.backends.cpu.get_cpu_capability()``, capped by
  ``ATEN_CPU_CAPABILITY``).

:func:`runtime_record` writes these down (docs/local-models.md, "What a greedy trace
depends on"): a shard manifest carries it (:mod:`reactlab.suites.shards`). Reading the
oneDNN and MKL choices means running one small product of each with the library's
verbose switch on and reading what it prints on file descriptor 1 (a few milliseconds,
once per process: the libraries print their banner once, and torch's kernels are chosen
once).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["CPU_FLAGS", "KERNEL_ENV", "cpu_info", "runtime_record"]

#: The CPU flags (``/proc/cpuinfo``) that decide torch's kernels for this model.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")
#: Environment variables that cap or change those kernels (recorded when set).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
              "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_info() -> dict[str, Any]:
    """The CPU's model name and which of :data:`CPU_FLAGS` it has (Linux; elsewhere the
    platform's processor string and no flags)."""
    name, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    return {"model": name, "flags": [f for f in CPU_FLAGS if f in flags]}


@contextlib.contextmanager
def _stdout_fd() -> Iterator[Callable[[], str]]:
    """Capture what C code writes on file descriptor 1 inside the block (the text is
    there once the block has ended)."""
    text: list[str] = []
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            yield lambda: "".join(text)
        finally:
            with contextlib.suppress(ValueError, OSError):
                sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            text.append(tmp.read().decode("utf-8", "replace"))


def _verbose_lines(switch: Any, level: int, dtype: Any) -> list[str]:
    """The lines a library's verbose mode prints for one (8 × 576) @ (576 × 576) product
    in ``dtype`` (SmolLM2-135M's width)."""
    import torch  # lazy: heavy (torch)

    x = torch.ones(8, 576, dtype=dtype)
    w = torch.ones(576, 576, dtype=dtype)
    with _stdout_fd() as out, switch(level), torch.inference_mode():
        torch.nn.functional.linear(x, w)
    return out().splitlines()


@functools.cache
def _onednn() -> dict[str, str | None]:
    import torch  # lazy: heavy (torch)

    mkldnn = torch.backends.mkldnn
    available: Callable[[], bool] = mkldnn.is_available  # untyped in torch
    if not available():
        return {"onednn_isa": None, "bf16_matmul": "no oneDNN in this torch build"}
    lines = _verbose_lines(mkldnn.verbose, mkldnn.VERBOSE_ON, torch.bfloat16)
    isa = next((ln.split("isa:", 1)[1] for ln in lines if ",info,cpu,isa:" in ln), None)
    impl = next((ln.split(",")[6] for ln in lines
                 if ",primitive,exec,cpu,matmul," in ln and len(ln.split(",")) > 6), None)
    return {"onednn_isa": isa,
            "bf16_matmul": f"oneDNN {impl}" if impl else "ATen (not oneDNN)"}


@functools.cache
def _mkl() -> str | None:
    import torch  # lazy: heavy (torch)

    mkl = torch.backends.mkl
    available: Callable[[], bool] = mkl.is_available  # untyped in torch
    if not available():
        return None
    lines = _verbose_lines(mkl.verbose, mkl.VERBOSE_ON, torch.float32)
    head = next((ln for ln in lines if ln.startswith("MKL_VERBOSE") and " for " in ln), None)
    return head.removeprefix("MKL_VERBOSE ").strip() if head else None


def runtime_record() -> dict[str, Any]:
    """What decides this process's logits beyond the weights and the prompt: torch's
    version and CPU capability, the bfloat16 matmul kernel (oneDNN's implementation or
    ATen's), oneDNN's ISA, MKL's banner (float32 products), torch's threads, the CPU and
    the kernel-capping environment variables that are set. Imports torch."""
    import torch  # lazy: heavy (torch)

    try:
        transformers = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        transformers = "not installed"
    return {"torch": torch.__version__, "transformers": transformers,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **_onednn(), "mkl": _mkl(), "threads": torch.get_num_threads(),
            "cpu": cpu_info(),
            "env": {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}}
