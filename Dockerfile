# txnchaos node image: runs one cluster node, `txnchaos node ...` is the ENTRYPOINT.
#
# Build it with scripts/build-image.sh (tag txnchaos-node:dev), not with a bare `docker build .`:
# the script prepares the build context (var/image/context) this file expects:
#   wheels/                  the project wheel and its node runtime dependencies, built on the host
#   node-requirements.txt    the node's runtime dependencies (no pyspark, pyarrow, confluent-kafka)
# Everything installs offline (`pip --no-index --find-links /wheels`): pip inside a container
# may have no network (on the project's machines TLS fails there), so nothing is fetched here.
#
# BASE_IMAGE: any Debian bookworm image with Python 3.11 and the venv module:
#   - python:3.11-slim-bookworm (default) on machines that reach an image registry;
#   - txnchaos-base:bookworm, which build-image.sh makes with debootstrap (minbase + python3,
#     python3-venv) and `docker import` on machines without one.
# Both have `python3` on PATH; the app lives in a venv at /opt/txnchaos either way, so the
# two bases give the same layout. Host-built wheels fit because both bases are glibc 2.36,
# Python 3.11 (build-image.sh refuses wheels that need a newer glibc).
#
# The image is labelled org.txnchaos.source-hash (a hash of everything that went in), which
# build-image.sh compares to decide whether to rebuild.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG SOURCE_HASH=unknown
LABEL org.opencontainers.image.title="txnchaos-node" \
      org.opencontainers.image.description="txnchaos cluster node (Kafka-protocol broker / transaction coordinator)" \
      org.txnchaos.source-hash="${SOURCE_HASH}"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_INDEX=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/txnchaos/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

COPY wheels/ /tmp/wheels/
COPY node-requirements.txt /tmp/node-requirements.txt

# The project itself goes in with --no-deps (its full dependency list carries the harness and
# analysis stacks); the node's own runtime dependencies come from node-requirements.txt.
# pip and setuptools leave the venv afterwards (~25 MB): nothing installs at run time.
RUN python3 -m venv /opt/txnchaos \
 && /opt/txnchaos/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels \
        -r /tmp/node-requirements.txt \
 && /opt/txnchaos/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels \
        --no-deps txnchaos \
 && /opt/txnchaos/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && rm -rf /tmp/wheels /tmp/node-requirements.txt \
 && useradd --system --uid 10001 --home-dir /var/lib/txnchaos --create-home txnchaos

USER 10001:10001
WORKDIR /var/lib/txnchaos
ENTRYPOINT ["/opt/txnchaos/bin/txnchaos", "node"]
