"""GPU identity and per-sample telemetry through nvidia-ml-py (NVML), when it is importable.

>>> isinstance(nvml_available(), bool)
True
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.protocol import THROTTLE_MASK

try:
    import pynvml
except ImportError:  # optional (nvidia-ml-py): without it telemetry is recorded as unavailable
    pynvml = None


def nvml_available() -> bool:
    return pynvml is not None


class Telemetry:
    """Reads SM/memory clocks, temperature, power and throttle reasons of one GPU (None without NVML)."""

    def __init__(self, index: int = 0):
        self.handle = None
        if not nvml_available():
            return
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError:
            self.handle = None
        self._nvml = pynvml

    def sample(self) -> dict[str, Any] | None:
        """One reading, or None when NVML is unavailable."""
        if self.handle is None:
            return None
        n, h = self._nvml, self.handle
        try:
            return {
                "sm_clock_mhz": int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
                "mem_clock_mhz": int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
                "temperature_c": int(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
                "power_w": float(n.nvmlDeviceGetPowerUsage(h)) / 1000.0,
                "throttle_reasons": int(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
            }
        except n.NVMLError:
            return None

    def device_info(self) -> dict[str, Any]:
        """Driver, max clocks and power limit (what NVML can tell), empty without NVML."""
        if self.handle is None:
            return {}
        n, h = self._nvml, self.handle
        info: dict[str, Any] = {}
        readers = {
            "driver": lambda: n.nvmlSystemGetDriverVersion(),
            "nvml_name": lambda: n.nvmlDeviceGetName(h),
            "max_sm_clock_mhz": lambda: int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            "max_mem_clock_mhz": lambda: int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
            "power_limit_w": lambda: float(n.nvmlDeviceGetPowerManagementLimit(h)) / 1000.0,
            "applications_sm_clock_mhz": lambda: int(n.nvmlDeviceGetApplicationsClock(h, n.NVML_CLOCK_SM)),
        }
        for key, read in readers.items():
            try:
                value = read()
                info[key] = value.decode() if isinstance(value, bytes) else value
            except n.NVMLError:
                continue
        return info


# NVML clocks-event reasons that mean the GPU slowed itself: SW power cap (0x4), HW slowdown (0x8),
# SW thermal (0x20), HW thermal (0x40), HW power brake (0x80). Idle (0x1) and app clocks (0x2) are not.


def throttled(sample: dict[str, Any] | None) -> bool:
    """True when a sample's throttle reasons include power/thermal/HW slowdown.

    >>> throttled({"throttle_reasons": 4}), throttled({"throttle_reasons": 1}), throttled(None)
    (True, False, False)
    """
    return sample is not None and bool(sample.get("throttle_reasons", 0) & THROTTLE_MASK)


def gpu_identity(telemetry_info: dict[str, Any]) -> dict[str, Any]:
    """torch's view of GPU 0 (name, SMs, memory, capability, L2) plus NVML's driver and clocks."""
    props = torch.cuda.get_device_properties(0)
    info = {
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "total_memory_bytes": int(props.total_memory),
        "compute_capability": f"{props.major}.{props.minor}",
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
    }
    info.update(telemetry_info)
    info.setdefault("driver", None)
    return info
