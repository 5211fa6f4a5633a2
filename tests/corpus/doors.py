"""The bad-input corpus of every CLI command (issue 23): one case per door a user or an attacker can open.

Each case is data: ``argv`` (``{name}`` is the path of the case file ``name``, ``{repo}`` the repository the
command runs in, ``{long}`` a 5000-character name), the ``files`` to make first (see :func:`make_file`), and
what must hold after the run:

- ``exit``: the exit code (2: bad input; a tuple: any of these), never a timeout;
- ``names``: fragments the one stderr line must contain (the field, option or file it is about; placeholders
  as in ``argv``); with exit 2 stderr is exactly one line starting ``error:``, without "Traceback" or
  "internal error";
- ``not_names``: fragments it must not contain (e.g. ``no CUDA GPU``: the argument is refused before a gate);
- ``unchanged``: files (case names, or ``repo:<path>``) that must survive byte for byte;
- ``absent``: ``repo:<path>`` that must not exist after (no partial output);
- ``git_clean``: run in a fresh clone of the repository; afterwards ``git status`` is clean: no tracked file
  modified and no untracked file (a documented command writes only the ignored ``runs/`` by default, issue 27);
- ``max_rss_mb``: the child's peak resident memory (``wait4``) must stay below this;
- ``timeout`` (s, default 60) and ``memory_cap_mb`` (``RLIMIT_AS``, default 4096: a runaway read fails
  instead of taking the machine);
- ``last``: run after every other case (the one full ``report``: the session's routing memo fills meanwhile).

``cwd`` is the session's copy of the repository (read by every case, written by none) unless ``git_clean``
or ``fresh`` asks for a clone of its own.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npy_format

from .forge import forge_bytes

T_TINY = 1024  # configs/e1_h100.json at this T: every command on it takes about a second
TINY = {"from": "configs/e1_h100.json", "edits": [{"op": "set", "path": "/shape/T", "value": T_TINY}]}
NO_GPU = "no CUDA GPU"  # the GPU gate's message: an argument error must come before it


def _tiny(**section: Any) -> dict[str, Any]:
    edits = [{"op": "set", "path": f"/{k}", "value": v} for k, v in section.items()]
    return {"from": "configs/e1_h100.json", "edits": TINY["edits"] + edits}


def _sweep(name: str) -> dict[str, Any]:
    return {"from": "configs/sweep_x2_h200.json", "edits": [{"op": "set", "path": "/name", "value": name}],
            "in_repo": f"configs/{name}.json"}


X2 = "results/sweeps/sweep_x2_h200"
POINTS_X2 = ["T32768-hot-block-block0", "T32768-local", "T32768-sink-heavy-sinks1", "T32768-sink-heavy-sinks4",
             "T32768-zipf-exponent1"]
POISON = {"op": "scale", "path": "/patterns/sink-heavy/stages/dkv_core/median_ms", "factor": 0.5}
CAL = "results/model/h200_BQ1_w4_s2.json"
TWO_POINTS = ["results/sweeps/sweep_T_h200/T8192-local.json",
              "results/sweeps/sweep_T_h200/T16384-sink-heavy-sinks4.json"]
REPORT_LIGHT = ["--repeat", "", "--ncu", "--tune-arms", "--autotune-matrix", "", "--h200", ""]
ZERO_CLOCKS = [{"op": "set", "path": "/telemetry/samples/*/sm_clock_mhz", "value": 0}]

#: the committed config schema with its name's type edited to one jsonschema does not know
_UNKNOWN_TYPE = (Path(__file__).resolve().parents[2] / "schemas" / "config.schema.json").read_text().replace(
    '"name": {\n      "type": "string"', '"name": {\n      "type": "word"', 1)

#: the committed sweep-point schema with its name's "$ref" edited to a definition that does not exist
_REF_TO_NOWHERE = (Path(__file__).resolve().parents[2] / "schemas" / "sweep_point.schema.json").read_text().replace(
    '"name": {', '"name": {\n      "$ref": "#/$defs/nope",', 1)

CASES: list[dict[str, Any]] = [
    # ---------------------------------------------------------------- routing (and every config reader)
    {"id": "routing.packing_lengths_1e30", "argv": ["routing", "--config", "{cfg}"],
     "files": {"cfg.json": _tiny(packing={"lengths": [10**30]})}, "exit": 2, "names": ["packing"]},
    {"id": "routing.packing_lengths_wrap_int64_to_T", "argv": ["routing", "--config", "{cfg}"],
     "files": {"cfg.json": _tiny(packing={"lengths": [2**62] * 4 + [T_TINY]})}, "exit": 2, "names": ["packing"],
     "why": "4 x 2^62 wraps to 0 in int64: cu_seqlens [0,0,0,0,0,1024] is accepted"},
    {"id": "routing.schema_not_json", "argv": ["routing", "--config", "configs/e1_h200.json", "--json"],
     "files": {"schema.json": {"in_repo": "schemas/config.schema.json", "text": "nope"}}, "fresh": True, "exit": 2,
     "names": ["schemas/config.schema.json", "git checkout"],
     "why": "a schema written over (by hand, or by a command before OutputPolicy kept tracked files): internal error"},
    {"id": "validate.schema_gutted_but_its_id", "argv": ["validate", "results/raw/e1_h200.json"],
     "files": {"schema.json": {"in_repo": "schemas/summary_row.schema.json",
                               "text": '{"$id": "https://nsa-kernelexp.invalid/schemas/summary_row.schema.json"}'}},
     "fresh": True, "exit": 2, "names": ["schemas/summary_row.schema.json", "git checkout"],
     "why": "its $id alone passed the first check: KeyError 'required' as the package was imported (an attacker)"},
    {"id": "validate.schema_read_at_import_damaged", "argv": ["validate", "results/raw/e1_h200.json"],
     "files": {"schema.json": {"in_repo": "schemas/summary_row.schema.json", "text": '{"schema_version": "1.0"}'}},
     "fresh": True, "exit": 2, "names": ["schemas/summary_row.schema.json", "git checkout"],
     "why": "read as the package is imported: a traceback before the CLI's error contract"},
    {"id": "routing.schema_of_an_unknown_type", "argv": ["routing", "--config", "configs/e1_h200.json", "--json"],
     "files": {"schema.json": {"in_repo": "schemas/config.schema.json", "text": _UNKNOWN_TYPE}}, "fresh": True,
     "exit": 2, "names": ["schemas/config.schema.json", "properties.name.type", "git checkout"],
     "why": "a schema edited by hand to a type jsonschema does not know: internal error UnknownType (an attacker)"},
    {"id": "validate.schema_ref_to_nowhere", "argv": ["validate", "results/sweeps/sweep_skew_h200/T32768-local.json"],
     "files": {"schema.json": {"in_repo": "schemas/sweep_point.schema.json", "text": _REF_TO_NOWHERE}}, "fresh": True,
     "exit": 2, "names": ["schemas/sweep_point.schema.json", "$ref", "git checkout"],
     "why": "a $ref edited to point nowhere (any string passes the metaschema): internal error "
            "_WrappedReferencingError with the whole schema on one line (a re-attacker)"},
    {"id": "report.provenance_markers_reversed",
     "argv": ["report", "--output", "{case}/r.md", "--analysis", "{case}/a.json", "--provenance", "{p}"],
     "files": {"p.md": {"text": "<!-- provenance:end -->\n<!-- provenance:start -->\n"}}, "exit": 2,
     "names": ["p.md", "markers"], "absent": ["r.md", "a.json"], "timeout": 20,
     "why": "the end marker before the start one: internal error IndexError (a re-attacker, 2026-12-07)"},
    {"id": "routing.debug_before_the_command", "argv": ["--debug", "routing"], "exit": 2,
     "names": ["--debug", "after its name", "routing --debug"],
     "why": "argparse said only 'unrecognized arguments: --debug', where the internal-error line advises --debug"},
    {"id": "report.analysis_is_the_noise_table",
     "argv": ["report", "--publish", "--overwrite", "--analysis", "results/noise/floors.json"], "exit": 2,
     "names": ["--analysis results/noise/floors.json", "a committed input"],
     "unchanged": ["repo:results/noise/floors.json"],
     "why": "the report read the table but its policy did not list it: replaced after 51 s of work"},
    {"id": "routing.debug_and_no_command", "argv": ["--debug"], "exit": 2, "names": ["--debug", "after its name"],
     "why": "argparse said only that COMMAND is required"},
    {"id": "routing.config_dev_zero", "argv": ["routing", "--config", "/dev/zero"], "exit": 2,
     "names": ["/dev/zero"], "max_rss_mb": 768, "memory_cap_mb": 1536},
    {"id": "routing.config_fifo", "argv": ["routing", "--config", "{fifo}"], "files": {"fifo.json": {"fifo": True}},
     "exit": 2, "names": ["fifo.json"], "timeout": 15},
    {"id": "routing.config_directory", "argv": ["routing", "--config", "{case}"], "exit": 2, "names": ["{case}"]},
    {"id": "routing.config_long_path", "argv": ["routing", "--config", "{case}/{long}.json"], "exit": 2,
     "names": ["too long"]},
    {"id": "routing.file_truncated_npz", "argv": ["routing", "--config", "{cfg}", "--routing-file", "{truncated}"],
     "files": {"cfg.json": TINY, "truncated.npz": {"npz": "truncated"}}, "exit": 2, "names": ["truncated.npz"]},
    {"id": "routing.file_junk_npz", "argv": ["routing", "--config", "{cfg}", "--routing-file", "{junk}"],
     "files": {"cfg.json": TINY, "junk.npz": {"npz": "junk"}}, "exit": 2, "names": ["junk.npz"]},
    {"id": "routing.file_zip_bomb_npz", "argv": ["routing", "--config", "{cfg}", "--routing-file", "{bomb}"],
     "files": {"cfg.json": TINY, "bomb.npz": {"npz": "bomb"}}, "exit": 2, "names": ["bomb.npz", "shape"],
     "max_rss_mb": 768, "why": "1 MB on disk, its header claims [1, 4194304, 4, 16] int32: 1 GiB decompressed"},
    {"id": "routing.file_dev_zero_npy", "argv": ["routing", "--config", "{cfg}", "--routing-file", "{zero}"],
     "files": {"cfg.json": TINY, "zero.npy": {"symlink": "/dev/zero"}}, "exit": 2, "names": ["zero.npy"],
     "max_rss_mb": 768, "memory_cap_mb": 1536},
    {"id": "routing.require_equal_edges_with_fewer_edges",
     "argv": ["routing", "--config", "{cfg}", "--routing-file", "{fewer}", "--require-equal-edges"],
     "files": {"cfg.json": TINY, "fewer.npy": {"npy": "local", "drop_edges": 1}}, "exit": 2, "names": ["edges"],
     "why": "one edge short of the closed form; bench's --require-equal-edges refuses it, routing's accepts"},
    {"id": "routing.require_equal_edges_without_a_routing_file",
     "argv": ["routing", "--config", "{cfg}", "--require-equal-edges"], "files": {"cfg.json": TINY}, "exit": 2,
     "names": ["--require-equal-edges", "--routing-file"], "why": "a flag with nothing to hold was accepted"},
    {"id": "bench.require_equal_edges_without_a_routing_file", "argv": ["bench", "--require-equal-edges"],
     "exit": 2, "names": ["--require-equal-edges", "--routing-file"],
     "why": "accepted, then \"no CUDA GPU\": the flag held nothing"},
    {"id": "routing.packed_config_with_routing_file",
     "argv": ["routing", "--config", "{cfg}", "--routing-file", "{local}"],
     "files": {"cfg.json": _tiny(packing={"documents": 512}), "local.npy": {"npy": "local"}}, "exit": 2,
     "names": ["pack"], "why": "README: a packed config naming --routing-file is refused in one line"},
    {"id": "routing.output_is_its_config", "argv": ["routing", "--config", "{cfg}", "--output", "{cfg}"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--output"], "unchanged": ["cfg.json"]},
    {"id": "routing.config_is_a_bench_result", "argv": ["routing", "--config", "results/raw/e1_h200.json"],
     "exit": 2, "names": ["results/raw/e1_h200.json", "bench_result", "not a config"]},
    {"id": "release_bench.fla_source_missing", "argv": ["release-bench", "--fla-source", "{case}/no-such-tree"],
     "exit": 2, "names": ["--fla-source", "no such folder"]},
    {"id": "routing_time.negative_length", "argv": ["routing-time", "--config", "{cfg}", "--lengths", "-64"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--lengths"]},
    {"id": "routing_time.length_2_to_40", "argv": ["routing-time", "--config", "{cfg}", "--lengths", str(2**40)],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--lengths"], "max_rss_mb": 768},
    {"id": "routing_time.zero_repeats", "argv": ["routing-time", "--config", "{cfg}", "--lengths", "1024",
                                                 "--repeats", "0"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--repeats"],
     "why": "accepted today with two numpy RuntimeWarnings on stderr (mean of an empty slice)"},
    # ---------------------------------------------------------------- validate
    {"id": "validate.dev_zero", "argv": ["validate", "/dev/zero"], "exit": 2, "names": ["/dev/zero"],
     "max_rss_mb": 768, "memory_cap_mb": 1536},
    {"id": "validate.long_path", "argv": ["validate", "{case}/{long}.json"], "exit": 2, "names": ["too long"]},
    {"id": "validate.routing_file_is_a_folder",
     "argv": ["validate", "results/raw/e1_h200_file.json", "--routing-file", "{case}"],
     "exit": 2, "names": ["--routing-file", "not a regular file"]},
    {"id": "validate.routing_files_of_one_stem",
     "argv": ["validate", "results/raw/e1_h200_file.json", "--routing-file", "results/raw/e1_h200_file.json",
              "--routing-file", "results/summaries/e1_h200_file.csv"],
     "exit": 2, "names": ["--routing-file", "taken by"],
     "why": "a later file of the same stem replaced the first, which was never read"},
    {"id": "validate.routing_file_missing",
     "argv": ["validate", "results/raw/e1_h200_file.json", "--routing-file", "{case}/missing.npy"],
     "exit": 2, "names": ["--routing-file", "no such file"],
     "why": "a routing file that is not there read as a FAIL of the result (exit 1)"},
    # ---------------------------------------------------------------- compare
    {"id": "compare.resamples_1e12", "argv": ["compare", "{a}", "{b}", "--resamples", str(10**12), "--output", ""],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--resamples"]},
    {"id": "compare.resamples_1", "argv": ["compare", "{a}", "{b}", "--resamples", "1", "--output", ""],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--resamples", "1000"],
     "why": "one resample: every '95 % CI' zero wide, an unclear verdict read same (an attacker)"},
    {"id": "compare.output_is_a_tracked_config",
     "argv": ["compare", "{a}", "{b}", "--output", "configs/e1_h100.json"],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--output configs/e1_h100.json", "git tracks it", "--overwrite"],
     "unchanged": ["repo:configs/e1_h100.json"],
     "why": "a named output outside the published tree replaced the tracked config with a compare document"},
    {"id": "compare.output_under_proc", "argv": ["compare", "{a}", "{b}", "--output", "/proc/nsa_exp_probe.json"],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--output /proc/nsa_exp_probe.json", "not files"], "not_names": ["No such file"],
     "why": "as root os.access passes /proc: the refusal came at the write, after the whole comparison"},
    {"id": "compare.output_is_the_noise_table",
     "argv": ["compare", "{a}", "{b}", "--publish", "--overwrite", "--output", "results/noise/floors.json"],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--output results/noise/floors.json", "the noise table"],
     "unchanged": ["repo:results/noise/floors.json"],
     "why": "the table compare reads was no input of its policy: --publish --overwrite replaced it with the compare"},
    {"id": "compare.output_given_twice",
     "argv": ["compare", "{a}", "{b}", "--output", "{case}/x.json", "--output", "{case}/y.json"],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--output", "given twice"], "why": "argparse kept the last silently"},
    {"id": "compare.output_is_dev_stdout", "argv": ["compare", "{a}", "{b}", "--output", "/dev/stdout"],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--output /dev/stdout", "not files"],
     "why": "with stdout redirected to a file, the atomic rename replaced the /dev/stdout symlink itself"},
    {"id": "compare.noise_from_one_file_twice",
     "argv": ["compare", "{a}", "{b}", "--noise-from", "{a}", "{a}", "--output", ""],
     "files": {"a.json": {"copy": "results/raw/e1_h200_pre.json"}, "b.json": {"copy": "results/raw/e1_h200_post.json"}},
     "exit": 2, "names": ["--noise-from"]},
    {"id": "compare.noise_pair_of_another_gpu",
     "argv": ["compare", "results/raw/e1_h100.json", "results/raw/e1_h200.json", "--noise-from",
              "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--output", "{case}/c.json"],
     "exit": 2, "names": ["--noise-from", "NVIDIA H100 80GB HBM3"],
     "why": "an H200 repeat pair accepted as the floor of an H100-vs-H200 comparison"},
    {"id": "compare.noise_pair_is_a_and_b",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--noise-from",
              "results/raw/e1_h200_repeat.json", "results/raw/e1_h200.json", "--output", "{case}/c.json"],
     "exit": 2, "names": ["--noise-from", "A and B themselves"],
     "why": "the floor measured on the very difference it judges: every slower/faster verdict gone, exit 0"},
    {"id": "compare.floor_beside_a_full_noise_pair",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_stop.json", "--floor", "0.02",
              "--noise-from", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json",
              "--output", "{case}/c.json"],
     "exit": 2, "names": ["--floor"], "why": "--floor silently unused beside a pair that times every stage"},
    {"id": "compare.noise_pair_without_wrapper_extra",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--noise-from",
              "results/raw/e1_h200_pre.json", "results/raw/e1_h200_post.json", "--output", ""],
     "exit": (0, 2), "names": ["wrapper_extra"],
     "why": "the noise pair predates the wrapper_extra stage A and B timed: a floor for it, or one line"},
    {"id": "compare.cycles_with_zero_clocks", "argv": ["compare", "{a}", "{b}", "--cycles", "--output", ""],
     "files": {"a.json": {"from": "results/raw/e1_h200_pre.json", "edits": ZERO_CLOCKS},
               "b.json": {"from": "results/raw/e1_h200_post.json", "edits": ZERO_CLOCKS}},
     "exit": 2, "names": ["does not validate", "telemetry"],
     "why": "SM clocks of 0 MHz: every ratio NaN, 24 verdicts 'unclear', exit 0; refused as a file validate FAILs"},
    {"id": "bench.output_is_summary", "argv": ["bench", "--output", "{case}/r.json", "--summary", "{case}/r.json"],
     "exit": 2, "names": ["--summary"], "not_names": [NO_GPU]},
    # an attacker's findings of 2026-12-07 (the second pass): each was answered "no CUDA GPU" on a CPU box, or
    # accepted, and would have failed on a GPU only after its work (at the schema, or as a folder of one path)
    {"id": "bench.repetitions_under_the_configs_stop_rule",
     "argv": ["bench", "--config", "{cfg}", "--repetitions", "5", "--output", "{case}/r.json"],
     "files": {"cfg.json": _tiny(**{"timing/stop": {"min_rounds": 20, "min_seconds": 0.5, "ci_rel": 0.01,
                                                    "ci_abs_ms": 0.02, "timeout_seconds": 300.0, "confidence": 0.95}})},
     "exit": 2, "names": ["--repetitions 5", "min_rounds 20"], "not_names": [NO_GPU]},
    {"id": "bench.resume_with_tune_on", "argv": ["bench", "--resume", "--tune-on", "uniform", "--output",
                                                 "{case}/r.json"],
     "exit": 2, "names": ["--resume", "default arm"], "not_names": [NO_GPU]},
    {"id": "bench.tuning_cache_is_the_output", "argv": ["bench", "--output", "{case}/tc.json", "--tuning-cache",
                                                        "{case}/tc.json"],
     "exit": 2, "names": ["--tuning-cache", "an output of this run"], "not_names": [NO_GPU],
     "absent": ["tc.json"]},
    {"id": "bench.tuning_cache_empty", "argv": ["bench", "--tuning-cache", "", "--output", "{case}/r.json"],
     "exit": 2, "names": ["--tuning-cache", "empty"], "not_names": [NO_GPU]},
    {"id": "bench.tuning_cache_is_the_filesystem_root", "argv": ["bench", "--tuning-cache", "/", "--output",
                                                                 "{case}/r.json"],
     "exit": 2, "names": ["--tuning-cache", "filesystem root"], "not_names": [NO_GPU],
     "why": "as root, the cache's files would have gone into /"},
    {"id": "release_bench.releases_dir_in_etc", "argv": ["release-bench", "--release", "0.6.0", "--releases-dir",
                                                          "/etc/nsa-exp-releases"],
     "exit": 2, "names": ["--releases-dir", "/etc"]},
    # an attacker, 2026-12-07: outputs in the system's own folders, empty values that fell back to defaults, an
    # unbounded count, a newline in a config's "kind" that split the error line
    {"id": "reproduce.out_dir_in_etc", "argv": ["reproduce", "--out-dir", "/etc/nsa-exp-reproduce"],
     "exit": 2, "names": ["--out-dir", "/etc"], "not_names": [NO_GPU],
     "why": "as root, its failed check report was written to /etc/x/check.failed.json"},
    {"id": "routing.save_in_etc", "argv": ["routing", "--config", "{cfg}", "--save", "/etc/nsa-exp-routings"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--save", "/etc"], "why": "wrote its .npy files into /etc"},
    {"id": "bench.output_in_usr", "argv": ["bench", "--output", "/usr/nsa-exp-r.json"],
     "exit": 2, "names": ["--output", "/usr"], "not_names": [NO_GPU]},
    {"id": "bench.tuning_cache_in_a_tracked_folder", "argv": ["bench", "--tuning-cache", "configs/new_cache",
                                                              "--output", "{case}/r.json"],
     "exit": 2, "names": ["--tuning-cache", "configs/"], "not_names": [NO_GPU]},
    {"id": "release_bench.empty_releases_dir", "argv": ["release-bench", "--release", "0.6.0", "--releases-dir", ""],
     "exit": 2, "names": ["--releases-dir", "empty"], "why": "fell back to the default folder"},
    {"id": "reproduce.empty_out_dir", "argv": ["reproduce", "--out-dir", ""], "exit": 2,
     "names": ["--out-dir", "empty"], "not_names": [NO_GPU], "why": "wrote runs/reproduce_h100/check.failed.json"},
    {"id": "bench.empty_routing_file", "argv": ["bench", "--routing-file", ""], "exit": 2,
     "names": ["--routing-file", "empty"], "why": "read as a folder named '.'"},
    {"id": "routing_time.repeats_unbounded", "argv": ["routing-time", "--config", "{cfg}", "--repeats", "100000000"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--repeats", "1,000"], "timeout": 30,
     "why": "ran until it was killed"},
    {"id": "routing.config_kind_with_a_newline", "argv": ["routing", "--config", "{k}"],
     "files": {"k.json": {"text": '{"kind": "x\\ny"}'}}, "exit": 2, "names": ["\\n"],
     "why": "the error ran onto two lines"},
    {"id": "routing.packed_documents_shorter_than_S_blocks", "argv": ["routing", "--config", "{cfg}"],
     "files": {"cfg.json": _tiny(packing={"documents": 512})}, "exit": 2, "names": ["config.packing", "S=16"],
     "why": "8-block documents at S=16: every routing selected every causal block, all alike, and it was accepted"},
    {"id": "sweep.lognormal_mean_with_an_exponent",
     "argv": ["sweep", "--config", "{s}", "--table-only"],
     "files": {"s.json": {"from": "configs/sweep_packing_h200.json", "edits": [
         {"op": "set", "path": "/packings/5", "value": {"distribution": "lognormal", "mean": 1e300, "sigma": 1.0,
                                                        "seed": 0}}]}},
     "exit": 2, "names": ["config.packing.mean"], "not_names": ["config.name"],
     "why": "the '+' of 1e+300 in the point's name failed the name's pattern first: the wrong field was named"},
    # a second attacker, 2026-12-07: a file beside /etc, /var's own files, a trailing slash, a newline in a name
    {"id": "routing.output_in_the_filesystem_root", "argv": ["routing", "--config", "{cfg}", "--output",
                                                             "/nsa-exp-probe.json"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--output", "filesystem root"], "why": "it wrote /x.json"},
    {"id": "routing.output_in_var_lib", "argv": ["routing", "--config", "{cfg}", "--output",
                                                 "/var/lib/nsa-exp-probe.json"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--output", "/var"], "why": "it replaced a file there"},
    {"id": "compare.output_with_a_trailing_slash",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--output", "{case}/new/"],
     "exit": 2, "names": ["--output", "names a folder"], "absent": ["new"], "why": "it wrote a file named 'new'"},
    {"id": "compare.output_name_with_a_newline",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--output", "{case}/a\nb.json"],
     "exit": 2, "names": ["--output", "not printable"]},
    {"id": "plot.empty_out_dir", "argv": ["plot", "--input", "results/summaries/e1_h100.csv", "--out-dir", ""],
     "exit": 2, "names": ["--out-dir", "empty"], "why": "its figures went into the working folder"},
    {"id": "autotune_matrix.unknown_stage",
     "argv": ["autotune-matrix", "--stages", "nope", "--output", "{case}/m.json"],
     "exit": 2, "names": ["--stages", "nope"], "not_names": [NO_GPU], "absent": ["m.json"]},
    {"id": "autotune_matrix.warmup_beyond_the_schema", "argv": ["autotune-matrix", "--warmup-rounds", "100000000",
                                                                "--output", "{case}/m.json"],
     "exit": 2, "names": ["--warmup-rounds"], "not_names": [NO_GPU], "absent": ["m.json"]},
    {"id": "whatif.rounds_beyond_the_schema", "argv": ["whatif", "--rounds", "100001", "--output", "{case}/w.json"],
     "exit": 2, "names": ["--rounds", "100,000"], "not_names": [NO_GPU], "absent": ["w.json"]},
    {"id": "sweep.output_not_csv", "argv": ["sweep", "--config", "configs/sweep_x2_h200.json", "--table-only",
                                            "--output", "{case}/t.json"],
     "exit": 2, "names": ["--output", ".csv"], "absent": ["t.json"]},
    {"id": "bench.repetitions_beyond_the_schema", "argv": ["bench", "--repetitions", "99999999999999999999",
                                                          "--output", "{case}/r.json"],
     "exit": 2, "names": ["--repetitions", "100,000"], "not_names": [NO_GPU],
     "why": "refused only at the GPU gate (or by the result's schema after the GPU run): an attacker, 2026-12-06"},
    {"id": "bench.output_named_csv", "argv": ["bench", "--output", "{case}/r.csv"], "exit": 2,
     "names": ["--output", ".json"], "not_names": [NO_GPU], "why": "a JSON written under a CSV's name"},
    {"id": "bench.config_named_dotdot", "argv": ["bench", "--config", "{cfg}", "--output", "{case}/r.json"],
     "files": {"cfg.json": _tiny(name="..")}, "exit": 2, "names": ["config.name"], "not_names": [NO_GPU],
     "why": "the default outputs go to runs/<name>/ and results/raw/<name>.json: '..' is the folder above"},
    {"id": "bench.abbreviated_option", "argv": ["bench", "--conf", "configs/e1_h200.json", "--output", "{case}/r.json"],
     "exit": 2, "names": ["unrecognized arguments", "--conf"], "not_names": [NO_GPU],
     "why": "argparse read --conf as --config, which the recorded argv's checks cannot see (an attacker, 2026-12-06)"},
    {"id": "bench.resume_with_discard_journal", "argv": ["bench", "--resume", "--discard-journal"], "exit": 2,
     "names": ["--discard-journal"], "not_names": [NO_GPU]},
    {"id": "bench.autotune_from_dev_zero", "argv": ["bench", "--autotune-from", "/dev/zero", "--output",
                                                    "{case}/r.json"],
     "exit": 2, "names": ["--autotune-from", "/dev/zero"], "not_names": [NO_GPU]},
    {"id": "bench.tuning_cache_with_per_pattern", "argv": ["bench", "--tuning-cache", "{case}/c", "--tune",
                                                        "per-pattern", "--output", "{case}/r.json"],
     "exit": 2, "names": ["--tuning-cache", "--tune per-pattern"], "not_names": [NO_GPU]},
    {"id": "bench.tuning_cache_is_a_file", "argv": ["bench", "--tuning-cache", "{cfg}", "--output", "{case}/r.json"],
     "files": {"cfg.json": {"copy": "configs/e1_h100.json"}}, "exit": 2, "names": ["--tuning-cache", "is not a folder"],
     "not_names": [NO_GPU]},
    {"id": "cost.a_config_not_a_result", "argv": ["cost", "{cfg}"],
     "files": {"cfg.json": {"copy": "configs/e1_h100.json"}}, "exit": 2, "names": ["cfg.json"]},
    {"id": "stop_replay.a_stop_rule_run", "argv": ["stop-replay", "results/raw/e1_h200.json",
                                                    "results/raw/e1_h200_stop.json"],
     "exit": 2, "names": ["e1_h200_stop.json", "timed every round"]},
    {"id": "stop_replay.one_run", "argv": ["stop-replay", "results/raw/e1_h200.json"],
     "exit": 2, "names": ["stop-replay", "at least two"]},
    {"id": "stop_replay.ci_abs_negative", "argv": ["stop-replay", "results/raw/e1_h100.json",
                                                    "results/raw/e1_h100_repeat.json", "--ci-abs-ms", "-0.5"],
     "exit": 2, "names": ["--ci-abs-ms", "-0.5"]},
    {"id": "stop_replay.runs_of_two_gpus",
     "argv": ["stop-replay", "results/raw/e1_h200.json", "results/raw/e1_h100.json"],
     "exit": 2, "names": ["stop-replay", "GPU"]},
    {"id": "stop_replay.the_same_run_under_two_spellings",
     "argv": ["stop-replay", "results/raw/e1_h200.json", "results/raw/../raw/e1_h200.json"],
     "exit": 2, "names": ["stop-replay", "give each file once"]},
    # a stage cut short is a file that does not validate (stop-replay validates its inputs, as compare; a genuine
    # stop-rule run validates and is refused as not a whole run: stop_replay.a_stop_rule_run above)
    {"id": "stop_replay.a_stage_short_of_its_rounds", "argv": ["stop-replay", "{a}", "results/raw/e1_h200.json"],
     "files": {"a.json": {"from": "results/raw/e1_h200_repeat.json",
                          "edits": [{"op": "truncate", "path": "/patterns/zipf/stages/csr/raw_ms", "keep": 100}]}},
     "exit": 2, "names": ["a.json", "does not validate", "min_observations"]},
    {"id": "whatif.benchmark_result_of_another_kind",
     "argv": ["whatif", "--benchmark-result", "{cfg}", "--output", "{case}/w.json"],
     "files": {"cfg.json": {"copy": "configs/e1_h100.json"}}, "exit": 2, "names": ["--benchmark-result"],
     "not_names": [NO_GPU]},
    {"id": "ncu.benchmark_result_missing",
     "argv": ["ncu", "--benchmark-result", "{case}/none.json", "--stage", "dq_core"], "exit": 2,
     "names": ["--benchmark-result", "none.json"], "not_names": [NO_GPU]},
    {"id": "peer_bench.unknown_peer", "argv": ["peer-bench", "--peers", "fla,banana", "--output", "{case}/p.json"],
     "exit": 2, "names": ["--peers", "banana"], "not_names": [NO_GPU]},
    {"id": "peer_bench.peer_twice", "argv": ["peer-bench", "--peers", "fla,fla", "--output", "{case}/p.json"],
     "exit": 2, "names": ["--peers", "twice"], "not_names": [NO_GPU]},
    {"id": "peer_bench.repetitions_zero", "argv": ["peer-bench", "--repetitions", "0", "--output", "{case}/p.json"],
     "exit": 2, "names": ["--repetitions"], "not_names": [NO_GPU]},
    {"id": "peer_bench.cupti_rounds_beyond_the_schema",
     "argv": ["peer-bench", "--cupti-rounds", "10000000000", "--output", "{case}/p.json"],
     "exit": 2, "names": ["--cupti-rounds", "100,000"], "not_names": [NO_GPU]},
    {"id": "peer_bench.cupti_rounds_negative",
     "argv": ["peer-bench", "--cupti-rounds", "-1", "--output", "{case}/p.json"],
     "exit": 2, "names": ["--cupti-rounds"], "not_names": [NO_GPU]},
    {"id": "peer_bench.stop_rule_with_too_few_rounds",
     "argv": ["peer-bench", "--stop-rule", "--repetitions", "5", "--output", "{case}/p.json"],
     "exit": 2, "names": ["peer-bench --stop-rule", "min_rounds"], "not_names": [NO_GPU]},
    {"id": "peer_bench.config_missing", "argv": ["peer-bench", "--config", "{case}/none.json"],
     "exit": 2, "names": ["none.json"], "not_names": [NO_GPU]},
    {"id": "whatif.unknown_pattern", "argv": ["whatif", "--patterns", "banana", "--output", "{case}/w.json"],
     "exit": 2, "names": ["banana"], "not_names": [NO_GPU]},
    {"id": "whatif.pattern_given_twice", "argv": ["whatif", "--patterns", "local,local", "--output", "{case}/w.json"],
     "exit": 2, "names": ["--patterns", "local given twice"], "not_names": [NO_GPU], "absent": ["w.json"],
     "why": "each arm was timed twice (an attacker, 2026-12-07)"},
    {"id": "whatif.max_fanin_given_twice", "argv": ["whatif", "--patterns", "sink-heavy", "--max-fanin", "4096,4096",
                                                    "--output", "{case}/w.json"],
     "exit": 2, "names": ["--max-fanin", "4096 given twice"], "not_names": [NO_GPU], "absent": ["w.json"]},
    {"id": "autotune_matrix.output_not_json", "argv": ["autotune-matrix", "--output", "{case}/m.txt"],
     "exit": 2, "names": ["--output", "ending in .json"], "not_names": [NO_GPU], "absent": ["m.txt"],
     "why": "a JSON document written under a .txt name (an attacker, 2026-12-07)"},
    {"id": "whatif.max_fanin_512_at_T32768",
     "argv": ["whatif", "--config", "configs/e1_h200.json", "--max-fanin", "512", "--output", "{case}/w.json"],
     "exit": 2, "names": ["--max-fanin"], "not_names": [NO_GPU],
     "why": "B' = 64 copies of the inputs cannot fit an H200's 141 GiB; the H200 ran out of memory"},
    {"id": "check.config_with_packing_lengths_1e30", "argv": ["check", "--config", "{cfg}", "--output",
                                                             "{case}/c.json"],
     "files": {"cfg.json": _tiny(packing={"lengths": [10**30]})}, "exit": 2, "names": ["packing"],
     "not_names": [NO_GPU]},
    {"id": "smoke.output_is_its_config", "argv": ["smoke", "--config", "{cfg}", "--output", "{cfg}"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--output"], "not_names": [NO_GPU], "unchanged": ["cfg.json"]},
    {"id": "autotune_matrix.output_is_its_config", "argv": ["autotune-matrix", "--config", "{cfg}", "--output",
                                                            "{cfg}"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--output"], "not_names": [NO_GPU], "unchanged": ["cfg.json"]},
    {"id": "profile_stage.unknown_pattern", "argv": ["profile-stage", "--pattern", "banana", "--stage", "dq_core"],
     "exit": 2, "names": ["banana"], "not_names": [NO_GPU]},
    {"id": "ncu.unknown_pattern", "argv": ["ncu", "--pattern", "banana", "--stage", "dq_core"], "exit": 2,
     "names": ["banana"], "not_names": [NO_GPU]},
    # ---------------------------------------------------------------- release-bench, release-table
    {"id": "release_bench.zero_repetitions", "argv": ["release-bench", "--release", "0.6.0", "--repetitions", "0"],
     "exit": 2, "names": ["--repetitions"]},
    {"id": "validate.release_dir_is_a_file", "argv": ["validate", "results/raw/e1_h100_dev.json", "--release-dir",
                                                      "configs/e1_h200.json"],
     "exit": 2, "names": ["--release-dir", "not a folder"]},
    {"id": "release_bench.wheel_dir_is_a_file", "argv": ["release-bench", "--release", "0.6.0", "--wheel-dir",
                                                          "configs/release_h200.json"],
     "exit": 2, "names": ["--wheel-dir", "not a folder"], "why": "it said 'no such folder' of a file"},
    {"id": "release_bench.routing_file_is_a_folder", "argv": ["release-bench", "--release", "0.6.0", "--routing-file",
                                                               "{case}"],
     "exit": 2, "names": ["routing file", "a folder"], "why": "it said \"unsupported suffix ''\""},
    {"id": "release_bench.an_experiment_config", "argv": ["release-bench", "--config", "configs/e1_h200.json",
                                                           "--release", "0.6.0"],
     "exit": 2, "names": ["an experiment config", "not a release config"],
     "why": "it said 'Additional properties are not allowed' of the experiment's keys"},
    {"id": "bench.a_sweep_config", "argv": ["bench", "--config", "configs/sweep_skew_h200.json", "--output",
                                            "{case}/r.json"],
     "exit": 2, "names": ["a sweep config", "not an experiment config"], "not_names": [NO_GPU]},
    {"id": "release_bench.release_not_a_version", "argv": ["release-bench", "--release", "latest"], "exit": 2,
     "names": ["--release", "not a release version"]},
    {"id": "release_table.a_bench_result", "argv": ["release-table", "{r}"],
     "files": {"r.json": {"copy": "results/raw/e1_h200_pre.json"}}, "exit": 2, "names": ["not a release result"]},
    {"id": "release_table.resamples_1e12",
     "argv": ["release-table", "results/releases/release_h200/fla-core-0.5.2-T32768.json", "--resamples", str(10**12)],
     "exit": 2, "names": ["--resamples"], "why": "as compare: the bootstrap would hold 10^12 resamples in memory"},
    {"id": "release_table.dev_zero", "argv": ["release-table", "/dev/zero"], "exit": 2, "names": ["/dev/zero"]},
    # ---------------------------------------------------------------- sweep
    {"id": "sweep.config_named_dotdot", "argv": ["sweep", "--config", "{s}", "--table-only", "--publish"],
     "files": {"s.json": {"from": "configs/sweep_x2_h200.json", "edits": [{"op": "set", "path": "/name",
                                                                         "value": ".."}]}},
     "exit": 2, "names": ["sweep.name"], "not_names": [NO_GPU],
     "why": "results/sweeps/<name>/ with '..' is results/ itself: --table-only --publish worked there"},
    {"id": "sweep.slurm_executor_without_slurm",
     "argv": ["sweep", "--config", "configs/sweep_corpus_slurm.json", "--executor", "slurm"],
     "files": {"s.json": _sweep("sweep_corpus_slurm")}, "fresh": True, "exit": 2, "names": ["slurm"],
     "absent": ["repo:results/sweeps/sweep_corpus_slurm.csv"]},
    {"id": "sweep.table_only_with_a_poisoned_point",
     "argv": ["sweep", "--config", "configs/sweep_corpus_poison.json", "--table-only", "--publish"],
     "files": {"s.json": _sweep("sweep_corpus_poison"),
               **{f"{p}.json": {"from": f"{X2}/{p}.json", "in_repo": f"results/sweeps/sweep_corpus_poison/{p}.json",
                                "edits": [{"op": "set", "path": "/sweep", "value": "sweep_corpus_poison"},
                                          # the config its sweep plans for it (validate holds a point to it)
                                          {"op": "set", "path": "/config/description",
                                           "value": f"sweep sweep_corpus_poison point {p}"},
                                          *([POISON] if p.endswith("sinks4") else [])]} for p in POINTS_X2}},
     "fresh": True, "exit": 2, "names": ["T32768-sink-heavy-sinks4"],
     "absent": ["repo:results/sweeps/sweep_corpus_poison.csv"],
     "why": "the point's dK/dV median halved: validate FAILs it, the table used it (ratio 2.08 instead of 4.17)"},
    {"id": "sweep.table_only_of_an_empty_sweep",
     "argv": ["sweep", "--config", "configs/sweep_corpus_empty.json", "--table-only", "--publish"],
     "files": {"s.json": _sweep("sweep_corpus_empty")}, "fresh": True, "exit": 2, "names": ["point"],
     "absent": ["repo:results/sweeps/sweep_corpus_empty.csv"],
     "why": "prints 'Empty DataFrame' and writes a 0-row CSV"},
    # ---------------------------------------------------------------- issue 28: the last bad inputs
    {"id": "whatif.max_fanin_superscript_two", "argv": ["whatif", "--max-fanin", "\u00b2"], "exit": 2,
     "names": ["--max-fanin", "ASCII digits"], "not_names": [NO_GPU],
     "why": "'\u00b2'.isdigit() is True, int() raises: internal error ValueError"},
    {"id": "routing_time.repeats_arabic_indic", "argv": ["routing-time", "--repeats", "\u0663"], "exit": 2,
     "names": ["--repeats", "ASCII digits"], "why": "int('\u0663') is 3: accepted silently"},
    {"id": "predict.param_name_replaces_pattern",
     "argv": ["predict", "--calibration", CAL, "--pattern", "zipf", "--param", "name=local"], "exit": 2,
     "names": ["--param", "--pattern"], "why": "predicted local while --pattern said zipf"},
    {"id": "reproduce.out_dir_in_the_published_tree", "argv": ["reproduce", "--out-dir", "results/reproduce_x"],
     "exit": 2, "names": ["--out-dir", "published tree"], "not_names": [NO_GPU], "absent": ["repo:results/reproduce_x"],
     "why": "a submission folder inside results/ would be read as published results"},
    {"id": "reproduce.out_dir_in_the_repository_outside_runs", "argv": ["reproduce", "--out-dir", "scripts/sub"],
     "exit": 2, "names": ["--out-dir", "runs/"], "not_names": [NO_GPU], "absent": ["repo:scripts/sub"],
     "why": "its check.failed.json landed in scripts/sub, which git shows"},
    {"id": "reproduce.floor_and_noise_table", "argv": ["reproduce", "--floor", "0.02", "--noise-table",
                                                      "results/noise/floors.json"], "exit": 2,
     "names": ["--floor", "--noise-table"], "why": "--floor silently replaced the table a user named"},
    {"id": "reproduce.floor_out_of_range", "argv": ["reproduce", "--floor", "5"], "exit": 2,
     "names": ["--floor", "[0, 1)"], "not_names": [NO_GPU], "why": "refused only after check, smoke and bench"},
    {"id": "reproduce.published_not_a_bench_result",
     "argv": ["reproduce", "--published", "results/reports/e1_h200_check.json"], "exit": 2,
     "names": ["--published"], "not_names": [NO_GPU], "why": "refused only after check, smoke and bench"},
    {"id": "sweep.slurm_with_inline_executor",
     "argv": ["sweep", "--config", "configs/sweep_x2_h200.json", "--slurm", '{{"slurm_partition": "gpu"}}'],
     "exit": 2, "names": ["--slurm", "inline"], "not_names": [NO_GPU], "why": "the Slurm parameters were ignored"},
    {"id": "bench.autotune_from_a_forged_result",
     "argv": ["bench", "--autotune-from", "{r}", "--output", "{case}/o.json", "--summary", "{case}/o.csv"],
     "files": {"r.json": {"from": "results/raw/e1_h200_pre.json", "edits": [POISON]}}, "exit": 2,
     "names": ["--autotune-from", "does not validate"], "not_names": [NO_GPU],
     "why": "accepted until the GPU gate"},
    {"id": "plot.summary_that_fails_validate",
     "argv": ["plot", "--input", "{s}", "--result", "results/raw/e1_h200_pre.json", "--out-dir", "{case}/fig"],
     "files": {"s.csv": {"from": "results/summaries/e1_h200_pre.csv", "edits": [
         {"op": "csv_cell", "row": {"pattern": "sink-heavy", "stage": "dkv_core"}, "column": "median_ms",
          "value": "62.0"}]}},
     "exit": 2, "names": ["--input", "does not validate"], "why": "drew the forged median"},
    # ---------------------------------------------------------------- the model
    {"id": "model_validate.output_is_its_calibration",
     "argv": ["model-validate", "--calibration", "{cal}", "--points", *TWO_POINTS, "--output", "{cal}",
              "--figures", ""],
     "files": {"cal.json": {"copy": CAL}}, "exit": 2, "names": ["--output"], "unchanged": ["cal.json"]},
    {"id": "model_validate.point_with_a_forged_T",
     "argv": ["model-validate", "--calibration", CAL, "--points", "{point}", "--output", "{case}/v.json",
              "--figures", ""],
     "files": {"point.json": {"from": "results/sweeps/sweep_T_h200/T16384-sink-heavy-sinks4.json", "edits": [
         {"op": "set", "path": p, "value": 16320} for p in ("/config/shape/T", "/shape/T", "/point/T")]}},
     "exit": 2, "names": ["point.json"],
     "why": "T 16384 -> 16320 everywhere (its routing statistics are T=16384's): validate FAILs it, model-validate "
            "predicts it"},
    {"id": "model_validate.point_with_T_zero",
     "argv": ["model-validate", "--calibration", CAL, "--points", "{point}", "--output", "{case}/v.json",
              "--figures", ""],
     "files": {"point.json": {"from": "results/sweeps/sweep_T_h200/T16384-sink-heavy-sinks4.json", "edits": [
         {"op": "set", "path": p, "value": 0} for p in ("/config/shape/T", "/shape/T", "/point/T")]}},
     "exit": 2, "names": ["point.json"]},
    {"id": "model_validate.poisoned_point",
     "argv": ["model-validate", "--calibration", CAL, "--points", "{point}", "--output", "{case}/v.json",
              "--figures", ""],
     "files": {"point.json": {"from": f"{X2}/T32768-sink-heavy-sinks4.json", "edits": [POISON]}},
     "exit": 2, "names": ["point.json"]},
    {"id": "predict.batch_zero", "argv": ["predict", "--calibration", CAL, "--pattern", "local", "--B", "0"],
     "exit": 2, "names": ["--B", "positive integer"], "why": "issue 32: a shape with no (b, h) pair"},
    {"id": "predict.kv_heads_negative", "argv": ["predict", "--calibration", CAL, "--pattern", "local", "--H", "-1"],
     "exit": 2, "names": ["--H", "positive integer"], "why": "issue 32: a negative head count"},
    {"id": "predict.group_size_not_a_power_of_two",
     "argv": ["predict", "--calibration", CAL, "--pattern", "local", "--G", "3"], "exit": 2,
     "names": ["--G", "power of two"], "why": "issue 32: FLA loads a KV head's G query heads as one Triton block"},
    {"id": "predict.group_size_past_the_schemas_hq",
     "argv": ["predict", "--calibration", CAL, "--pattern", "local", "--H", "64", "--G", "32"], "exit": 2,
     "names": ["--G", "HQ = H*G", "1024"], "why": "issue 32: HQ beyond the config schema's maximum"},
    {"id": "predict.calibration_dev_zero", "argv": ["predict", "--calibration", "/dev/zero", "--pattern", "local"],
     "exit": 2, "names": ["/dev/zero"], "max_rss_mb": 768, "memory_cap_mb": 1536},
    {"id": "calibrate.output_is_its_calibration_set",
     "argv": ["calibrate", "--points", "results/sweeps/sweep_skew_h200", "results/sweeps/sweep_T_h200", "--set",
              "{set}", "--output", "{set}"],
     "files": {"set.json": {"copy": "configs/model_calibration_h200.json"}}, "exit": 2, "names": ["--output"],
     "unchanged": ["set.json"]},
    {"id": "schemas.unknown_option", "argv": ["schemas", "--bogus"], "exit": 2, "names": ["--bogus"]},
    {"id": "lock.output_is_its_source", "argv": ["lock", "--from", "{r}", "--output", "{r}"],
     "files": {"r.json": {"copy": "results/raw/e1_h200_pre.json"}}, "exit": 2, "names": ["--output"],
     "unchanged": ["r.json"]},
    {"id": "report.output_is_its_result",
     "argv": ["report", "--result", "{r}", *REPORT_LIGHT, "--output", "{r}", "--analysis", "{case}/a.json"],
     "files": {"r.json": {"copy": "results/raw/e1_h200_pre.json"}}, "exit": 2, "names": ["--output"],
     "unchanged": ["r.json"]},
    {"id": "report.provenance_file_missing",
     "argv": ["report", "--output", "{case}/r.md", "--analysis", "{case}/a.json", "--provenance", "{case}/p.md"],
     "exit": 2, "names": ["p.md", "no such file", "copy the published one"], "absent": ["r.md", "a.json"],
     "timeout": 20, "why": "METHOD.md's command: exit 2 after ~110 s of validation, RESULTS and analysis written"},
    {"id": "report.provenance_without_its_markers",
     "argv": ["report", "--output", "{case}/r.md", "--analysis", "{case}/a.json", "--provenance", "{p}"],
     "files": {"p.md": {"text": "# no markers here\n"}}, "exit": 2, "names": ["p.md", "markers"],
     "absent": ["r.md", "a.json"], "unchanged": ["p.md"], "timeout": 20},
    {"id": "flush_study.output_not_json", "argv": ["flush-study", "results/studies/h200_method_study_flush.raw.json",
                                                  "--output", "{case}/study.txt"],
     "exit": 2, "names": ["--output", ".json"], "absent": ["study.txt"],
     "why": "written as JSON under a .txt name (a re-attacker, 2026-12-07)"},
    {"id": "flush_study.publish_without_output",
     "argv": ["flush-study", "results/studies/h200_method_study_flush.raw.json", "--publish"],
     "exit": 2, "names": ["--publish", "--output"], "unchanged": ["repo:results/studies/h200_flush_policy.json"],
     "why": "printed its table, wrote nothing and said nothing (a re-attacker, 2026-12-07)"},
    {"id": "flush_study.output_is_its_raw_study", "argv": ["flush-study", "{raw}", "--output", "{raw}"],
     "files": {"raw.json": {"copy": "results/studies/h200_method_study_flush.raw.json"}}, "exit": 2,
     "names": ["--output"], "unchanged": ["raw.json"]},
    {"id": "flush_study.output_is_a_symlink_loop",
     "argv": ["flush-study", "results/studies/h200_method_study_flush.raw.json", "--output", "{loop}"],
     "files": {"loop.json": {"symlink": "loop.json"}}, "exit": 2, "names": ["--output", "symlink loop"],
     "why": "Path.resolve raised RuntimeError on the loop: 'internal error', exit 1 (an attacker, 2026-12-07)"},
    {"id": "ncu_export.output_is_its_raw_csv", "argv": ["ncu-export", "{n}", "--output", "{n}"],
     "files": {"n.raw.csv": {"copy": "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.raw.csv"}}, "exit": 2,
     "names": ["--output"], "unchanged": ["n.raw.csv"]},
    {"id": "ncu_export.csv_of_no_kernel_rows",
     "argv": ["ncu-export", "{g}", "--pattern", "local-vs-sink-heavy", "--stage", "dkv_core", "--output",
              "{case}/out/s.json"],
     "files": {"g.csv": {"text": "garbage,only\n1,2\n"}}, "exit": 2, "names": ["no kernel rows"],
     "absent": ["out/s.raw.csv", "out/s.json"],
     "why": "the CSV's copy beside the summary was written before the summary was built, and left behind"},
    {"id": "plot.sweep_table_as_summary", "argv": ["plot", "--input", "results/sweeps/sweep_T_h200.csv",
                                                   "--out-dir", "{case}/fig"], "exit": 2, "names": ["--input"]},
    {"id": "sweep_plot.summary_as_sweep_table", "argv": ["sweep-plot", "--table", "results/summaries/e1_h200.csv",
                                                         "--out-dir", "{case}/fig"], "exit": 2, "names": ["--table"]},
    {"id": "autotune_heatmap.dev_zero", "argv": ["autotune-heatmap", "--input", "/dev/zero", "--out-dir",
                                                 "{case}/fig"], "exit": 2, "names": ["/dev/zero"],
     "max_rss_mb": 768, "memory_cap_mb": 1536},
    # an attacker, 2026-12-07 (a third pass): routing --save onto its own report or into the repository's folders, a
    # tuning pair that ignored --tune-on on a GPU, a point's release that never ran, a device called missing
    {"id": "routing.save_is_the_output", "argv": ["routing", "--config", "{cfg}", "--output", "{case}/x/r.json",
                                                  "--save", "{case}/x/r.json"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--save", "--output"], "absent": ["x/r.json"],
     "why": "wrote the report, then 'Not a directory' on the first routing: two stderr lines, the report left"},
    {"id": "routing.save_under_the_output", "argv": ["routing", "--config", "{cfg}", "--output", "{case}/r.json",
                                                     "--save", "{case}/r.json/routings"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--save", "--output"], "absent": ["r.json"]},
    {"id": "routing.output_is_a_saved_routing", "argv": ["routing", "--config", "{cfg}", "--output",
                                                         "{case}/d/local.npy", "--save", "{case}/d"],
     "files": {"cfg.json": TINY}, "exit": 2, "names": ["--save", "--output"], "absent": ["d/local.npy"],
     "why": "the report was written, then replaced by the local routing, exit 0"},
    *({"id": f"routing.save_into_the_tracked_{folder}", "argv": ["routing", "--config", "{cfg}", "--save", folder],
       "files": {"cfg.json": TINY}, "git_clean": True, "exit": 2, "names": ["--save", folder, "git tracks"],
       "absent": [f"repo:{folder}/local.npy"], "why": f"wrote {folder}/local.npy etc. into the checkout"}
      for folder in ("tests", "configs", "nsa_exp")),
    {"id": "bench.tune_on_with_per_pattern", "argv": ["bench", "--tune-on", "sink-heavy", "--tune", "per-pattern",
                                                      "--output", "{case}/r.json"],
     "exit": 2, "names": ["--tune-on", "--tune per-pattern", "each routing on itself"], "not_names": [NO_GPU],
     "why": "accepted; on a GPU the per-pattern arm ran and --tune-on was ignored"},
    {"id": "bench.tune_on_its_default_typed_with_per_pattern",
     "argv": ["bench", "--tune-on=local", "--tune", "per-pattern", "--output", "{case}/r.json"],
     "exit": 2, "names": ["--tune-on", "--tune per-pattern"], "not_names": [NO_GPU],
     "why": "--tune-on local typed (its default's value) passed the door (a re-attacker, 2026-12-07)"},
    {"id": "release_bench.point_release_not_a_version",
     "argv": ["release-bench", "--config", "{r}", "--allow-gpu", "--release", "0.6.0", "--wheel-dir", "{case}"],
     "files": {"r.json": {"from": "configs/release_h200.json",
                          "edits": [{"op": "set", "path": "/points/1/releases", "value": ["0.6.O"]}]}},
     "exit": 2, "names": ["points[1].releases", "0.6.O"],
     "why": "a point's releases were any strings: the point never ran, and nothing said so"},
    *({"id": f"release_bench.point_release_{label}",
       "argv": ["release-bench", "--config", "{r}", "--release", "0.6.0", "--wheel-dir", "{case}"],
       "files": {"r.json": {"from": "configs/release_h200.json",
                            "edits": [{"op": "set", "path": "/points/1/releases", "value": [value]}]}},
       "exit": 2, "names": ["points[1].releases"]}
      for label, value in (("empty", ""), ("with_a_bidi_override", "0.6.0\u202e"),
                           ("with_a_trailing_newline", "0.6.0\n"), ("not_among_the_configs", "0.6.1"))),
    {"id": "release_bench.fla_source_dev_zero", "argv": ["release-bench", "--fla-source", "/dev/zero"], "exit": 2,
     "names": ["--fla-source", "a character device"], "why": "it said 'no such folder' of a device"},
    {"id": "bench.autotune_from_a_device", "argv": ["bench", "--autotune-from", "/dev/null", "--output",
                                                    "{case}/r.json"],
     "exit": 2, "names": ["--autotune-from", "a character device"], "not_names": [NO_GPU],
     "why": "it said 'no such file' of a device"},
    # ---------------------------------------------------------------- documented commands, run as written
    {"id": "documented.calibrate_from_readme",
     "argv": ["calibrate", "--points", "results/sweeps/sweep_skew_h200", "results/sweeps/sweep_T_h200", "--set",
              "configs/model_calibration_h200.json"], "git_clean": True, "exit": 0,
     "why": "README's invoke calibrate (no --output) once rewrote results/model/h200_BQ1_w4_s2.json"},
    {"id": "documented.model_validate_default_output",
     "argv": ["model-validate", "--calibration", CAL, "--points", *TWO_POINTS], "git_clean": True, "exit": 0,
     "why": "MODEL.md's model-validate (here on two of its points) once rewrote the committed validation and figure"},
    {"id": "documented.lock_from_readme", "argv": ["lock", "--from", "results/raw/e1_h200.json"], "git_clean": True,
     "exit": 0, "why": "README's invoke lock --source once rewrote requirements-lock.txt"},
    {"id": "documented.plot_from_readme", "argv": ["plot", "--input", "results/summaries/e1_h100.csv"],
     "git_clean": True, "exit": 0, "why": "once rewrote docs/figures/e1_h100_fanin_cv_latency.*"},
    {"id": "documented.autotune_heatmap_from_readme",
     "argv": ["autotune-heatmap", "--input", "results/autotune/e1_h200.json"], "git_clean": True, "exit": 0,
     "why": "once rewrote docs/figures/e1_h200_autotune_heatmap.*"},
    {"id": "documented.report_default_outputs", "argv": ["report", *REPORT_LIGHT], "git_clean": True,
     "exit": 0, "timeout": 360, "last": True,
     "why": "README's invoke report (here without its slow optional sections) once rewrote docs/RESULTS.md and "
            "results/analysis/e1_h100.json"},
    {"id": "documented.noise_table_publish_without_overwrite", "argv": ["noise-table", "--publish"], "git_clean": True,
     "exit": 2, "names": ["results/noise/floors.json", "--overwrite"],
     "why": "the committed noise table exists: refused in one line before any file is read"},
    {"id": "documented.compare_from_readme",
     "argv": ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json"], "git_clean": True,
     "exit": 0},
    {"id": "documented.sweep_table_only", "argv": ["sweep", "--config", "configs/sweep_x2_h200.json", "--table-only"],
     "git_clean": True, "exit": 2, "names": ["runs/sweep_x2_h200/sweeps/sweep_x2_h200", "--publish"],
     "why": "without --publish the table is rebuilt from the run folder's points (none yet)"},
    {"id": "documented.sweep_table_only_published",
     "argv": ["sweep", "--config", "configs/sweep_x2_h200.json", "--table-only", "--publish"], "git_clean": True,
     "exit": 0, "why": "the committed table, rebuilt byte for byte: nothing replaced"},
]


# --- files a case makes ---------------------------------------------------------------------------

def local_routing(T: int = T_TINY, H: int = 4, S: int = 16, block_size: int = 64) -> np.ndarray:
    """The ``local`` routing ([1, T, H, S] int32): query t selects its min(S, t // BS + 1) most recent causal
    blocks in descending order, -1 padding (README's definition; equal to ``routing --save``'s local.npy)."""
    t = np.arange(T)[:, None]
    j = np.arange(S)[None, :]
    rows = np.where(j < np.minimum(S, t // block_size + 1), t // block_size - j, -1).astype(np.int32)
    return np.ascontiguousarray(np.broadcast_to(rows[None, :, None, :], (1, T, H, S)))


def zip_bomb(path: Path, shape: tuple[int, ...]) -> None:
    """A one-member ``.npz`` (zip64, deflate) whose ``block_indices.npy`` header claims ``shape`` int32 and
    whose data really are that many -1s: 1 GiB compresses to ~1 MB. Built from one deflated 1 MiB block
    repeated (each ends in a full flush, so the stream stays valid) in well under a second."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "<i4", "fortran_order": False, "shape": shape})
    head_bytes = header.getvalue()
    chunk = b"\xff" * (1 << 20)
    count, rest = divmod(int(np.prod(shape)) * 4, len(chunk))
    assert rest == 0, shape
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = [z.compress(head_bytes) + z.flush(zlib.Z_FULL_FLUSH)]
    block = z.compress(chunk) + z.flush(zlib.Z_FULL_FLUSH)
    tail = z.flush()
    crc = zlib.crc32(head_bytes)
    for _ in range(count):
        crc = zlib.crc32(chunk, crc)
    body = data[0] + block * count + tail
    size = len(head_bytes) + count * len(chunk)
    name = b"block_indices.npy"
    extra = struct.pack("<HHQQ", 1, 16, size, len(body))
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 8, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name),
                        len(extra)) + name + extra
    cextra = struct.pack("<HHQQQ", 1, 24, size, len(body), 0)
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 8, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                          len(name), len(cextra), 0, 0, 0, 0, 0) + name + cextra
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(body), 0)
    path.write_bytes(local + body + central + end)


def _npz(kind: str) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, block_indices=local_routing())
    data = buf.getvalue()
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "junk":
        return b"PK\x03\x04" + bytes(200)  # a zip signature, then nothing a zip reader can use
    raise ValueError(kind)


def make_file(path: Path, spec: dict[str, Any], repo: Path) -> None:
    """Make one case file at ``path`` from ``spec``: ``copy`` (bytes of a repository file), ``from`` + ``edits``
    (a forged copy, :func:`tests.corpus.forge.forge_bytes`), ``fifo``, ``symlink``, ``npy`` (``local``,
    optionally ``drop_edges`` valid slots set to -1 from the last query), ``npz`` (``truncated``, ``junk``,
    ``bomb``) or ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if "copy" in spec:
        path.write_bytes((repo / spec["copy"]).read_bytes())
    elif "from" in spec:
        path.write_bytes(forge_bytes((repo / spec["from"]).read_bytes(), spec["from"], spec.get("edits", [])))
    elif spec.get("fifo"):
        os.mkfifo(path)
    elif "symlink" in spec:
        path.symlink_to(spec["symlink"])
    elif "npy" in spec:
        bi = local_routing()
        for k in range(spec.get("drop_edges", 0)):
            bi[0, -1, 0, k] = -1
        with open(path, "wb") as fh:
            np.save(fh, bi)
    elif spec.get("npz") == "bomb":
        zip_bomb(path, (1, 1 << 22, 4, 16))
    elif "npz" in spec:
        path.write_bytes(_npz(spec["npz"]))
    elif "text" in spec:
        path.write_text(spec["text"])
    else:
        raise ValueError(f"unknown file spec {spec}")


def case_files(case: dict[str, Any], case_dir: Path, repo: Path) -> dict[str, Path]:
    """Make every file of ``case``; returns {placeholder: path} (a name's stem is its placeholder)."""
    out = {}
    for name, spec in case.get("files", {}).items():
        path = repo / spec["in_repo"] if "in_repo" in spec else case_dir / name
        make_file(path, spec, repo)
        out[name] = path
    return out


def expand(argv: list[str], files: dict[str, Path], case_dir: Path, repo: Path) -> list[str]:
    """``argv`` with ``{name}`` (a file's stem), ``{case}``, ``{repo}`` and ``{long}`` filled in."""
    names = {Path(n).name.split(".")[0]: str(p) for n, p in files.items()}
    values = {**names, "case": str(case_dir), "repo": str(repo), "long": "a" * 5000}
    return [a.format(**values) if "{" in a else a for a in argv]


def check_table() -> None:
    """Every case well formed (run by the tests)."""
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    for case in CASES:
        assert set(case) <= {"id", "argv", "files", "exit", "names", "not_names", "unchanged", "absent", "git_clean",
                             "fresh", "max_rss_mb", "memory_cap_mb", "timeout", "last", "why"}, case["id"]
        json.dumps(case)  # data only
