"""RESULTS.md's sections for the short H200 benches beside the formal run: the bench on FLA's varlen path
(``configs/e1_h200_docs8192.json``) and the bench of a user's routing file (``bench --routing-file``), every
median and ratio with its 95% CI and the rule's verdict. A bench that replays the autotune configs of a run that
is no longer the committed one (``autotune.replayed_from.created_utc`` differs) is said to rest on it."""

from __future__ import annotations

from pathlib import Path

from ..analysis.bootstrap import bootstrap_ratio_ci
from ..core.families import BASELINE_PATTERN
from ..core.records import BenchResult
from ..core.stages import TITLES
from .data import ReportData, recorded
from .markdown import md_table, ms, times


def replay_note(data: ReportData, path: str, run: BenchResult) -> str | None:
    """The sentence saying ``run`` replays the configs of a discarded run, or None."""
    src = run.autotune.get("replayed_from") or {}
    now = data.runs.get(src.get("path", ""))
    if not src or not isinstance(now, BenchResult) or now.metadata.get("created_utc") == src.get("created_utc"):
        return None
    ours, theirs = run.best_configs(), now.best_configs()
    differ = [TITLES.get(k, k) for k in ours if ours[k] != theirs.get(k)]
    return (f"**`{path}` rests on a discarded run**: it replays the autotune configs of `{src['path']}` as created "
            f"{src['created_utc']}, an `{Path(src['path']).stem}` run that is no longer the committed one (created "
            f"{now.metadata['created_utc']}); the configs differ for {', '.join(differ) or 'no kernel'}. "
            "Re-run: part `files` of `scripts/h200_session.sh`.")


def _stage_rows(data: ReportData, run: BenchResult, stages: tuple[str, ...], patterns: list[str]) -> list[list[str]]:
    rows = []
    for p in patterns:
        for s in stages:
            if s not in run.patterns[p].stages:
                continue
            c = data.point_ci(run, p, s)
            ratio = (f"{times(c['ratio'], c['ratio_ci'])}: "
                     f"{data.claims.judged(c['ratio_ci'], data.floor(s, run.gpu_name))}" if "ratio" in c else "—")
            rows.append([p, TITLES[s], ms(c["median"], c["ci"]), ratio, str(c["n"])])
    return rows


def docs8192_section(data: ReportData) -> list[str]:
    path = data.inputs.docs8192
    run = data.runs.get(path or "")
    if not path or not isinstance(run, BenchResult):
        return []
    rep = {p: v.reproduces_official for p, v in run.patterns.items()}
    exact = all((r or {}).get("dq", {}).get("bit_exact") for r in rep.values())
    item = [recorded(recorded(v.stage_sum_vs_full_bwd, f"{path}: {p}'s stage_sum_vs_full_bwd").itemised_ratio,
                     f"{path}: {p}'s itemised_ratio") for p, v in run.patterns.items()]
    note = replay_note(data, path, run)
    packing = recorded(run.packing, f"{path}: packing")
    return [f"`bench` on the varlen path (`{path}`, `{run.config_path}`: four documents of "
            f"{packing['max_length']} tokens, {run.timing.repetitions} rounds, configs replayed from "
            f"`{(run.autotune.get('replayed_from') or {}).get('path')}`): dQ "
            + ("bit-exact" if exact else "**not** bit-exact")
            + " against the official wrapper for every routing; stage "
            f"sum + `wrapper_extra` is {100 * min(item):.1f}–{100 * max(item):.1f}% of `full_bwd` (the wrapper also "
            "rebuilds its token/chunk indices per call).", "",
            md_table(["routing", "stage", "median ms (95% CI)", "× local (95% CI)", "n"],
                     _stage_rows(data, run, ("dq_core", "dkv_core", "full_bwd"), list(run.patterns))), "",
            *([note, ""] if note else [])]


def routing_file_section(data: ReportData) -> list[str]:
    path = data.inputs.routing_file
    run = data.runs.get(path or "")
    if not path or not isinstance(run, BenchResult) or not run.routing_files:
        return []
    out = ["## Your own routing file", ""]
    for name, rec in run.routing_files.items():
        generated = name.split(":", 1)[1]
        rows = _stage_rows(data, run, ("dkv_core", "full_bwd"), [BASELINE_PATTERN, generated, name])
        line = ""
        if generated in run.patterns:
            c = data.point_ci(run, name)
            g = data.point_ci(run, generated)
            ci = bootstrap_ratio_ci(run.patterns[name].stages["dkv_core"].raw_ms,
                                    run.patterns[generated].stages["dkv_core"].raw_ms)
            r = c["median"] / g["median"]
            line = (f"`{name}` over the generated `{generated}` in the same rounds, dK/dV: {times(r, ci)}, "
                    f"{data.claims.judged(ci, data.floor('dkv_core', run.gpu_name))} (the file holds a routing of "
                    f"the same family saved by `routing --save`; sha256 `{rec['sha256'][:12]}`, "
                    f"{rec['edges']:,} edges, "
                    f"equal to the closed form: {rec['equal_to_closed_form']}).")
        out += [f"`{path}` ({run.timing.repetitions} rounds): `bench --routing-file` times `{name}` beside the "
                "config's "
                "routings, interleaved.", "",
                md_table(["routing", "stage", "median ms (95% CI)", "× local (95% CI)", "n"], rows), "",
                *([line, ""] if line else [])]
    note = replay_note(data, path, run)
    return out + ([note, ""] if note else [])


#: The H200 benches of the engine at its new HEAD beside the formal run (2026-12-01): a fixed 20-round bench and
#: the formal config under the stop rule (``bench --stop-rule``); each with its ``compare`` file against the formal run.
ENGINE_RUNS = (("results/raw/e1_h200_engine20.json", "results/compare/e1_h200_vs_engine20.json"),
               ("results/raw/e1_h200_stop.json", "results/compare/e1_h200_vs_stop.json"))


def rejudged(data: ReportData, compare_path: str, gpu: str) -> dict[str, int]:
    """The verdicts of a committed ``compare`` file, counted in the rule's words: each row's CI judged with the
    floor the file records (validated: the noise table's floors of ``gpu``'s stages when the file was made by
    the documented command), so the counts are the file's own ``counts``."""
    doc = data.load(compare_path, ("compare",))
    counts = {"differs measurably": 0, "same within noise": 0, "unresolved": 0}
    for r in doc["rows"]:
        if r.get("ci95") is not None:
            counts[data.claims.judged(r["ci95"], r["floor"])] += 1
    return counts


def engine_section(data: ReportData) -> list[str]:
    """The engine at the new HEAD and the stop rule against the formal H200 run: rounds, wall time, the compare
    rows judged by the rule, and any validate failure of the file (never hidden)."""
    formal = data.by_gpu("H200")
    if formal is None:  # no run to set these beside
        return []
    rows = []
    for path, cmp_path in ENGINE_RUNS:
        run = data.runs.get(path) or (data.failing.get(path) or (None,))[0]
        if not isinstance(run, BenchResult) or data.inputs.path(cmp_path) is None:
            continue
        counts = rejudged(data, cmp_path, formal.gpu)
        stop = run.timing.stop or {}
        timed = [n for stages in (stop.get("stage_rounds") or {}).values() for n in stages.values()]
        how = (f"stop rule: stopped by {stop.get('stopped_by')} after {stop.get('rounds')} rounds"
               + (f" (each pattern × stage timed {min(timed)}–{max(timed)} rounds)" if timed else "")
               if stop else f"{run.timing.repetitions} fixed rounds")
        failed = data.failing.get(path, (None, []))[1]
        sha = (run.metadata.get("git") or {}).get("sha", "")[:7]
        rows.append([f"`{path}`", how, f"{run.wall_seconds:.1f} s", f"`{sha}`",
                     ", ".join(f"{n} {k}" for k, n in counts.items() if n),
                     "**FAILS** " + "; ".join(failed) if failed else "passes"])
    if not rows:
        return []
    return ["## The engine at its new HEAD, and the stop rule (H200)", "",
            f"Each run repeats the formal H200 config (`{formal.path}`: {formal.run.timing.repetitions} rounds, "
            f"{formal.run.wall_seconds:.1f} s wall); its `compare` file against the formal run, every pattern × stage "
            "ratio's CI judged by the rule with this report's floors. A file `validate` fails is reported as measured "
            "and kept out of every floor. Wall time includes each run's own autotuning. Each ran on the machine lent "
            "that day, so its ratios to the formal run carry both machines' offsets; the stop rule against formal "
            "runs of its own machine: docs/METHOD.md (What a run costs).", "",
            md_table(["result", "rounds", "wall", "commit", "vs the formal run", "validate"], rows), ""]
