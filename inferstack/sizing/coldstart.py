"""How long a new server takes from its start to its first healthy answer, and the fleet settings that follow.

A fleet that judges a server before its model has loaded replaces it forever, and one that adds servers faster
than they warm up overshoots: the health check's grace, the scale-out warm-up and the scale-in cooldown all come
from this estimate. It is the sum of the boot phases (docs/bootstrap.md):

    start + cloud-init  →  GPU driver (only where the cloud has no driver-ready image)  →  runtime install or
    image pull  →  model download  →  model load (vLLM also compiles and captures CUDA graphs)

Every figure below is an assumption of this module, stated where it comes from, not a measurement of a cloud: the
boot log prints each phase's real duration (`journalctl -u inferstack-boot`), which is what to tune these with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferstack.spec import Cloud

START_S = 90
"""Instance start, OS boot and cloud-init until the boot unit runs (assumption: 1-2 min on the four clouds)."""
DRIVER_INSTALL_S = 720
"""Installing the NVIDIA driver and rebooting (docs/bootstrap.md: 5-12 minutes when it installs)."""
CLOUDS_WITHOUT_DRIVER_READY_IMAGE: frozenset[Cloud] = frozenset({"alibaba"})
"""Where GPU servers boot a plain image and install the driver (capability `driver-ready-image`; a test keeps the
two in step)."""
RUNTIME_INSTALL_S = {("vllm", "gpu"): 300, ("triton", "gpu"): 300, ("triton", "cpu"): 300,
                     ("llamacpp", "gpu"): 60, ("llamacpp", "cpu"): 240}
"""Pulling the runtime's image (vLLM's is about 10 GB, Triton's larger; docs/bootstrap.md: 1-5 min) or, for llama.cpp
on CPU, compiling it (3-4 min on 2 cores, measured in the end-to-end test)."""
MODEL_DOWNLOAD_BYTES_PER_S = 150e6
"""Model sync from a same-region bucket (docs/bootstrap.md: 1-2 min for 15 GB at 10 Gbit/s)."""
MODEL_LOAD_BYTES_PER_S = 1e9
"""Reading the weights from local disk into GPU or CPU memory (assumption)."""
COMPILE_S = {"vllm": 90, "llamacpp": 0, "triton": 0}
"""vLLM's torch.compile and CUDA-graph capture (docs/bootstrap.md: an 8B model loads in 1-3 minutes)."""

GRACE_FACTOR = 1.5
MIN_SCALE_IN_COOLDOWN_S = 900
GIB = 2**30


@dataclass(frozen=True)
class ColdStart:
    """The estimate and its parts, in seconds."""

    start_s: int
    driver_s: int
    runtime_s: int
    download_s: int
    load_s: int

    @property
    def total_s(self) -> int:
        return int(math.ceil((self.start_s + self.driver_s + self.runtime_s + self.download_s + self.load_s) / 10) * 10)

    def describe(self) -> str:
        parts = [("start", self.start_s), ("GPU driver", self.driver_s), ("runtime", self.runtime_s),
                 ("model download", self.download_s), ("model load", self.load_s)]
        return ", ".join(f"{name} {seconds} s" for name, seconds in parts if seconds)


def cold_start(cloud: Cloud, runtime: str, device: str, model_gib: float) -> ColdStart:
    model_bytes = model_gib * GIB
    return ColdStart(
        start_s=START_S,
        driver_s=DRIVER_INSTALL_S if device == "gpu" and cloud in CLOUDS_WITHOUT_DRIVER_READY_IMAGE else 0,
        runtime_s=RUNTIME_INSTALL_S[(runtime, device)],
        download_s=math.ceil(model_bytes / MODEL_DOWNLOAD_BYTES_PER_S),
        load_s=math.ceil(model_bytes / MODEL_LOAD_BYTES_PER_S) + COMPILE_S[runtime],
    )


def health_check_grace_s(cold_start_s: int) -> int:
    return int(math.ceil(cold_start_s * GRACE_FACTOR / 10) * 10)


def scale_in_cooldown_s(cold_start_s: int) -> int:
    return max(MIN_SCALE_IN_COOLDOWN_S, 2 * cold_start_s)
