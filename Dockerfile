# NSA-KernelExp: the experiment in a pinned CUDA 13 image, FLA at commit 0a9b9f2 (docs/CONTAINER.md).
#   docker compose build                  both images: nsa-kernelexp:latest (GPU) and nsa-kernelexp:cpu
#   docker compose run --rm bench         GPU services: check smoke bench ncu reproduce
#   docker compose run --rm test          CPU services: test validate (no GPU reserved)
# Build arguments (all optional):
#   BASE_IMAGE   the base; default the pinned CUDA image below. scripts/container.sh builds on a stand-in
#                made from Debian's packages (no registry is reachable on the machines CI runs on).
#   TOOLCHAIN    h100 (default: requirements-h100.txt, torch's CUDA build) or cpu (requirements-ci.txt:
#                the test toolchain with the linters; torch must come as its CPU build, below).
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS   where pip finds packages, e.g. for TOOLCHAIN=cpu
#                PIP_INDEX_URL=https://download.pytorch.org/whl/cpu with PyPI as the extra index.
#   NSA_EXP_GIT_SHA, NSA_EXP_GIT_DIRTY   the commit the tree is (results record it; the image has no .git).
# Build secret (optional): ca_bundle, a PEM bundle pip verifies TLS with (a network that intercepts TLS):
#   docker build --secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt .      (compose: docker-compose.ca.yml)
# The base digest is the one the development environment's notes record (not part of this repository); no registry
# was reachable to pull or verify it.
ARG BASE_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
# Ubuntu's archive keeps only the current patch release of each package, so apt versions are not pinned;
# the Python toolchain (what the results depend on) is pinned in the requirements files.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev git make ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The environment every GPU task checks (nsa_exp/environment.py); scripts/run_h100.sh sets the same.
ENV TRITON_F32_DEFAULT=ieee \
    FLA_CACHE_RESULTS=0 \
    FLA_DISABLE_BACKEND_DISPATCH=1 \
    TRITON_CACHE_DIR=/cache/triton \
    NSA_EXP_VENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1


# The one install script (CI and the native path use it too): first the pinned toolchain alone (a layer
# that survives source edits, the entry point's included: it comes after), then FLA (the submodule if
# populated, else fla-core==0.5.2) and the project.
WORKDIR /opt/nsa-exp
ARG TOOLCHAIN=h100
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_CACHE_DIR=1
COPY requirements-h100.txt requirements-ci.txt ./
COPY scripts/install.sh scripts/
RUN --mount=type=secret,id=ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
    && bash scripts/install.sh "$TOOLCHAIN" --requirements-only \
    && if [ "$TOOLCHAIN" = cpu ]; then python -c 'import sys, torch; sys.exit(torch.version.cuda and "TOOLCHAIN=cpu needs the CPU build of torch, got " + torch.__version__ + ": docs/CONTAINER.md")'; fi

# ubuntu:24.04, hence the CUDA base, ships the user `ubuntu` with uid and gid 1000: whatever holds uid or
# gid 1000 is removed, then the image's user nsa takes them. At run time the entry point gives nsa the
# uid/gid of the bind-mounted results/ folder (or runs/), so files land on the host as their owner's.
COPY scripts/container_entrypoint.sh /usr/local/bin/nsa-exp-entrypoint
RUN if entry="$(getent passwd 1000)"; then userdel --remove "${entry%%:*}"; fi \
    && if entry="$(getent group 1000)"; then groupdel "${entry%%:*}"; fi \
    && groupadd --gid 1000 nsa \
    && useradd --create-home --uid 1000 --gid 1000 --shell /bin/bash nsa \
    && mkdir -p /cache/triton /opt/nsa-exp/results /opt/nsa-exp/runs /opt/nsa-exp/profiles /opt/nsa-exp/.nsa-exp \
    && chown -R nsa:nsa /cache /opt/nsa-exp \
    && chmod 755 /usr/local/bin/nsa-exp-entrypoint
COPY --chown=nsa:nsa . .
RUN --mount=type=secret,id=ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
    && bash scripts/install.sh "$TOOLCHAIN"

ARG NSA_EXP_GIT_SHA=""
ARG NSA_EXP_GIT_DIRTY=""
ENV NSA_EXP_GIT_SHA=${NSA_EXP_GIT_SHA} \
    NSA_EXP_GIT_DIRTY=${NSA_EXP_GIT_DIRTY} \
    NSA_EXP_TOOLCHAIN=${TOOLCHAIN} \
    NSA_EXP_RUN_AS_OWNER_OF=/opt/nsa-exp/results:/opt/nsa-exp/runs:/opt/nsa-exp/profiles
# Starts as root only to take the output folders' owner, then runs the command as that user (setpriv).
ENTRYPOINT ["nsa-exp-entrypoint", "invoke"]
CMD ["--list"]
