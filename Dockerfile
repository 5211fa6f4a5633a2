# NSA-KernelExp: the H100 experiment in a pinned CUDA 13 image, FLA at commit 0a9b9f2.
# Build:  docker build -t nsa-kernelexp .        Run: docker compose run --rm bench
# The base digest is the one GUIDE.md records; it could not be pulled or verified offline here.
FROM nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92

ARG DEBIAN_FRONTEND=noninteractive
# Ubuntu's archive keeps only the current patch release of each package, so apt versions are not pinned;
# the Python toolchain (what the results depend on) is pinned in requirements-h100.txt.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The environment every GPU task checks (nsa_exp/environment.py); scripts/run_h100.sh sets the same.
ENV TRITON_F32_DEFAULT=ieee \
    FLA_CACHE_RESULTS=0 \
    FLA_DISABLE_BACKEND_DISPATCH=1 \
    TRITON_CACHE_DIR=/cache/triton \
    NSA_EXP_VENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1

RUN useradd --create-home --uid 1000 nsa \
    && mkdir -p /cache/triton /opt/nsa-exp/results /opt/nsa-exp/profiles \
    && chown -R nsa:nsa /cache /opt/nsa-exp
WORKDIR /opt/nsa-exp

# Same install script as CI and the native H100 path: the submodule if populated, else fla-core==0.5.2.
COPY --chown=nsa:nsa . .
RUN bash scripts/install.sh h100 \
    && chown -R nsa:nsa /opt/venv /opt/nsa-exp

USER 1000:1000
ENTRYPOINT ["invoke"]
CMD ["--list"]
