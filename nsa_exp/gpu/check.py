"""``check``: the gates, all of them, into one JSON report; non-zero exit if any failed.

Report: ``results/reports/<config>_check.json`` (schema ``check_report``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..checking import check_report
from ..core.config import Config
from ..errors import GateFailure
from ..io.metadata import base_metadata
from ..io.paths import recorded_path
from ..io.store import failed_report_path, write_json
from .gates import gate_detail, run_gates
from .telemetry import Telemetry
from .timing import CudaDevice


def run_check(config: Config, allow_gpu: bool, output: str | Path, device: Any = None) -> dict[str, Any]:
    """Run every gate (non-strict, so the report lists every failure), write the report, then raise
    :class:`GateFailure` naming each failed gate and its fix. A failing report goes to
    ``<output stem>.failed.json`` beside ``output``, so a failed check (say, on a CPU box) never replaces a
    passing report at ``output``. ``device`` (default CUDA, :class:`.timing.CudaDevice`) answers the GPU's
    identity (injectable, as the engine's)."""
    gates, _ = run_gates(config, allow_gpu=allow_gpu, strict=False)
    metadata = base_metadata()
    gpu = gate_detail(gates, "gpu")
    if gpu:
        metadata["gpu"] = (device or CudaDevice()).identity(Telemetry().device_info())
    failed = [g for g in gates if not g["passed"]]
    report = check_report.build(config=config, allow_gpu=allow_gpu, gates=gates, metadata=metadata)
    if failed:
        output = failed_report_path(output)
    write_json(output, report, "check_report")
    if failed:
        raise GateFailure(failure_lines(failed, output))
    return report


def failure_lines(failed: list[dict[str, Any]], output: str | Path) -> str:
    """One line per failed gate, the machine's problem first (no GPU, wrong GPU: nothing else can be fixed
    here), the others in gate order; the last line names the count and the report. Lines after the first
    carry the CLI's ``error: `` prefix themselves."""
    ordered = sorted(failed, key=lambda g: g["name"] != "gpu")
    lines = [g["message"] for g in ordered]
    # relative to the working folder where it lies in it, as reproduce names its report (a new user)
    lines[-1] += f" (check failed ({len(failed)} gate(s)); report {recorded_path(output, Path.cwd())})"
    return "\nerror: ".join(lines)
