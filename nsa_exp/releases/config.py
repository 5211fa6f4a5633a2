"""The release arm's config (``schemas/release_config.schema.json``): a base experiment config and points.

Each point is a full experiment config at that ``T`` with the point's routings (checked by the same
rules as any config: shape, launch limits, the family table), so a release result embeds a config
that ``validate`` can rebuild and regenerate routings from. A point may name the ``releases`` it runs
for (e.g. the T sweep only on the newest release); a point without one runs for every target,
``--fla-source`` trees included.

>>> cfg = load_release_config("configs/release_h200.json")
>>> [(p.T, len(p.config.patterns), p.releases) for p in cfg.points]
[(32768, 5, None), (8192, 2, ('0.6.0',)), (131072, 2, ('0.6.0',))]
>>> [p.T for p in cfg.points_for("release", "0.5.1")], [p.T for p in cfg.points_for("source", None)]
([32768], [32768])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..core.config import Config
from ..core.families import TUNE_PATTERN, release_point_names
from ..core.stages import release_stages
from ..errors import UserError
from ..io.config_files import config_from_dict, load_config, read_config_file
from ..io.paths import recorded_path
from ..io.schemas import validate_or_raise
from ..routing.files import file_routings
from ..sweeps.files import file_points
from .environments import RELEASE_VERSION_RE, find_wheel

DEFAULT_CUPTI_ROUNDS = 5


@dataclass(frozen=True)
class ReleasePoint:
    T: int
    config: Config                      # the experiment config at this T (and shape) with the point's routings
    releases: tuple[str, ...] | None    # only for these fla-core versions (None: every target)
    shaped: bool = False                # the point sets its own B, H or HQ (``"shape"``)

    @property
    def key(self) -> str:
        """The point's id in file names: ``T<T>``, with the shape's label after it for a point that sets its own
        B, H or HQ (``T32768-B2-H4-G16``; :func:`nsa_exp.core.families.release_point_names`)."""
        s = self.config.shape
        return release_point_names(self.T, s.B, s.H, s.HQ, self.shaped)[1]


@dataclass(frozen=True)
class ReleaseConfig:
    name: str
    source: str
    raw: dict[str, Any]
    base: Config
    points: tuple[ReleasePoint, ...]
    releases: tuple[str, ...]
    cupti_rounds: int

    @property
    def stages(self) -> tuple[str, ...]:
        """The release calls each routing makes, in order (:func:`release_stages`)."""
        return release_stages(self.raw)

    def points_for(self, kind: str, version: str | None) -> list[ReleasePoint]:
        """The points a target runs: unfiltered ones, plus (a release) those naming its version."""
        return [p for p in self.points if p.releases is None or (kind == "release" and version in p.releases)]

    def versions(self, asked: list[str], sources: bool, wheel_dir: str | None) -> list[str]:
        """The releases a run times: ``asked`` (``--release``), else this config's unless there are ``sources``
        (``--fla-source`` trees), each checked with what needs no install: a release version, named once, run by
        some point, its wheel in ``wheel_dir`` when one is given (UserError naming the option)."""
        versions = list(asked) or ([] if sources else list(self.releases))
        if not versions and not sources:
            raise UserError(f"{self.source}: names no releases; pass --release VERSION or --fla-source PATH")
        for v in versions:
            if not RELEASE_VERSION_RE.match(v):
                raise UserError(f"--release: {v!r} is not a release version (e.g. --release 0.6.0)")
            if not self.points_for("release", v):
                raise UserError(f"{self.source}: no point runs for fla-core-{v} (every point names other releases)")
        if len(set(versions)) != len(versions):
            raise UserError(f"--release: a release is named twice ({', '.join(versions)})")
        if wheel_dir:
            for v in versions:
                find_wheel(v, wheel_dir)  # the wheel is there (UserError naming it otherwise)
        return versions

    def routing_files(self, paths: list[str], require_equal: bool = False) -> dict[str, tuple[dict, dict]]:
        """``--routing-file`` s (``[B,T,H,S]`` routings of your own), each timed as ``file:<stem>`` at the point of
        its T with the base config's B, H (a point with its own shape takes none): ``{point key: (routings,
        reports)}`` of :func:`nsa_exp.routing.files.file_routings`. UserError for a broken file or one whose T is no
        such point's."""
        found = file_points(paths, self.base.raw["shape"]) if paths else []
        by_T = {p.T: p for p in self.points if not p.shaped}  # a routing file has the base config's B, H
        for f in found:
            if f.T not in by_T:
                raise UserError(f"--routing-file {f.path}: T={f.T}, but the config's points with the base config's "
                                f"B, H (a point with its own shape takes no routing file) are at T = "
                                f"{', '.join(str(T) for T in by_T) or 'none'}")
        return {by_T[T].key: file_routings([f.path for f in found if f.T == T], by_T[T].config.shape, require_equal)
                for T in dict.fromkeys(f.T for f in found)}


def check_release_names(raw: dict[str, Any]) -> None:
    """Every release a release config names is a release version (:data:`RELEASE_VERSION_RE`, ``--release``'s rule:
    the schema's pattern let ``0.6.O`` through), and each point's ``releases`` are among the config's own ``releases``
    where it lists them (a point naming another version never ran, and nothing said so: an attacker, 2026-12-07).
    One :class:`UserError` line naming the field.

    >>> check_release_names({"releases": ["0.6.0"], "points": [{"releases": ["0.6.0"]}, {"T": 1024}]})
    >>> check_release_names({"releases": ["0.6.0"], "points": [{"releases": ["0.6.O"]}]})
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: release.points[0].releases: '0.6.O' is not a release version (e.g. 0.6.0)
    """
    listed = raw.get("releases")
    named = [("release.releases", listed or [], None)]  # (field, its versions, the versions they must be among)
    named += [(f"release.points[{i}].releases", p.get("releases", []), listed) for i, p in enumerate(raw["points"])]
    for field, versions, among in named:
        for v in versions:
            if not RELEASE_VERSION_RE.match(v):
                raise UserError(f"{field}: {v!r} is not a release version (e.g. 0.6.0)")
            if among is not None and v not in among:
                raise UserError(f"{field}: {v} is not among the config's releases ({', '.join(among)}); name only "
                                "those, or add it to releases")


def load_release_config(path: str | Path) -> ReleaseConfig:
    """Read, validate (schema, then each point as an experiment config) and build a :class:`ReleaseConfig`;
    every problem is one :class:`UserError` line naming the field."""
    path = Path(path)
    raw = read_config_file(path, "release config", "e.g. --config configs/release_h200.json")
    validate_or_raise(raw, "release_config", label="release")
    check_release_names(raw)
    base = load_config(REPO_ROOT / raw["base_config"])
    if base.cu_seqlens is not None:
        raise UserError(f"release.base_config: {raw['base_config']} packs documents; the release arm times the "
                        "dense path only (give a config without packing)")
    timing = {**base.raw["timing"], **raw.get("timing", {})}
    points: list[ReleasePoint] = []
    seen: dict[tuple[int, ...], int] = {}
    for i, point in enumerate(raw["points"]):
        shape = {**base.raw["shape"], **point.get("shape", {}), "T": point["T"]}
        shaped = any(shape[k] != base.raw["shape"][k] for k in ("B", "H", "HQ"))
        key = (point["T"], shape["B"], shape["H"], shape["HQ"])
        if key in seen:
            raise UserError(f"release.points[{i}].{'shape' if 'shape' in point else 'T'}: T={point['T']} with B, H, HQ "
                            f"= {', '.join(map(str, key[1:]))} is also points[{seen[key]}]; list each point once")
        seen[key] = i
        label = release_point_names(*key, shaped)[0]
        cfg = {**base.raw, "name": f"{raw['name']}-{label}", "description": f"release arm {raw['name']}, "
               f"{label} (base {raw['base_config']})",
               "shape": shape,
               "patterns": point["patterns"], "timing": timing}
        cfg.pop("formal", None)
        try:
            config = config_from_dict(cfg, source=recorded_path(path))
        except UserError as exc:
            raise UserError(f"release.points[{i}] ({label}): {exc}") from None
        if TUNE_PATTERN not in [p.name for p in config.patterns]:
            raise UserError(f"release.points[{i}].patterns: must include {TUNE_PATTERN} (FLA's autotuners are tuned "
                            "on it once, before timing, as bench does)")
        points.append(ReleasePoint(point["T"], config, tuple(point["releases"]) if "releases" in point else None,
                                   shaped))
    return ReleaseConfig(raw["name"], str(path), raw, base, tuple(points), tuple(raw.get("releases", ())),
                         raw.get("cupti_rounds", DEFAULT_CUPTI_ROUNDS))
