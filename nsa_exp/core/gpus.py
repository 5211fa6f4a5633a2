"""The GPUs we know: what a device of each name has, so a recorded name can be held to its SM count,
memory, L2, compute capability, clocks and peak (``validate``'s plausibility checks, the report's % of
peak and HBM bandwidth).

One row per product, matched by a regular expression on the CUDA device name (the first row that
matches wins: products before their family's fallback row). A field left ``None`` is not known well
enough to check. A name no row matches is an *unknown* GPU: ``validate`` lists its figures as
unverifiable (never passed, never failed).

Units: ``memory_gib`` is the product's nominal memory (the driver reports a little less: 79.2 GiB of an
H100's 80, 139.8 GiB of an H200's 141 GB; :data:`MEMORY_REPORTED` bounds the ratio); clocks are the
maxima NVML reports (``nvmlDeviceGetMaxClockInfo``); ``peak_bf16_tflops`` is the dense BF16
tensor-core rate (the datasheets print it with 2:4 sparsity, twice this); ``hbm_tbs`` is TB/s.

Sources (each row's ``source`` names its own):

- Hopper: *NVIDIA H100 Tensor Core GPU Architecture* whitepaper (2022), table 3: H100 SXM5 132 SMs,
  H100 PCIe 114 SMs, 50 MB L2, compute capability 9.0; H100 datasheet: 80 GB, 3.35 TB/s (SXM) / 2 TB/s
  (PCIe), 1,979 / 1,513 BF16 TFLOPS with sparsity; H200 datasheet: 141 GB HBM3e, 4.8 TB/s, 1,979 BF16
  TFLOPS with sparsity, the H100's GH100 (132 SMs).
- Ampere: *NVIDIA A100 Tensor Core GPU Architecture* whitepaper (2020): 108 SMs, 40 MB L2, compute
  capability 8.0, 1,410 MHz boost, 312 dense BF16 TFLOPS; A100 datasheet: 40 / 80 GB, 1.555 / 2.039 TB/s
  (SXM4) and 1.935 TB/s (80 GB PCIe).
- Max clocks and L2 bytes of the H100 SXM5 and H200 as NVML and CUDA report them on the hosts of
  ``results/raw/e1_h100.json`` and ``results/raw/e1_h200.json`` (1980 MHz SM; 2619 / 3201 MHz memory;
  52,428,800 / 62,914,560 B of L2).
- Family rows (SM counts and compute capabilities only): CUDA C++ Programming Guide, "Compute
  Capabilities" table; the vendors' product briefs (H800: the H100's GH100 die; H20: 78 SMs; B200: 148
  SMs, 10.0; L40S: 142 SMs, 8.9).

>>> gpu_spec("NVIDIA H200").sm_counts, gpu_spec("NVIDIA H100 80GB HBM3").memory_gib
((132,), 80)
>>> gpu_spec("NVIDIA A100-SXM4-80GB").name, gpu_spec("Tesla T4") is None
('A100 SXM4 80GB', True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The share of its nominal memory a device reports as total (H100 SXM5 0.990, H200 0.991, A100 0.99x).
MEMORY_REPORTED = (0.95, 1.0)
MIB = 2**20


@dataclass(frozen=True)
class GpuSpec:
    """One known GPU (a product, or a family's fallback with the facts all its products share)."""

    name: str
    pattern: str  # regular expression searched in the CUDA device name
    sm_counts: tuple[int, ...]
    compute_capability: str
    source: str
    memory_gib: float | None = None
    l2_bytes: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    peak_bf16_tflops: float | None = None
    hbm_tbs: float | None = None
    #: where ``peak_bf16_tflops`` comes from, as the report prints it (default: ``source``)
    peak_source: str | None = None
    #: the board's maximum power limit in W (its datasheet's max TDP; NVML's limit cannot be set above it)
    max_power_w: float | None = None

    def memory_bounds(self) -> tuple[int, int] | None:
        """(lowest, highest) plausible reported total memory in bytes, or None when not known."""
        if self.memory_gib is None:
            return None
        lo, hi = MEMORY_REPORTED
        return int(lo * self.memory_gib * 2**30), int(hi * self.memory_gib * 2**30)


_HOPPER = "H100 whitepaper table 3 + datasheet"
GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("H100 SXM5 80GB", r"\bH100 80GB HBM3\b|\bH100 SXM", (132,), "9.0", _HOPPER + "; clocks/L2 of e1_h100",
            memory_gib=80, l2_bytes=50 * MIB, max_sm_clock_mhz=1980, max_mem_clock_mhz=2619,
            peak_bf16_tflops=989.4, hbm_tbs=3.35,
            peak_source="NVIDIA H100 SXM5 datasheet: 1,979 TFLOPS BF16 with sparsity, half without",
            max_power_w=700),  # H100 datasheet: max TDP up to 700 W (configurable)
    GpuSpec("H100 PCIe", r"\bH100 PCIe\b", (114,), "9.0", _HOPPER, memory_gib=80, l2_bytes=50 * MIB,
            peak_bf16_tflops=756.5, hbm_tbs=2.0, max_power_w=350),  # H100 datasheet: PCIe max TDP 300-350 W
    GpuSpec("H200 SXM 141GB", r"\bH200\b(?! NVL)", (132,), "9.0", "H200 datasheet; clocks/L2 of e1_h200",
            memory_gib=141, l2_bytes=60 * MIB, max_sm_clock_mhz=1980, max_mem_clock_mhz=3201,
            peak_bf16_tflops=989.4, hbm_tbs=4.8,
            peak_source="NVIDIA H200 SXM datasheet: 1,979 TFLOPS BF16 with sparsity, half without (the H100's SMs)",
            max_power_w=700),  # H200 datasheet: max TDP up to 700 W (configurable)
    GpuSpec("A100 SXM4 80GB", r"\bA100-SXM4-80GB\b", (108,), "8.0", "A100 whitepaper + datasheet", memory_gib=80,
            l2_bytes=40 * MIB, max_sm_clock_mhz=1410, peak_bf16_tflops=312.0, hbm_tbs=2.039),
    GpuSpec("A100 SXM4 40GB", r"\bA100-SXM4-40GB\b", (108,), "8.0", "A100 whitepaper + datasheet", memory_gib=40,
            l2_bytes=40 * MIB, max_sm_clock_mhz=1410, peak_bf16_tflops=312.0, hbm_tbs=1.555),
    GpuSpec("A100 PCIe 80GB", r"\bA100 80GB PCIe\b", (108,), "8.0", "A100 whitepaper + datasheet", memory_gib=80,
            l2_bytes=40 * MIB, max_sm_clock_mhz=1410, peak_bf16_tflops=312.0, hbm_tbs=1.935),
    GpuSpec("A100 PCIe 40GB", r"\bA100-PCIE-40GB\b", (108,), "8.0", "A100 whitepaper + datasheet", memory_gib=40,
            l2_bytes=40 * MIB, max_sm_clock_mhz=1410, peak_bf16_tflops=312.0, hbm_tbs=1.555),
    # family fallbacks: SM counts and compute capability only (CUDA programming guide, product briefs)
    GpuSpec("GH200 (family)", r"\bGH200\b", (132,), "9.0", "product brief: the GH100 die of the H100 SXM5"),
    GpuSpec("H100 (family)", r"\bH100\b", (114, 132), "9.0", _HOPPER),
    GpuSpec("H200 (family)", r"\bH200\b", (132,), "9.0", "H200 datasheet"),
    GpuSpec("H800 (family)", r"\bH800\b", (114, 132), "9.0", "product brief: GH100, as the H100"),
    GpuSpec("H20 (family)", r"\bH20\b", (78,), "9.0", "product brief"),
    GpuSpec("A100 (family)", r"\bA100\b", (108,), "8.0", "A100 whitepaper"),
    GpuSpec("A800 (family)", r"\bA800\b", (108,), "8.0", "product brief: GA100, as the A100"),
    GpuSpec("B200 (family)", r"\bB200\b", (148,), "10.0", "product brief"),
    GpuSpec("L40S (family)", r"\bL40S\b", (142,), "8.9", "product brief"),
)


def gpu_spec(name: str | None) -> GpuSpec | None:
    """The first row of :data:`GPUS` whose pattern the CUDA device ``name`` contains, else None (unknown)."""
    return next((g for g in GPUS if name and re.search(g.pattern, name)), None)
