"""Checks of a GPU run's own record, the same for every document a GPU task writes (bench result, sweep
point, autotune matrix, smoke and check reports, what-if, method study): its gates, environment, GPU,
clocks, host facts, tolerances and provenance. Nothing here can be recomputed on a CPU; each is held to
what physics, the pinned protocol or the rest of the record allows.

- ``environment_gate`` (:func:`environment_gate_holds`; the gate itself runs in the GPU tier): the ``environment``
  gate recorded the required values (:data:`REQUIRED_ENV`, ``TRITON_CACHE_DIR`` set) and ``metadata.env`` agrees
  with it; the ``versions`` gate recorded the pinned Triton (:data:`REQUIRED_TRITON`).
- ``gates_consistent``: each gate's detail agrees with the document (GPU name, required GPU and its match,
  ``--allow-gpu``, also against the recorded argv, versions, FLA, edges); gate names known and unique.
- ``fla_commit``: the pinned FLA commit, verified, in the gate and in the document.
- ``metadata_plausible``: the GPU against the GPU table (:mod:`nsa_exp.core.gpus`: SM count, memory, L2,
  compute capability, maximum clocks; an unknown GPU is listed unverifiable), NVML name = CUDA name, the
  driver and versions parse, the CUDA version = torch's ``+cuXYZ`` build, the git sha is hex of a git
  length, ``created_utc`` is a real instant.
- ``telemetry_plausible``: every sampled SM / memory clock in (0, the GPU's maximum]; the median memory clock of a
  table GPU with a known HBM clock equal to it (within 1%).
- ``tolerances_pinned``: no tolerance looser than :data:`nsa_exp.core.config.PINNED_TOLERANCES`.
- ``wall_plausible``: the recorded wall time is at least the GPU time it timed.
- ``config_provenance``: ``name``, ``config_path`` and ``timing.resumed`` (``--resume``) as the recorded argv gives
  them, and the embedded
  config the file at ``config_path`` exactly as the repository held it at the recorded commit (``git show``);
  when that commit is not here (or the tree was dirty), its experiment fields against the file today;
  without the file, unverified.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import DEFAULT_CONFIG, PINNED_COMMIT, REPO_ROOT
from ..analysis.noise_table import FALLBACK_FLOOR, NOISE_TABLE, compare_floors, floors_of
from ..core.config import PINNED_TOLERANCES, Tolerances
from ..core.environment import REQUIRED_ENV, REQUIRED_NONEMPTY_ENV, REQUIRED_TRITON, SYNCHRONOUS_LAUNCHES, synchronous
from ..core.gpus import GpuSpec, gpu_spec
from ..core.kinds import KINDS, document_kind
from ..core.protocol import GATE_NAMES
from ..core.records import GpuIdentity
from ..errors import UserError
from ..io.config_files import config_from_dict
from ..io.fla_pin import load_manifest
from ..io.metadata import commit_time, file_at_commit
from ..io.reader import read_bounded
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from .checks import Add, Context, Problems, guarded

SM_RANGE = (1, 1024)
#: A package version as ``metadata.versions`` records it (``2.11.0+cu130``): any release, pre or local build.
VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}([a-z]+\d*)?(\.(dev|post)\d+)?(\+[\w.]+)?$")
DRIVER_RE = re.compile(r"^\d{3}\.\d{2,3}(\.\d{1,3})?$")
CC_RE = re.compile(r"^\d{1,2}\.\d$")
PRINTABLE_ASCII = re.compile(r"[ -~]+")  # a device name as CUDA and NVML report it
SHA_RE = re.compile(r"\A(?:[0-9a-f]{7,40}|[0-9a-f]{64})\Z")  # git's abbreviations (>= 7), SHA-1, SHA-256 (\Z: no "\n")
TORCH_CUDA_RE = re.compile(r"\+cu(\d+)(\d)$")  # 2.11.0+cu130 -> CUDA 13.0
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: A document cannot be created after it is read: the slack for a clock that runs ahead of the reader's.
FUTURE_SLACK_S = 3600
#: how far a document may be dated before the commit it records (the GPU host's clock against the committer's):
#: a run reads the noise table and configs of that commit, so it cannot predate it (a forger's trial of 2026-12-04
#: pinned a run's floors to the later commit that added the run to the table, 44 min after the run)
COMMIT_SLACK_S = 300
#: The oldest Python the package installs on (pyproject.toml's requires-python): a run recorded under an older one
#: did not run this code.
MIN_PYTHON = (3, 10)
#: ``metadata.versions`` keys and the distribution each names in ``metadata.versions.packages`` (what pip installed):
#: the two must be one version (torch's local build label, ``+cu130``, aside).
VERSION_PACKAGES = {"numpy": "numpy", "torch": "torch", "triton": "triton", "fla_core": "fla-core"}
#: The oldest Linux driver (major version) each CUDA major runs on, with minor-version compatibility: NVIDIA's
#: CUDA Toolkit release notes, "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
#: Compatibility" (CUDA 12.x: >= 525.60.13; CUDA 13.x: >= 580).
MIN_DRIVER_MAJOR = {"12": 525, "13": 580}
#: What an NVML temperature sample of a running GPU can read (°C): above ambient's floor, below any shutdown point.
TEMPERATURE_C = (5, 120)
#: How far above its enforced power limit an NVML power sample may read (a moving average over transients).
POWER_OVER_LIMIT = 1.25
#: The most a sample may read where no power limit is recorded: above any single GPU's board power (NVIDIA's
#: largest, the B200/GB200 modules, are rated up to 1,200 W) times :data:`POWER_OVER_LIMIT`.
POWER_CEILING_W = 1500.0


def _number(x: Any) -> bool:
    """A JSON number (``true``/``false`` are not, though Python's bool is an int)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)
#: Fields of the embedded config that define the experiment (what --repetitions or a later edit of the
#: file's description, timing or formal flag cannot change).
EXPERIMENT_FIELDS = ("name", "shape", "patterns", "seeds", "tolerances", "packing", "gpu")


def gate(doc: dict[str, Any], name: str) -> tuple[int, dict[str, Any]] | None:
    """(index, detail) of the gate ``name`` in ``doc["gates"]``, or None."""
    for i, g in enumerate(doc.get("gates", [])):
        if g.get("name") == name:
            return i, g.get("detail", {})
    return None


def failed_gate(doc: dict[str, Any], found: tuple[int, dict[str, Any]] | None) -> bool:
    """The gate :func:`gate` found is recorded as failed: it carries its message, no detail to hold to anything
    (check and reproduce write such reports; validate read their empty details as gates that could not have
    passed: a new user, 2026-12-06). A run that times anything needs every gate passed, which its kind checks."""
    return found is not None and doc["gates"][found[0]].get("passed") is False


def recorded_gpu(doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(JSON path, facts) of the GPU a document records: ``metadata.gpu`` (as the GPU tier's ``gpu_identity`` wrote
    it: name, sm_count, total_memory_bytes, l2_cache_bytes, compute_capability, max clocks ...), or a method
    study's ``metadata.gpu_name`` + ``kernels.device`` under the same keys."""
    meta = doc.get("metadata", {})
    if isinstance(meta.get("gpu"), dict):
        return "$.metadata.gpu", meta["gpu"]
    device = (doc.get("kernels") or {}).get("device") or {}
    facts = {"name": meta.get("gpu_name", device.get("name"))}
    if device:
        facts |= {"device_name": device.get("name"), "sm_count": device.get("multi_processor_count"),
                  "total_memory_bytes": device.get("total_memory"), "l2_cache_bytes": device.get("L2_cache_size")}
    return "$.kernels.device", facts


def environment_gate_holds(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    env_gate = gate(doc, "environment")
    if env_gate is None:
        problems.append(("$.gates", "no environment gate recorded"))
    elif not failed_gate(doc, env_gate):
        i, detail = env_gate
        env = detail.get("env", {})
        for key, want in REQUIRED_ENV.items():
            if env.get(key) != want:
                problems.append((f"$.gates[{i}].detail.env.{key}", f"{env.get(key)!r}, the gate requires {want!r}: "
                                 "the environment gate cannot have passed"))
        problems += [(f"$.gates[{i}].detail.env.{k}", "unset, the gate requires it") for k in REQUIRED_NONEMPTY_ENV
                     if not env.get(k)]
        recorded = doc.get("metadata", {}).get("env") or {}
        problems += [(f"$.metadata.env.{k}", f"{recorded[k]!r} differs from the environment gate's {env[k]!r}")
                     for k in env if k in recorded and recorded[k] != env[k]]
        problems += [(f"{where}.{SYNCHRONOUS_LAUNCHES}", f"{seen[SYNCHRONOUS_LAUNCHES]!r}: launches were synchronous, "
                      "which the environment gate refuses (the events would time the host's launch gaps)")
                     for where, seen in ((f"$.gates[{i}].detail.env", env), ("$.metadata.env", recorded))
                     if synchronous(seen)]
    versions = gate(doc, "versions")
    if versions is not None and not failed_gate(doc, versions) and versions[1].get("triton") != REQUIRED_TRITON:
        problems.append((f"$.gates[{versions[0]}].detail.triton", f"{versions[1].get('triton')!r}, the versions gate "
                         f"requires triton {REQUIRED_TRITON}"))
    add("environment_gate", problems)


def gates_consistent(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    names = [g.get("name") for g in doc.get("gates", [])]
    if len(set(names)) != len(names):
        problems.append(("$.gates", f"a gate is recorded twice: {names}"))
    order = [n for n in GATE_NAMES if n in names]
    if names != order:
        problems.append(("$.gates", f"gates {names} are not in the order they run {list(GATE_NAMES)}"))
    if gpu_run(doc) and (missing := [n for n in GATE_NAMES if n not in names]):  # a left-out gpu gate left its
        # name, and with it the GPU table's checks, unread (an attacker, 2026-12-07)
        problems.append(("$.gates", f"no {', '.join(missing)} gate recorded: a GPU run records every gate "
                         f"{list(GATE_NAMES)}, passed or failed"))
    meta = doc.get("metadata", {})
    config = doc.get("config") if isinstance(doc.get("config"), dict) else None
    for i, g in enumerate(doc.get("gates", [])):
        d, path = g.get("detail", {}), f"$.gates[{i}].detail"
        if g.get("passed") is False:  # a failed gate records its message, no detail (failed_gate)
            continue
        if g["name"] == "equal_edges" and "edges" in doc and d != doc["edges"]:
            problems.append((path, "the equal_edges gate's detail differs from $.edges"))
        if g["name"] == "fla_sources" and "fla" in doc and d != doc["fla"]:
            problems.append((path, "the fla_sources gate's detail differs from $.fla"))
        if g["name"] == "fla_sources" and "files_verified" in d:
            count, pinned = d["files_verified"], len(load_manifest())
            if not (type(count) is int and 0 < count <= pinned):
                problems.append((f"{path}.files_verified", f"{count!r}: a count of the imported FLA files verified, "
                                 f"1 to the pinned tree's {pinned} (a fraction PASSed: an attacker, 2026-12-07)"))
        if g["name"] == "gpu":
            where, facts = recorded_gpu(doc)
            if not (isinstance(d.get("name"), str) and d["name"].strip()):  # the gate read the device's name
                problems.append((f"{path}.name", f"{d.get('name')!r}: a passed gpu gate records the name of the GPU "
                                 "it checked"))
            if d.get("name") != facts.get("name"):  # a name left out is no name: its facts are held to none
                problems.append((f"{path}.name", f"{d.get('name')!r} differs from {where} name "
                                 f"{facts.get('name')!r}"))
            if config is not None and d.get("required") != config.get("gpu", {}).get("required_name"):
                problems.append((f"{path}.required", "differs from $.config.gpu.required_name"))
            matches = str(d.get("required", "")) in str(d.get("name", ""))
            if d.get("matches_required") != matches:
                problems.append((f"{path}.matches_required", f"{d.get('matches_required')} but the name test gives "
                                 f"{matches}"))
            if g.get("passed") and not matches and d.get("allow_gpu") is not True:
                problems.append((f"{path}.allow_gpu", "a GPU other than the required one without --allow-gpu"))
            if "allow_gpu" in doc and d.get("allow_gpu") != doc["allow_gpu"]:
                problems.append((f"{path}.allow_gpu", f"{d.get('allow_gpu')} differs from $.allow_gpu"))
            problems += _switch_against_argv(doc, f"{path}.allow_gpu", d.get("allow_gpu"), "--allow-gpu")
        if g["name"] == "versions":
            for k, v in d.items():
                if meta.get("versions", {}).get(k) != v:
                    problems.append((f"{path}.{k}", f"{v!r} differs from $.metadata.versions.{k}"))
    edges = doc.get("edges")
    if isinstance(edges, dict) and isinstance(doc.get("patterns"), dict):
        per = edges.get("per_pattern", {})
        if set(per) != set(doc["patterns"]):
            problems.append(("$.edges.per_pattern", "names differ from $.patterns"))
        if edges.get("equal") != all(v == edges.get("closed_form") for v in per.values()):
            problems.append(("$.edges.equal", f"{edges.get('equal')} does not follow from the counts (equal: every "
                             "count is the closed form)"))
    add("gates_consistent", problems)


def fla_commit(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    fla = gate(doc, "fla_sources")
    if fla is not None and not failed_gate(doc, fla):
        i, d = fla
        if d.get("commit") != PINNED_COMMIT:
            problems.append((f"$.gates[{i}].detail.commit", f"{d.get('commit')} is not the pinned commit "
                             f"{PINNED_COMMIT}"))
        if d.get("verified") is not True:
            problems.append((f"$.gates[{i}].detail.verified", "FLA source verification did not pass"))
    for key in ("fla_commit",):
        if key in doc and doc[key] != PINNED_COMMIT:
            problems.append((f"$.{key}", f"{doc[key]} is not the pinned commit {PINNED_COMMIT}"))
    if isinstance(doc.get("fla"), dict):
        if doc["fla"].get("commit") != PINNED_COMMIT:
            problems.append(("$.fla.commit", f"{doc['fla'].get('commit')} is not the pinned commit {PINNED_COMMIT}"))
        if doc["fla"].get("verified") is not True:
            problems.append(("$.fla.verified", "FLA source verification did not pass"))
    add("fla_commit", problems)


def parse_utc(text: Any) -> datetime | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` as a datetime, or None when it names no instant (2026-02-30, 25:61)."""
    try:
        return datetime.strptime(str(text), UTC_FORMAT)
    except ValueError:
        return None


def host_problems(meta: dict[str, Any], where: str = "$.metadata") -> Problems:
    """The host facts every document's ``metadata`` carries: versions parse, CUDA = torch's build, git sha
    hex of a git length, ``created_utc`` a real instant, not in the future and not more than
    :data:`COMMIT_SLACK_S` before its recorded commit was made (where this repository has that commit; the two
    clocks are different hosts')."""
    problems: Problems = []
    versions = meta.get("versions", {})
    for key in ("python", "numpy", "torch", "triton", "cuda", "fla_core", "scipy"):
        if versions.get(key) is not None and not VERSION_RE.match(str(versions[key])):
            problems.append((f"{where}.versions.{key}", f"{versions[key]!r} does not parse as a version"))
    python = re.match(r"(\d+)\.(\d+)", str(versions.get("python", "")))
    if python and (int(python.group(1)), int(python.group(2))) < MIN_PYTHON:
        problems.append((f"{where}.versions.python", f"{versions['python']!r}: the package needs Python "
                         f">= {'.'.join(map(str, MIN_PYTHON))} (pyproject.toml): this code cannot have run there"))
    packages = versions.get("packages") if isinstance(versions.get("packages"), dict) else {}
    release = {key: (str(versions[key]).split("+")[0], str(packages[dist]).split("+")[0])
               for key, dist in VERSION_PACKAGES.items() if versions.get(key) is not None and packages.get(dist)}
    problems += [(f"{where}.versions.{key}", f"{versions[key]!r}, but pip's {VERSION_PACKAGES[key]} is "
                  f"{packages[VERSION_PACKAGES[key]]!r}") for key, (a, b) in release.items() if a != b]
    build = TORCH_CUDA_RE.search(str(versions.get("torch", "")))
    if build and "cuda" in versions:
        want = f"{int(build.group(1))}.{build.group(2)}"
        if versions["cuda"] != want:
            problems.append((f"{where}.versions.cuda", f"{versions['cuda']!r}, but torch {versions['torch']} is "
                             f"built for CUDA {want}"))
    git = meta.get("git") or {}
    for key in ("sha", "git_head_seen"):
        if git.get(key) is not None and not SHA_RE.match(str(git[key])):
            problems.append((f"{where}.git.{key}", f"{git[key]!r} is not a git commit (hex, 7-40 or 64 digits)"))
    if "created_utc" in meta:
        made = parse_utc(meta["created_utc"])
        if made is None:
            problems.append((f"{where}.created_utc", f"{meta['created_utc']!r} is not a real UTC instant"))
        elif (made - (now := datetime.now(timezone.utc).replace(tzinfo=None))).total_seconds() > FUTURE_SLACK_S:
            problems.append((f"{where}.created_utc", f"{meta['created_utc']} is in the future (this host's clock "
                             f"reads {now.strftime(UTC_FORMAT)})"))
        elif (SHA_RE.match(sha := str(git.get("sha") or "")) and (then := commit_time(sha, REPO_ROOT)) is not None
                and made.replace(tzinfo=timezone.utc).timestamp() < then - COMMIT_SLACK_S):
            problems.append((f"{where}.created_utc", f"{meta['created_utc']}, before its recorded commit {sha[:12]} "
                             f"was made ({datetime.fromtimestamp(then, timezone.utc).strftime(UTC_FORMAT)}): a run "
                             "records the commit it ran, which exists before it"))
    return problems


def metadata_plausible(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    meta = doc.get("metadata", {})
    problems = host_problems(meta)
    where, gpu = recorded_gpu(doc)
    name = gpu.get("name")
    spec = gpu_spec(name)
    sm = gpu.get("sm_count")
    if sm is not None and (not isinstance(sm, int) or not SM_RANGE[0] <= sm <= SM_RANGE[1]):
        problems.append((f"{where}.sm_count", f"{sm!r} is not an SM count in {SM_RANGE}"))
    for key in ("name", "nvml_name", "device_name"):  # NVIDIA's device names are printable ASCII (CUDA, NVML)
        if gpu.get(key) is not None and not PRINTABLE_ASCII.fullmatch(str(gpu[key])):
            problems.append((f"{where}.{key}", f"{gpu[key]!r} holds a character no CUDA or NVML device name has "
                             "(outside printable ASCII: an invisible or look-alike letter)"))
    if gpu.get("device_name") not in (None, name):
        problems.append((f"{where}.name", f"{gpu['device_name']!r} differs from $.metadata.gpu_name {name!r}"))
    if gpu.get("nvml_name") is not None and gpu["nvml_name"] != name:
        problems.append((f"{where}.nvml_name", f"{gpu['nvml_name']!r} differs from the CUDA name {name!r}"))
    if "driver" in gpu and not (isinstance(gpu["driver"], str) and DRIVER_RE.match(gpu["driver"])):
        problems.append((f"{where}.driver", f"{gpu.get('driver')!r} does not parse as a driver version"))
    elif "driver" in gpu:
        cuda = str(meta.get("versions", {}).get("cuda", "")).split(".")[0]
        least = MIN_DRIVER_MAJOR.get(cuda)
        if least is not None and int(gpu["driver"].split(".")[0]) < least:
            problems.append((f"{where}.driver", f"{gpu['driver']}: CUDA {meta['versions']['cuda']} needs a driver "
                             f">= {least} (NVIDIA's CUDA release notes)"))
    limit = gpu.get("power_limit_w")
    if limit is not None and (not _number(limit) or not 0 < limit <= 2000):
        problems.append((f"{where}.power_limit_w", f"{limit!r} W is not a GPU's power limit (0, 2000]"))
    elif limit is not None and spec is not None and spec.max_power_w is not None and limit > spec.max_power_w:
        problems.append((f"{where}.power_limit_w", f"{limit} W, above the {spec.name}'s maximum power limit of "
                         f"{spec.max_power_w:g} W (the GPU table, its datasheet)"))
    problems += argv_command_problems(doc)
    cc = gpu.get("compute_capability")
    if cc is not None and not CC_RE.match(str(cc)):
        problems.append((f"{where}.compute_capability", f"{cc!r} is not a compute capability"))
    problems += [(f"{where}.{k}", f"{gpu[k]!r} is not an integer (the device reports a count)")
                 for k in GpuIdentity.COUNTS
                 if gpu.get(k) is not None and (not isinstance(gpu[k], int) or isinstance(gpu[k], bool))]
    if cc is not None and not isinstance(cc, str):
        problems.append((f"{where}.compute_capability", f"{cc!r} is not a string such as '9.0'"))
    if name is None and any(gpu.get(k) is not None for k in GpuIdentity.TABLE_FACTS):
        facts = ", ".join(k for k in GpuIdentity.TABLE_FACTS if gpu.get(k) is not None)
        problems.append((f"{where}.name", f"missing, beside the GPU's {facts}: a GPU run records CUDA's device name, "
                         "the key its facts are held to the GPU table by (a name left out let a forged SM count, L2 "
                         "or capability pass)"))
    if spec is None:
        if name is not None:
            ctx.unverifiable(f"{where} (sm_count, memory, L2, compute capability, clocks)",
                             f"unverified (GPU not in the table): {name!r} is no row of nsa_exp.core.gpus: its facts "
                             "cannot be checked")
        add("metadata_plausible", problems)
        return
    problems += _against_table(where, gpu, spec)
    if spec.memory_gib is None or spec.l2_bytes is None:  # a family's fallback row: SM count and capability only
        ctx.unverifiable(f"{where} (memory, L2, clocks)", f"unverified (GPU not in the table): {name!r} matches only "
                         f"the row {spec.name!r}, which holds no memory, L2 or clocks to check (an H200 run relabelled "
                         "'NVIDIA H100 NVL' kept its 141 GB unchecked)")
    add("metadata_plausible", problems)


def _label(spec: GpuSpec) -> str:
    """``"an H200 SXM 141GB"``, ``"a B200 ..."``: the table GPU as a message names it."""
    return f"an {spec.name}" if spec.name[0] in "AH" else f"a {spec.name}"


def _against_table(where: str, gpu: dict[str, Any], spec: Any) -> Problems:
    problems: Problems = []
    label = _label(spec)
    if isinstance(gpu.get("sm_count"), int) and gpu["sm_count"] not in spec.sm_counts:
        problems.append((f"{where}.sm_count", f"{gpu['sm_count']} SMs: {label} has {list(spec.sm_counts)} "
                         f"({spec.source})"))
    cc = gpu.get("compute_capability")
    if cc is not None and cc != spec.compute_capability:
        problems.append((f"{where}.compute_capability", f"{cc!r}: {label} is {spec.compute_capability}"))
    bounds, total = spec.memory_bounds(), gpu.get("total_memory_bytes")
    if bounds is not None and isinstance(total, int) and not bounds[0] <= total <= bounds[1]:
        problems.append((f"{where}.total_memory_bytes", f"{total} B ({total / 2**30:.1f} GiB): {label} has "
                         f"{spec.memory_gib:g} GB ({spec.source})"))
    l2 = gpu.get("l2_cache_bytes")
    if spec.l2_bytes is not None and isinstance(l2, int) and l2 != spec.l2_bytes:
        problems.append((f"{where}.l2_cache_bytes", f"{l2} B: {label} has {spec.l2_bytes} B of L2"))
    for key, top in (("max_sm_clock_mhz", spec.max_sm_clock_mhz), ("max_mem_clock_mhz", spec.max_mem_clock_mhz),
                     ("applications_sm_clock_mhz", spec.max_sm_clock_mhz)):
        value = gpu.get(key)
        if top is not None and isinstance(value, (int, float)) and value > top:
            problems.append((f"{where}.{key}", f"{value} MHz: {label} clocks at most {top} MHz"))
    return problems


def gpu_run(doc: dict[str, Any]) -> bool:
    """A run on a GPU (not the Triton interpreter on a CPU, as the tests run): no ``TRITON_INTERPRET`` in its
    environment, or a CUPTI block (CUPTI profiles CUDA kernels only: an interpreter flag beside one does not switch
    the GPU's checks off, a forger's hole of 2026-12-04)."""
    return "TRITON_INTERPRET" not in (doc["metadata"].get("env") or {}) or "cupti" in doc


def clock_limits(doc: dict[str, Any]) -> dict[str, float | None]:
    """The most an SM / memory clock sample may read: the recorded maximum, else the GPU table's."""
    _, gpu = recorded_gpu(doc)
    spec = gpu_spec(gpu.get("name"))
    out = {}
    for key, field in (("sm_clock_mhz", "max_sm_clock_mhz"), ("mem_clock_mhz", "max_mem_clock_mhz")):
        recorded = gpu.get(field)
        out[key] = recorded if isinstance(recorded, (int, float)) else getattr(spec, field, None) if spec else None
    return out


def telemetry_plausible(samples: Iterable[tuple[str, dict[str, Any]]], doc: dict[str, Any], add: Add,
                        ctx: Context) -> None:
    """``samples``: (JSON path, sample) pairs; each clock reading in (0, :func:`clock_limits`], each temperature in
    :data:`TEMPERATURE_C`, each power reading positive and at most :data:`POWER_OVER_LIMIT` x the recorded power
    limit."""
    limits = clock_limits(doc)
    _, gpu = recorded_gpu(doc)
    watts = gpu.get("power_limit_w") if _number(gpu.get("power_limit_w")) else None
    problems: Problems = []
    unknown = False
    samples_mem: list[float] = []
    path = "$.telemetry.samples[0]"
    for path, s in samples:
        if _number(s.get("mem_clock_mhz")) and s["mem_clock_mhz"] > 0:
            samples_mem.append(s["mem_clock_mhz"])
        t = s.get("temperature_c")
        if t is not None and (not _number(t) or not TEMPERATURE_C[0] <= t <= TEMPERATURE_C[1]):
            problems.append((f"{path}.temperature_c", f"{t!r} °C: a running GPU reads {TEMPERATURE_C[0]}-"
                             f"{TEMPERATURE_C[1]} °C"))
        w = s.get("power_w")
        top = POWER_OVER_LIMIT * watts if watts is not None else POWER_CEILING_W
        if w is not None and (not _number(w) or not 0 < w <= top):
            problems.append((f"{path}.power_w", f"{w!r} W: a running GPU draws more than 0 W and at most "
                             + (f"{POWER_OVER_LIMIT:g} x its {watts:g} W limit" if watts is not None else
                                f"{POWER_CEILING_W:g} W (no power limit recorded)")))
        for key, top in limits.items():
            value = s.get(key)
            if value is None:
                continue
            if not isinstance(value, (int, float)) or value <= 0:
                problems.append((f"{path}.{key}", f"{value!r} MHz: a running GPU's clock is positive"))
            elif top is None:
                unknown = True
            elif value > top:
                problems.append((f"{path}.{key}", f"{value} MHz above the GPU's maximum {top} MHz"))
    if unknown:
        ctx.unverifiable("clock samples (upper bound)", "the GPU's maximum clocks are neither recorded nor in the "
                         "GPU table")
    problems += _hbm_clock_problems(samples_mem, gpu_spec(gpu.get("name")), re.sub(r"\[\d+\]$", "[]", path))
    add("telemetry_plausible", problems)


def _hbm_clock_problems(mem_mhz: list[float], spec: GpuSpec | None, where: str) -> Problems:
    """The memory clock of a table GPU whose HBM clock the table holds (H100 SXM5 2619 MHz, H200 3201 MHz, read by
    NVML on the hosts of e1_h100/e1_h200) does not scale with load: every committed sample reads exactly that clock
    (11,043 samples on 2026-12-05). A median of the samples off it by more than 1% is another GPU's telemetry
    under this name (an H100's 2619 MHz under an H200's label)."""
    top = spec.max_mem_clock_mhz if spec is not None else None
    if spec is None or top is None or not mem_mhz:
        return []
    median = sorted(mem_mhz)[len(mem_mhz) // 2]
    if abs(median - top) <= 0.01 * top:
        return []
    return [(f"{where}.mem_clock_mhz", f"median {median:g} MHz over {len(mem_mhz)} samples: the HBM of "
             f"{_label(spec)} runs at {top} MHz, whatever the load")]


def tolerances_pinned(tolerances: dict[str, Any] | None, where: str, add: Add) -> None:
    """``tolerances`` (a config's, or a smoke report's subset) not looser than the pinned ones."""
    problems: Problems = []
    for key, value in (tolerances or {}).items():
        pinned = getattr(PINNED_TOLERANCES, key, None)
        if pinned is not None and isinstance(value, (int, float)) and value > pinned:
            problems.append((f"{where}.{key}", f"{value} is looser than the pinned {pinned}: a raised tolerance "
                             "cannot loosen the gate"))
    add("tolerances_pinned", problems)


def pinned(tolerances: dict[str, Any] | None) -> Tolerances:
    """The tolerances a gate is judged at: the file's where stricter, the pinned ones otherwise."""
    tol = tolerances or {}
    return Tolerances(**{k: min(v, tol.get(k, v)) for k, v in PINNED_TOLERANCES.__dict__.items()})


def wall_plausible(wall: Any, work_ms: float, path: str, what: str, add: Add, doc: dict[str, Any] | None = None,
                   ) -> None:
    """Wall time (s) >= the GPU time the document timed (``work_ms``, ms), and >= the seconds ``doc`` records as
    spent inside its run: ``autotune.tune_seconds`` (a tune of 10^7 s in a 190 s run PASSed: an attacker,
    2026-12-06)."""
    problems: Problems = []
    if isinstance(wall, (int, float)) and wall * 1000 < work_ms:
        problems.append((path, f"{wall} s, but {what} alone sum to {work_ms / 1000:.3f} s"))
    tune = ((doc or {}).get("autotune") or {}).get("tune_seconds")
    if isinstance(wall, (int, float)) and isinstance(tune, (int, float)) and tune > wall * (1 + 1e-9) + 1e-6:
        problems.append(("$.autotune.tune_seconds", f"{tune} s, more than the whole run's wall_seconds {wall} s"))
    meta = (doc or {}).get("metadata") or {}
    made, sha = parse_utc(meta.get("created_utc")), str((meta.get("git") or {}).get("sha") or "")
    then = commit_time(sha, REPO_ROOT) if made is not None and SHA_RE.match(sha) else None
    if (isinstance(wall, (int, float)) and made is not None and then is not None and
            made.replace(tzinfo=timezone.utc).timestamp() - wall < then - COMMIT_SLACK_S):
        problems.append((path, f"{wall} s: the run would have started before its recorded commit {sha[:12]} was "
                         "made"))
    add("wall_plausible", problems)


def argv_values(argv: list[str], option: str) -> list[str]:
    """Every value of ``--option V`` / ``--option=V`` in a recorded argv, in order (a repeatable option's)."""
    values = []
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(option + "="):
            values.append(arg.split("=", 1)[1])
    return values


def argv_option(argv: list[str], option: str) -> str | None:
    """The value of ``--option V`` / ``--option=V`` in a recorded argv (the last one), else None."""
    values = argv_values(argv, option)
    return values[-1] if values else None


def config_file(ctx: Context, config_path: str | None) -> dict[str, Any] | None:
    """The config file a document names (located beside it, then from the working directory), parsed
    strictly; None when it is not at hand or unreadable (its comparison is then unverified)."""
    found = ctx.locate(config_path)
    if found is None or found.stat().st_size > MAX_BYTES:
        return None
    try:
        doc = parse_strict(read_bounded(found, str(found), MAX_BYTES))
    except (OSError, _Rejected, UserError):
        return None
    return doc if isinstance(doc, dict) else None


def config_provenance(doc: dict[str, Any], add: Add, ctx: Context, name_from_output: bool = False) -> None:
    """``config_path`` as argv gives it (``--config``, else the CLI's default); ``name`` as argv gives it
    (bench: the ``--output`` stem, else ``--name``, else the config's name); the embedded config's
    experiment fields (:data:`EXPERIMENT_FIELDS`) = the file's at ``config_path`` (or its ``config_name``)."""
    problems: Problems = []
    argv = document_argv(doc)
    ours = recorded_cli_argv(doc) is not None
    path = doc.get("config_path")
    from_argv = argv_option(argv, "--config") or DEFAULT_CONFIG if ours else None
    if path is not None and ours and path != from_argv:
        problems.append(("$.config_path", f"{path!r}, but the recorded argv reads {from_argv!r}"))
    if path is None:  # a report that records no config_path: the config its argv read
        path = from_argv
    if not ours:  # every field checked against the CLI's argv (here, gates_consistent, stats_checks, peer_result)
        ctx.unverifiable("$.config_path, $.name, $.timing.resumed, $.gates[gpu].detail.allow_gpu, $.timing.stop "
                         "(against argv)", f"unverified (argv not the CLI's): argv[0] {argv[:1]} is not python -m "
                         "nsa_exp or scripts/bench_backward.py, so the run's options cannot be read from it")
    config = doc.get("config") if isinstance(doc.get("config"), dict) else None
    if name_from_output and ours and "name" in doc:
        output, given = argv_option(argv, "--output"), argv_option(argv, "--name")
        want = output.rsplit("/", 1)[-1].removesuffix(".json") if output else given or (config or {}).get("name")
        if want is not None and doc["name"] != want:
            problems.append(("$.name", f"{doc['name']!r}, but the recorded argv names the run {want!r}"))
    timing = doc.get("timing")
    problems += _switch_against_argv(doc, "$.timing.resumed", timing.get("resumed") if isinstance(timing, dict)
                                     else None, "--resume")
    if path is not None:
        problems += config_against_file(doc, ctx, path, config)
    add("config_provenance", problems)


def document_argv(doc: dict[str, Any]) -> list[str]:
    """The document's recorded ``metadata.argv`` as strings (empty when none)."""
    return [str(a) for a in (doc.get("metadata") or {}).get("argv") or []]


def argv_command_problems(doc: dict[str, Any]) -> Problems:
    """The recorded argv, when it is this CLI's, runs a command that writes the document's kind (the kind table's
    ``commands``): ``check`` relabelled ``checkX`` or ``smoke`` PASSed ``--strict`` (an attacker, 2026-12-07)."""
    argv, kind = recorded_cli_argv(doc), doc.get("kind")
    commands = document_kind(kind).commands if isinstance(kind, str) and kind in KINDS else ()
    if argv is None or not commands:
        return []
    # the seed's script runs main(["bench", ...]): it writes a bench result and nothing else
    script = argv[0].replace("\\", "/").endswith("bench_backward.py")
    command = "bench" if script else argv[1] if len(argv) > 1 else None
    return [] if command in commands else [("$.metadata.argv[1]", f"{command!r}: no command of this CLI that writes a "
                                            f"{kind} ({', '.join(commands)})")]


def recorded_command_problems(command: Any, name: str, once: tuple[str, ...], where: str = "$.command",
                              doc: dict[str, Any] | None = None) -> Problems:
    """A derived document's recorded ``command`` (a string, as ``python -m nsa_exp <name> ...`` ran it): this CLI's
    command ``name``, each option of ``once`` (``--points``: one list of paths) given at most once, as the CLI's own
    refusal requires. A validation whose command gave ``--points`` twice, its rows those of the first list, PASSed
    ``--strict``, and so did a calibration whose command was any text (an attacker, 2026-12-07). With ``doc``, a
    recorded CLI argv (``metadata.argv``) is that command's (``--points=a --points b`` and another argv PASSed: a
    re-attacker, 2026-12-07).

    >>> recorded_command_problems("python -m nsa_exp calibrate --points a --points b", "calibrate", ("--points",))
    [('$.command', '--points given 2 times: the CLI refuses that (give it once, every path after it)')]
    """
    try:
        words = shlex.split(str(command))
    except ValueError as exc:
        return [(where, f"{command!r} does not parse as a command line ({exc})")]
    if words[:4] != ["python", "-m", "nsa_exp", name]:
        return [(where, f"{str(command)[:80]!r}: not python -m nsa_exp {name}, the command that writes it")]
    argv = recorded_cli_argv(doc) if doc is not None else None
    problems = [(where, f"{flag} given {n} times: the CLI refuses that (give it once, every path after it)")
                for flag in once if (n := sum(w == flag or w.startswith(f"{flag}=") for w in words)) > 1]
    if argv is not None and argv[1:] != words[3:]:  # the command is the argv it ran with (model_commands)
        problems.append((where, f"differs from the recorded argv {argv[1:][:8]}"))
    return problems


def recorded_cli_argv(doc: dict[str, Any]) -> list[str] | None:
    """The recorded argv when it is this CLI's (``python -m nsa_exp ...``: ``nsa_exp/__main__.py``; or the seed
    script ``scripts/bench_backward.py``), whose options can be read from it; else None. Another program's
    ``__main__.py`` is not ours: a document written under ``python -m pytest`` (a test calling the engine) records
    pytest's argv, whose options say nothing about the run (it once failed ``gates_consistent`` for want of
    ``--allow-gpu`` when a test file ran alone).

    >>> recorded_cli_argv({"metadata": {"argv": ["/x/nsa_exp/__main__.py", "bench"]}})
    ['/x/nsa_exp/__main__.py', 'bench']
    >>> recorded_cli_argv({"metadata": {"argv": ["/venv/site-packages/pytest/__main__.py", "tests"]}}) is None
    True
    """
    argv = document_argv(doc)
    first = argv[0].replace("\\", "/") if argv else ""
    ours = f"/{first}".endswith(("/scripts/bench_backward.py", "/nsa_exp/__main__.py"))
    return argv if ours else None


def _switch_against_argv(doc: dict[str, Any], path: str, value: Any, flag: str) -> Problems:
    """A recorded switch (``value`` at ``path``, a bool) is the recorded CLI argv's ``flag``: ``allow_gpu`` is
    ``--allow-gpu``, ``timing.resumed`` is ``--resume`` (an attacker flipped both and passed). Nothing to compare
    without a bool or without the CLI's argv."""
    argv = recorded_cli_argv(doc)
    if argv is None or not isinstance(value, bool) or value == (flag in argv):
        return []
    return [(path, f"{value}, but the recorded argv {'gives' if flag in argv else 'has no'} {flag}")]


def recorded_clean_commit(doc: dict[str, Any]) -> str | None:
    """The commit a document records when its tree was clean (``metadata.git``: a sha of git's forms, ``dirty``
    false), else None: only then do the repository's files at that commit show what the run read."""
    git = doc.get("metadata", {}).get("git") or {}
    sha = str(git.get("sha") or "")
    return sha if SHA_RE.match(sha) and git.get("dirty") is False else None


def committed_source(doc: dict[str, Any], path: str, unknown: str = "") -> tuple[bytes | None, str | None]:
    """``(path``'s bytes at the document's recorded clean commit, or None where that commit has no such file``,
    None)``; ``(None, why)`` where the commit is not at hand: no clean commit recorded (``unknown`` appended to that
    reason), or git or the commit absent (a copied tree, another repository; an ``unverified (source not found)``
    reason, which ``validate --strict`` counts)."""
    sha = recorded_clean_commit(doc)
    if sha is None:
        git = doc.get("metadata", {}).get("git")
        return None, f"the run's tree is not a recorded clean commit (metadata.git {git}){unknown}"
    if commit_time(sha, REPO_ROOT) is None:
        return None, (f"unverified (source not found): the recorded commit {sha[:12]} is not a commit of this "
                      "repository (or git is not at hand)")
    return file_at_commit(sha, path, REPO_ROOT), None


def commit_defines(doc: dict[str, Any], path: str, name: str) -> bool | str:
    """Whether ``path`` at the document's recorded clean commit defines ``name`` (a module-level ``name =``): what a
    run of that commit could have recorded (e.g. the stop rule's ``drop`` arrived with ``STOP_DROPS`` in
    ``nsa_exp/core/protocol.py``); where that commit is not at hand, the reason (:func:`committed_source`; the caller
    lists it as unverified)."""
    then, why = committed_source(doc, path)
    if why is not None:
        return why
    return then is not None and re.search(rb"^" + re.escape(name.encode()) + rb"\s*[:=]", then, re.M) is not None


def commit_mentions(doc: dict[str, Any], path: str, text: str) -> bool | str:
    """Whether ``path`` at the document's recorded clean commit holds ``text`` (smoke's ``oracle`` block arrived with
    the word in ``nsa_exp/gpu/smoke.py``, cdc2fa6); where that commit is not at hand, the reason
    (:func:`committed_source`; the caller lists it as unverified)."""
    then, why = committed_source(doc, path)
    return why if why is not None else then is not None and text.encode() in then


def floors_at_commit(doc: dict[str, Any], stages: Iterable[str]) -> dict[str, float] | str:
    """The verdict stop rule's floors as the run read them at its start: ``compare``'s floors of the document's GPU
    for ``stages`` (:func:`nsa_exp.analysis.noise_table.compare_floors`) from the noise table the repository held at
    the recorded commit of a clean tree (``git show <sha>:results/noise/floors.json``). Where that table is not at
    hand (no clean commit recorded, git or the commit absent: a copied tree, another repository), the reason, so
    the caller lists the floors as unverified; an empty dict where the commit is here but holds no readable table
    (no run under the verdict rule could have read floors there). Today's table is not the one to judge by: later
    runs change it."""
    then, why = committed_source(doc, NOISE_TABLE, ", so the noise table it read is unknown")
    if why is not None:
        return why
    try:
        table = parse_strict(then) if then is not None else None
        rows = floors_of(table) if isinstance(table, dict) else None
    except (_Rejected, UserError, KeyError, TypeError, ValueError):
        rows = None
    if rows is None:  # the commit is here: the run's verdict rule read a table it did not have
        return {}
    gpu = (doc.get("metadata", {}).get("gpu") or {}).get("name")
    return compare_floors(rows, stages, [gpu], FALLBACK_FLOOR)[0]


def config_against_file(doc: dict[str, Any], ctx: Context, path: str, config: dict[str, Any] | None) -> Problems:
    """The embedded config against its file: exactly the file as the repository held it at the recorded
    commit (a clean tree), else the experiment fields of the file at hand today, else unverified."""
    then_doc = config_at_commit(doc, path, (REPO_ROOT, "."))
    problems: Problems = []
    if then_doc is not None:
        sha = recorded_clean_commit(doc)
        if config is not None:
            problems += [(f"$.config.{k}", f"differs from {path} at the recorded commit {str(sha)[:12]} (the run's "
                          "config, as committed)") for k in sorted(set(config) | set(then_doc), key=str)
                         if config.get(k) != then_doc.get(k)]
        if "config_name" in doc and doc["config_name"] != then_doc.get("name"):
            problems.append(("$.config_name", f"{doc['config_name']!r}, but {path} at the recorded commit is config "
                             f"{then_doc.get('name')!r}"))
        return problems
    file = config_file(ctx, path)
    if file is None:
        ctx.unverifiable("$.config (against its config_path)", f"unverified (source not found): {path} (nor at the "
                         "recorded commit): "
                         "the embedded config cannot be compared with it")
        return problems
    ctx.unverifiable("$.config (fields other than the experiment's)", f"unverified (source not found): {path} at the "
                     "recorded commit (not a commit of this repository, or the tree was dirty): compared with "
                     f"today's {path} on {', '.join(EXPERIMENT_FIELDS)} only")  # validate --strict fails on it
    if config is not None:
        problems += [(f"$.config.{k}", f"differs from {path}'s {k} (the run's config)") for k in EXPERIMENT_FIELDS
                     if config.get(k) != file.get(k)]
    if "config_name" in doc and doc["config_name"] != file.get("name"):
        problems.append(("$.config_name", f"{doc['config_name']!r}, but {path} is config {file.get('name')!r}"))
    return problems


def config_semantics(doc: dict[str, Any], add: Add) -> Any:
    """``config_semantics``: the embedded config passes every config rule; returns it as a Config (or None)."""
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        where = str(exc).split(":", 1)[0]
        path = "$." + where if where.startswith("config.") or where == "config" else "$.config"
        add("config_semantics", [(path, str(exc))])
        return None
    except (TypeError, KeyError, ValueError) as exc:
        add("config_semantics", [("$.config", f"cannot be read as a config: {exc}")])
        return None
    add("config_semantics", [])
    return config


def run_record(doc: dict[str, Any], add: Add, ctx: Context, telemetry: list | None = None) -> None:
    """The run-record checks every GPU document gets (this module)."""
    guarded("environment_gate", add, environment_gate_holds, doc, add)
    guarded("gates_consistent", add, gates_consistent, doc, add)
    guarded("fla_commit", add, fla_commit, doc, add)
    guarded("metadata_plausible", add, metadata_plausible, doc, add, ctx)
    if telemetry is not None:
        guarded("telemetry_plausible", add, telemetry_plausible, telemetry, doc, add, ctx)
    if isinstance(doc.get("config"), dict):
        tolerances_pinned(doc["config"].get("tolerances"), "$.config.tolerances", add)


def unpassed_gates(doc: dict[str, Any], why: str) -> Problems:
    """``$.gates[i].passed`` of each gate the document does not record as passed, saying ``why`` none may fail there
    (a command that times or compares anything runs its gates strictly first)."""
    return [(f"$.gates[{i}].passed", f"the {g.get('name')} gate failed: {why}") for i, g in enumerate(doc["gates"])
            if g.get("passed") is not True]


def config_at_commit(doc: dict[str, Any], path: str, repos: tuple[str | Path, ...] = (REPO_ROOT,)
                     ) -> dict[str, Any] | None:
    """The config file ``path`` as the first of ``repos`` that has the document's recorded clean commit held it
    there, parsed strictly; None where no clean commit is recorded, no repository has it, or the file is not a JSON
    object there."""
    sha = recorded_clean_commit(doc)
    then = (next((data for repo in repos if (data := file_at_commit(sha, path, repo)) is not None), None)
        if sha is not None else None)
    try:
        parsed = parse_strict(then) if then is not None else None
    except _Rejected:
        return None
    return parsed if isinstance(parsed, dict) else None


def config_of(doc: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
    """The config a report was run with: ``config_path``, else the recorded ``--config``, else the CLI's default
    when the argv is the CLI's; as this repository held it at the recorded commit (a clean tree), else the file at
    hand today (a report embeds no config: held to today's file, a report whose config changed since would fail)."""
    path = doc.get("config_path") or argv_option(document_argv(doc), "--config") or (
        DEFAULT_CONFIG if recorded_cli_argv(doc) is not None else None)
    then = config_at_commit(doc, path) if path else None
    if then is not None:
        return then
    file = config_file(ctx, path) if path else None
    if file is None:
        ctx.unverifiable("the report against its config",
                         f"unverified (source not found): its config ({path or 'not recorded'})")
    return file
