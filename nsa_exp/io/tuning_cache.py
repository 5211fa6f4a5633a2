"""bench's local tuning cache (issue 30): the autotune configs a fresh tune chose, kept per GPU, FLA commit and
shape, so a later bench on the same machine replays them instead of tuning again (about 60 s of a formal H200
run's 190 s went to tuning).

Opt-in, one flag away: ``bench --tuning-cache DIR``. An entry is the whole bench result whose fresh tune chose
the configs (it is what ``--autotune-from`` replays, with the same refusals: another shape, FLA commit or GPU);
a run that finds its entry replays it and records ``autotune.mode = "replay"`` with ``replayed_from`` naming
the entry, so a reader sees the configs were not tuned in that process. Without the flag every bench tunes
afresh: that is the formal protocol, and what every committed formal result records.

The key: the GPU's name, the FLA commit, the shape (B, T, H, HQ, K, V, S, block size, dtype) and, for a packed
config, its ``cu_seqlens`` -- everything FLA's autotune key or the tuned kernels' work depends on. Only the
default arm fills the cache (one tune on ``local``, the seed's protocol); ``--tune per-pattern`` and
``--tune-on`` runs tune afresh and are not kept.

>>> entry_path("/c", "NVIDIA H200", "0a9b9f222e86b9a895c2447767e9b4cce6c8d530", {"T": 64}, None).name
'NVIDIA-H200-0a9b9f222e86-627795fcc4a54a57.json'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.records import RunRecord
from .store import write_record


def entry_path(directory: str | Path, gpu_name: str, fla_commit: str, shape: Mapping[str, Any],
               cu_seqlens: Any) -> Path:
    """The cache file of one key (module docstring): ``<gpu>-<commit[:12]>-<sha256 of shape+packing, 16>.json``
    under ``directory``. ``cu_seqlens``: the packed config's int sequence (None: dense)."""
    packing = None if cu_seqlens is None else [int(x) for x in cu_seqlens]
    digest = hashlib.sha256(json.dumps({"shape": dict(shape), "cu_seqlens": packing}, sort_keys=True)
                            .encode()).hexdigest()[:16]
    gpu = re.sub(r"[^A-Za-z0-9._]+", "-", gpu_name).strip("-") or "gpu"
    return Path(directory) / f"{gpu}-{fla_commit[:12]}-{digest}.json"


def store(entry: Path, result: RunRecord) -> None:
    """Keep the bench result ``result`` as ``entry``: validated and written atomically, byte for byte the file
    bench wrote (the same writer; the folder exists)."""
    write_record(entry, result)
