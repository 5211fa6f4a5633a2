"""Dockerfile, compose, requirements, the install script, the container script and the pins agree; both
container files pass their linters.

These are static checks. The image itself is built and run by ``bash scripts/container.sh check``
(CI runs it after the tests, on a stand-in base: docs/CONTAINER.md).
"""

from __future__ import annotations

import fnmatch
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsa_exp.core.environment import REQUIRED_ENV, REQUIRED_TRITON
from nsa_exp.gpu.fla_source import PINNED_COMMIT
from tests.helpers import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
GPU_SERVICES = ("check", "smoke", "bench", "ncu", "reproduce")
CPU_SERVICES = ("test", "validate")
CONTAINER_SH = (REPO / "scripts" / "container.sh").read_text()
ENTRYPOINT_SH = (REPO / "scripts" / "container_entrypoint.sh").read_text()
NO_GIT = "no .git in this tree: the image's copy of the repository leaves it out (.dockerignore); CI's clone has it"


@functools.cache
def _yaml(name: str) -> dict:
    """A compose file as compose reads it (merge keys such as ``<<: *gpu`` resolved)."""
    try:
        from ruamel.yaml import YAML  # noqa: PLC0415 - requirements-ci.txt has it; the GPU toolchain not
    except ImportError:
        pytest.fail("ruamel.yaml is not installed; `bash scripts/install.sh cpu` installs it (requirements-ci.txt)")
    return YAML(typ="safe").load((REPO / name).read_text())


def _services() -> dict:
    return _yaml("docker-compose.yml")["services"]


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


def _dockerfile_args() -> dict[str, str | None]:
    return {m.group(1): m.group(3) for m in re.finditer(r"^ARG ([A-Z0-9_]+)(=(\S*))?$", DOCKERFILE, re.M)}


def test_base_image_is_pinned_by_digest_and_is_a_build_argument():
    assert re.search(r"^ARG BASE_IMAGE=nvidia/cuda:13\.0\.1-devel-ubuntu24\.04@sha256:[0-9a-f]{64}$", DOCKERFILE, re.M)
    assert re.findall(r"^FROM .*$", DOCKERFILE, re.M) == ["FROM ${BASE_IMAGE}"]
    assert DOCKERFILE.index("ARG BASE_IMAGE=") < DOCKERFILE.index("FROM ${BASE_IMAGE}")


def test_dockerfile_sets_exactly_the_env_the_gates_require():
    env = _dockerfile_env()
    for name, value in REQUIRED_ENV.items():
        assert env[name] == value
    assert env["TRITON_CACHE_DIR"] == "/cache/triton"
    run_h100 = (REPO / "scripts" / "run_h100.sh").read_text()
    for name, value in REQUIRED_ENV.items():
        assert f"export {name}={value}" in run_h100


def test_dockerfile_ci_and_readme_use_the_one_install_script():
    assert _dockerfile_args()["TOOLCHAIN"] == "h100"
    assert 'bash scripts/install.sh "$TOOLCHAIN" --requirements-only' in DOCKERFILE
    assert re.search(r'&& bash scripts/install\.sh "\$TOOLCHAIN"$', DOCKERFILE, re.M)
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "cpu) reqs=requirements-ci.txt" in install and "h100) reqs=requirements-h100.txt" in install
    assert "--requirements-only" in install
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/install.sh cpu" in readme and "bash scripts/install.sh h100" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "ci-test-command" in ci  # .ci/run runs README's command, which runs install.sh cpu


def test_the_uid_1000_user_of_the_base_is_removed_before_nsa_takes_uid_1000():
    # ubuntu:24.04 (so the CUDA base) ships `ubuntu` with uid/gid 1000: a bare `useradd --uid 1000` fails.
    removal = DOCKERFILE.index('if entry="$(getent passwd 1000)"; then userdel --remove')
    group_removal = DOCKERFILE.index('if entry="$(getent group 1000)"; then groupdel')
    add = DOCKERFILE.index("useradd --create-home --uid 1000 --gid 1000")
    assert removal < group_removal < DOCKERFILE.index("groupadd --gid 1000 nsa") < add
    assert "| cut" not in DOCKERFILE  # /bin/sh has no pipefail: a pipe would hide getent's failure
    # The stand-in the container check builds on reproduces that user.
    assert "useradd --uid 1000 --user-group --create-home --shell /bin/bash --comment Ubuntu ubuntu" in CONTAINER_SH


def test_the_entry_point_runs_the_command_as_the_owner_of_results():
    assert 'ENTRYPOINT ["nsa-exp-entrypoint", "invoke"]' in DOCKERFILE
    assert "COPY scripts/container_entrypoint.sh /usr/local/bin/nsa-exp-entrypoint" in DOCKERFILE
    assert "chmod 755 /usr/local/bin/nsa-exp-entrypoint" in DOCKERFILE
    assert not re.search(r"^USER ", DOCKERFILE, re.M)  # starts as root, to take the owner; then drops
    owners = re.search(r"^    NSA_EXP_RUN_AS_OWNER_OF=(\S+)$", DOCKERFILE, re.M).group(1).split(":")
    assert owners == ["/opt/nsa-exp/results", "/opt/nsa-exp/runs", "/opt/nsa-exp/profiles"]
    # every one of them is a host folder of the GPU services, and the image makes it (a service without it)
    binds = {v.split(":")[1] for v in _services()["bench"]["volumes"] if v.startswith("./")}
    assert set(owners) == binds
    mkdir = re.search(r"mkdir -p ([^\\&]+)", DOCKERFILE).group(1).split()
    assert set(owners) <= set(mkdir)
    assert 'exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"' in ENTRYPOINT_SH
    assert 'stat -c %u "$dir"' in ENTRYPOINT_SH and 'stat -c %g "$dir"' in ENTRYPOINT_SH
    assert ENTRYPOINT_SH.count("/opt/nsa-exp/results:/opt/nsa-exp/runs:/opt/nsa-exp/profiles") == 1  # its default
    # The volumes it hands to that user are the compose file's named volumes.
    named = {v.split(":")[1] for s in GPU_SERVICES for v in _services()[s]["volumes"] if not v.startswith(".")}
    assert named == {_dockerfile_env()["TRITON_CACHE_DIR"], "/opt/nsa-exp/.nsa-exp"}
    assert '"${TRITON_CACHE_DIR:-/cache/triton}" /opt/nsa-exp/.nsa-exp' in ENTRYPOINT_SH


def test_the_cpu_toolchain_refuses_a_cuda_torch_and_the_container_script_brings_the_cpu_wheel():
    guard = 'if [ "$TOOLCHAIN" = cpu ]; then python -c \'import sys, torch; sys.exit(torch.version.cuda and'
    assert guard in DOCKERFILE
    args = _dockerfile_args()
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        assert name in args and args[name] is None, name  # unset unless given: pip's defaults otherwise
    assert args["PIP_NO_CACHE_DIR"] == "1"
    torch = _pins("requirements-ci.txt")["torch"]
    assert 'torch="$(awk -F\'==\' \'$1 == "torch" {print $2}\' "$root/requirements-ci.txt")"' in CONTAINER_SH
    assert '"$wheels/torch-$torch+cpu-*.whl"' in CONTAINER_SH and torch == "2.13.0"
    assert '--volume "$wheels:/wheels:ro" --build-arg PIP_FIND_LINKS=/wheels' in CONTAINER_SH


def test_the_ca_bundle_is_a_build_secret_pip_is_pointed_at():
    mounts = re.findall(r"^RUN --mount=type=secret,id=ca_bundle \\\n    (.*)$", DOCKERFILE, re.M)
    assert mounts == ['if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \\'] * 2
    assert DOCKERFILE.count("bash scripts/install.sh") == 2  # both pip steps see the secret
    assert '--secret "id=ca_bundle,src=$ca"' in CONTAINER_SH
    override = _yaml("docker-compose.ca.yml")
    assert override["secrets"]["ca_bundle"]["file"].startswith("${NSA_EXP_CA_BUNDLE:?")
    assert set(override["services"]) == set(_services())
    for name, service in override["services"].items():
        assert service == {"build": {"secrets": ["ca_bundle"]}}, name


def test_every_build_argument_the_compose_file_and_the_script_pass_is_declared():
    args = _dockerfile_args()
    for name, service in _services().items():
        assert set(service["build"]["args"]) <= set(args), name
    for name in re.findall(r'--build-arg "([A-Z_]+)=', CONTAINER_SH) + ["PIP_FIND_LINKS"]:
        assert name in args, name


def test_fla_commit_is_the_same_everywhere():
    assert (REPO / "third_party" / "fla-pin" / "COMMIT.txt").read_text().split()[0] == PINNED_COMMIT
    assert "path = third_party/flash-linear-attention" in (REPO / ".gitmodules").read_text()
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "fla-core==0.5.2" in install and "third_party/flash-linear-attention" in install
    assert PINNED_COMMIT in install


def test_the_submodule_gitlink_is_the_pinned_commit():
    if not (REPO / ".git").exists():
        pytest.skip(NO_GIT)
    gitlink = subprocess.run(["git", "-C", str(REPO), "ls-files", "-s", "third_party/flash-linear-attention"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert gitlink[0] == "160000" and gitlink[1] == PINNED_COMMIT


def test_versions_agree_across_requirements_lock_and_gates():
    h100, ci, lock = _pins("requirements-h100.txt"), _pins("requirements-ci.txt"), _pins("requirements-lock.txt")
    assert h100["triton"] == ci["triton"] == lock["triton"] == REQUIRED_TRITON
    assert h100["torch"] == lock["torch"] == "2.11.0"
    assert lock["fla-core"] == "0.5.2"
    for name in ("einops", "jsonschema", "invoke"):
        assert h100[name] == lock[name], name


def test_compose_gpu_services_reserve_one_gpu_and_mount_runs_and_results_on_the_host():
    services = _services()
    for name in GPU_SERVICES:
        service = services[name]
        assert service["image"] == "nsa-kernelexp:latest" and service["build"]["args"]["TOOLCHAIN"] == "h100", name
        assert service["deploy"]["resources"]["reservations"]["devices"] == [
            {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}], name
        assert service["volumes"] == ["./runs:/opt/nsa-exp/runs", "./results:/opt/nsa-exp/results",
                                      "./profiles:/opt/nsa-exp/profiles",
                                      f"triton-cache:{_dockerfile_env()['TRITON_CACHE_DIR']}",
                                      "bench-journal:/opt/nsa-exp/.nsa-exp"], name
    assert services["ncu"]["cap_add"] == ["SYS_ADMIN"]
    assert [services[s]["command"][0] for s in GPU_SERVICES] == list(GPU_SERVICES)
    assert services["reproduce"]["command"] == ["reproduce"]  # invoke's task of `python -m nsa_exp reproduce`
    assert set(_yaml("docker-compose.yml")["volumes"]) == {"triton-cache", "bench-journal"}


def test_compose_cpu_services_use_the_cpu_image_without_gpu_or_network():
    services = _services()
    for name in CPU_SERVICES:
        service = services[name]
        assert service["image"] == "nsa-kernelexp:cpu" and service["build"]["args"]["TOOLCHAIN"] == "cpu", name
        assert "deploy" not in service and service["network_mode"] == "none", name
    assert services["test"]["command"] == ["test", "--image"]
    # The suite writes into the image's tree, so it runs as that tree's owner: no host folder to take one from.
    assert "volumes" not in services["test"] and "environment" not in services["test"]


def test_the_validate_service_reads_a_third_party_folder_read_only_as_its_owner():
    validate = _services()["validate"]
    assert validate["volumes"] == ["${NSA_EXP_SUBMISSIONS:-./submissions}:/submissions:ro"]
    assert validate["working_dir"] == "/submissions"
    assert validate["environment"] == {"NSA_EXP_RUN_AS_OWNER_OF": "/submissions"}
    # nsa-exp validate takes every path (invoke validate takes one and --more): exit code passed through.
    assert validate["entrypoint"] == ["nsa-exp-entrypoint", "nsa-exp", "validate"]
    assert "command" not in validate
    assert 'nsa-exp = "nsa_exp.cli:main"' in (REPO / "pyproject.toml").read_text()


def _ignored(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat.removeprefix("**/")) or fnmatch.fnmatch(p, pat) for pat in patterns
               for p in prefixes + parts)


def test_dockerignore_leaves_no_tracked_file_out_of_the_image():
    # The image's tests read committed files (results/reports among them): every tracked file is copied.
    if not (REPO / ".git").exists():
        pytest.skip(NO_GIT)
    patterns = [p for p in (REPO / ".dockerignore").read_text().split() if p]
    assert ".git" in patterns and ".venv" in patterns
    assert _ignored(".venv/bin/python", patterns) and _ignored("nsa_exp/__pycache__/x.pyc", patterns)
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    assert [p for p in tracked if _ignored(p, patterns)] == []


def test_ci_runs_the_container_check_after_readme_s_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.index('bash -euo pipefail -c "$cmd"') < ci.index("bash scripts/container.sh check")


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        pytest.fail(f"{name} is not installed; `bash scripts/install.sh cpu` installs it (requirements-ci.txt)")
    return path


def test_hadolint_passes():
    proc = subprocess.run([_tool("hadolint"), "Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.ca.yml"])
def test_compose_file_matches_the_compose_spec(name):
    proc = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", name],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_container_lines_are_the_ones_the_container_check_runs_verbatim():
    # .ci/run's container check runs README's lines between these markers (bash -c, placeholders aside) and
    # asserts their exit codes: a line here is a line a third party can gate on.
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- container-commands:start -->\n```bash\n(.*?)```\n<!-- container-commands:end -->",
                      readme, re.S).group(1).splitlines()
    services = [re.search(r"docker compose run --rm (\S+)", line).group(1) for line in block]
    assert services == ["bench", "reproduce", "validate"]
    assert set(services) <= set(_services())
    for service in services:
        assert f"readme readme-{service}" in CONTAINER_SH, service
    assert "run --name" not in CONTAINER_SH  # every compose run of the check is `run --rm`, as users run it
    assert 'run --rm "$@"' in CONTAINER_SH
    assert "x.json=forged.json" in CONTAINER_SH and "/path/to/their/folder" in block[-1]


def test_runs_is_an_output_folder_left_out_of_the_image():
    patterns = (REPO / ".dockerignore").read_text().split()
    assert "runs" in patterns and _ignored("runs/reproduce_H200/x.json", patterns)
