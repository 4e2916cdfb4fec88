# The llmscaler controller image (`llmscaler run`; deploy/ runs it). Two stages: the builder
# turns the project into a wheel and installs it with its dependencies into a virtualenv; the
# runtime stage is a slim Python with only that virtualenv, run as a numeric non-root user, and
# works on a read-only root filesystem (the Deployment mounts /tmp; HOME points there). The wheel
# is installed without the `sim` extra: the simulator's numpy, matplotlib and rich and the
# emulator's aiohttp stay out.
# Build: docker build -t ghcr.io/llmscaler/llmscaler:0.1.0 .
# The base image is pinned by digest (the multi-platform index of that tag), so a rebuild gets the
# same bytes; move tag and digest together when updating it.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /build
# LICENSE goes into the wheel (and so into the image) with the metadata that declares it.
COPY pyproject.toml README.md LICENSE ./
COPY src/ src/
# The bytecode is compiled here, at install time, since the runtime filesystem is read-only.
RUN python -m venv /opt/llmscaler \
    && /opt/llmscaler/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /build/dist . \
    && /opt/llmscaler/bin/pip install --no-cache-dir --compile /build/dist/llmscaler-*.whl

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="llmscaler" \
      org.opencontainers.image.description="Cost-aware autoscaler for vLLM inference servers on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/llmscaler/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=builder /opt/llmscaler /opt/llmscaler
# 65532 is the conventional "nonroot" id of distroless images; it has no entry in /etc/passwd
# and needs none. Numeric, so that the kubelet can check runAsNonRoot.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["llmscaler", "run"]
