"""Where a sweep point ran: the record each point stores so a reader can tell how points were placed
on GPUs (submitit's local executor pins each job to one GPU through ``CUDA_VISIBLE_DEVICES``)."""

from __future__ import annotations

import os
import socket
from typing import Any


def placement_record() -> dict[str, Any]:
    """Where this process runs a point: host, pid, ``CUDA_VISIBLE_DEVICES`` (the local executor pins each
    job to one GPU through it) and submitit's job id (None outside a submitit job, and where submitit is not
    installed: then no job of it runs this)."""
    try:
        import submitit  # noqa: PLC0415 - a point measured inline needs no submitit installed
        job_id = str(submitit.JobEnvironment().job_id)
    except (ImportError, RuntimeError):  # not inside a submitit job (inline executor)
        job_id = None
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "submitit_job_id": job_id}
