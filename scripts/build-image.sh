#!/usr/bin/env bash
# Builds the node image (default tag txnchaos-node:dev) from the Dockerfile at the repo root.
#
#   scripts/build-image.sh            build when missing or stale (fast no-op otherwise)
#   scripts/build-image.sh --force    rebuild even when up to date
#
# Needs a Docker engine: DOCKER_HOST, or var/docker/env from `scripts/bootstrap.sh --docker`.
#
# Base image: BASE_IMAGE if set (pulled when missing). Otherwise python:3.11-slim-bookworm when
# present or pullable, else a local txnchaos-base:bookworm built once with debootstrap from the
# Debian mirror apt uses (machines without an image registry).
#
# Python packages are never installed from the network inside the build: the host builds
# wheels of the project (from a clean copy of its sources) and of the node's runtime
# dependencies into var/image/context/wheels, and the Dockerfile installs them offline.
# The image carries a label with a hash of all inputs; it is rebuilt only when that changes.
#
# Environment: TAG, BASE_IMAGE, TXNCHAOS_DEBIAN_MIRROR (debootstrap mirror override),
# TXNCHAOS_NODE_DEPS (space-separated distribution names; default below).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG="${TAG:-txnchaos-node:dev}"
DEFAULT_BASE="python:3.11-slim-bookworm"
LOCAL_BASE="txnchaos-base:bookworm"
# Node runtime dependencies (version specifiers are taken from pyproject.toml).
NODE_DEPS="${TXNCHAOS_NODE_DEPS:-kio crc32c cramjam google-re2 click rich pydantic pyyaml prometheus-client}"
LABEL_KEY="org.txnchaos.source-hash"
WORK="$ROOT/var/image"
FORCE=0

for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h | --help)
            sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "build-image: unknown argument: $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

log() { printf '[build-image] %s\n' "$*"; }
die() {
    printf '[build-image] ERROR: %s\n' "$*" >&2
    exit 1
}

if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY="python3"; fi

# ---------------------------------------------------------------- engine
if [ -z "${DOCKER_HOST:-}" ] && [ -f "$ROOT/var/docker/env" ]; then
    # shellcheck disable=SC1091
    . "$ROOT/var/docker/env"
fi
command -v docker >/dev/null 2>&1 || die "docker client not found (run scripts/bootstrap.sh --docker)"
docker info >/dev/null 2>&1 ||
    die "no Docker engine answers at ${DOCKER_HOST:-the default socket} (run scripts/bootstrap.sh --docker)"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- base image
debian_mirror() {
    if [ -n "${TXNCHAOS_DEBIAN_MIRROR:-}" ]; then
        printf '%s\n' "$TXNCHAOS_DEBIAN_MIRROR"
        return
    fi
    # The first enabled `deb` source that serves the plain bookworm suite, from one-line
    # (sources.list, *.list) or deb822 (*.sources) files.
    "$PY" - <<'EOF'
import glob, re

def one_line(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(line) >= 3 and line[0] == "deb":
            yield line[1], [line[2]]

def deb822(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    for para in re.split(r"\n\s*\n", text):
        fields = {}
        key = None
        for raw in para.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0].isspace() and key:
                fields[key] += " " + raw.strip()
                continue
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            yield uri, fields.get("suites", "").split()

sources = []
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        sources += list(one_line(path))
    except OSError:
        pass
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    sources += list(deb822(path))
for uri, suites in sources:
    if "bookworm" in suites:
        print(uri)
        break
else:
    print("http://deb.debian.org/debian")
EOF
}

# The local base is rebuilt when its recipe (the function below) changes.
base_recipe() { declare -f build_local_base | sha256sum | cut -c1-16; }

build_local_base() {
    command -v debootstrap >/dev/null 2>&1 ||
        die "debootstrap not found (run scripts/bootstrap.sh --docker, or apt-get install debootstrap)"
    [ "$(id -u)" -eq 0 ] || die "building $LOCAL_BASE with debootstrap needs root"
    local mirror rootfs dlog t0
    mirror="$(debian_mirror)"
    rootfs="$WORK/rootfs"
    dlog="$ROOT/var/log/debootstrap.log"
    mkdir -p "$(dirname "$dlog")"
    rm -rf "$rootfs"
    mkdir -p "$rootfs"
    t0=$SECONDS
    log "base: debootstrap --variant=minbase bookworm from $mirror (a few minutes; log: var/log/debootstrap.log)"
    if ! debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror" \
        >"$dlog" 2>&1; then
        tail -n 25 "$dlog" >&2
        rm -rf "$rootfs"
        die "debootstrap failed (full log: $dlog)"
    fi
    # Nothing in the image needs apt's caches, docs or message catalogues (C.UTF-8 is built into
    # glibc); sources.list stays so apt works where it can.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/* "$rootfs"/usr/share/doc/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    log "base: docker import -> $LOCAL_BASE"
    tar --numeric-owner -C "$rootfs" -c . |
        docker import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV LANG=C.UTF-8' \
            --change 'CMD ["/bin/bash"]' \
            --change "LABEL org.txnchaos.base-recipe=$(base_recipe)" \
            --message "debootstrap --variant=minbase --include=python3,python3-venv bookworm" \
            - "$LOCAL_BASE" >/dev/null || die "docker import failed"
    rm -rf "$rootfs"
    log "base: $LOCAL_BASE built in $((SECONDS - t0))s"
}

if [ -n "${BASE_IMAGE:-}" ]; then
    if ! image_exists "$BASE_IMAGE"; then
        log "base: pulling $BASE_IMAGE"
        docker pull "$BASE_IMAGE" >/dev/null || die "cannot pull BASE_IMAGE=$BASE_IMAGE"
    fi
elif image_exists "$DEFAULT_BASE"; then
    BASE_IMAGE="$DEFAULT_BASE"
elif image_exists "$LOCAL_BASE" &&
    [ "$(docker image inspect --format '{{ index .Config.Labels "org.txnchaos.base-recipe" }}' \
        "$LOCAL_BASE" 2>/dev/null)" = "$(base_recipe)" ]; then
    BASE_IMAGE="$LOCAL_BASE"
else
    log "base: trying docker pull $DEFAULT_BASE"
    if timeout 300 docker pull "$DEFAULT_BASE" >/dev/null 2>&1; then
        BASE_IMAGE="$DEFAULT_BASE"
    else
        log "base: no image registry reachable, building a local base instead"
        build_local_base
        BASE_IMAGE="$LOCAL_BASE"
    fi
fi
BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"
log "base: $BASE_IMAGE (${BASE_ID:7:12})"

# ---------------------------------------------------------------- inputs and their hash
# Everything that goes into the wheel: packaging files and the layers (setup.py's LAYERS).
mapfile -t LAYERS < <("$PY" "$ROOT/scripts/layers.py")
source_files() {
    cd "$ROOT"
    {
        if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git ls-files -co --exclude-standard -- pyproject.toml setup.py setup.cfg README.md \
                LICENSE "${LAYERS[@]}"
        else
            for f in pyproject.toml setup.py setup.cfg README.md LICENSE; do
                if [ -f "$f" ]; then echo "$f"; fi
            done
            find "${LAYERS[@]}" -type f 2>/dev/null
        fi
    } | grep -v -E '(^|/)__pycache__/|\.py[co]$' | LC_ALL=C sort -u |
        while IFS= read -r f; do if [ -f "$f" ]; then echo "$f"; fi; done
}
mapfile -t FILES < <(source_files)
[ "${#FILES[@]}" -gt 0 ] || die "no source files found under $ROOT"

node_requirements() {
    # shellcheck disable=SC2086 # NODE_DEPS is a space-separated list, split on purpose
    "$PY" - "$ROOT/pyproject.toml" $NODE_DEPS <<'EOF'
import re, sys, tomllib

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

with open(sys.argv[1], "rb") as f:
    deps = tomllib.load(f)["project"].get("dependencies", [])
by_name = {norm(re.match(r"[A-Za-z0-9_.-]+", d).group(0)): d for d in deps}
for want in sys.argv[2:]:
    print(by_name.get(norm(want), want))
EOF
}
REQS="$(node_requirements)"

HASH="$(
    {
        echo "base $BASE_ID"
        echo "reqs $REQS"
        sha256sum "$ROOT/Dockerfile" "${BASH_SOURCE[0]}" | cut -d' ' -f1
        (cd "$ROOT" && sha256sum -- "${FILES[@]}")
    } | sha256sum | cut -c1-64
)"

if [ "$FORCE" -eq 0 ] && image_exists "$TAG"; then
    have="$(docker image inspect --format "{{ index .Config.Labels \"$LABEL_KEY\" }}" "$TAG" 2>/dev/null || true)"
    if [ "$have" = "$HASH" ]; then
        log "image: $TAG up to date (${HASH:0:12})"
        exit 0
    fi
    log "image: $TAG is stale (${have:0:12} != ${HASH:0:12}), rebuilding"
fi

# ---------------------------------------------------------------- build context: wheels
T0=$SECONDS
SRC="$WORK/src"
CTX="$WORK/context"
rm -rf "$SRC" "$CTX"
mkdir -p "$SRC" "$CTX/wheels"
(cd "$ROOT" && cp --parents -- "${FILES[@]}" "$SRC/")
for layer in "${LAYERS[@]}"; do mkdir -p "$SRC/$layer"; done # setup.py maps them all, even empty
printf '%s\n' "$REQS" >"$CTX/node-requirements.txt"

WLOG="$ROOT/var/log/pip-wheel.log"
mkdir -p "$(dirname "$WLOG")"
log "wheels: project + node deps ($(echo "$REQS" | tr '\n' ' ')) (log: var/log/pip-wheel.log)"
if ! {
    "$PY" -m pip wheel --disable-pip-version-check --no-deps --wheel-dir "$CTX/wheels" "$SRC" &&
        "$PY" -m pip wheel --disable-pip-version-check --wheel-dir "$CTX/wheels" \
            -r "$CTX/node-requirements.txt"
} >"$WLOG" 2>&1; then
    tail -n 25 "$WLOG" >&2
    die "pip wheel failed (full log: $WLOG)"
fi
rm -rf "$SRC"

# Compiled wheels must run on the base's glibc (bookworm: 2.36) and be for CPython 3.11.
"$PY" - "$CTX/wheels" <<'EOF' || die "a wheel does not fit the image (see above)"
import os, re, sys

GLIBC = (2, 36)
bad = []
for name in sorted(os.listdir(sys.argv[1])):
    if not name.endswith(".whl"):
        continue
    tags = name[:-4].split("-")[-3:]
    python, abi, plats = tags
    for plat in plats.split("."):
        m = re.match(r"manylinux_(\d+)_(\d+)_", plat)
        if m and (int(m[1]), int(m[2])) > GLIBC:
            bad.append(f"{name}: needs glibc {m[1]}.{m[2]} > 2.36")
        if plat.startswith("musllinux") or plat.startswith(("macosx", "win")):
            bad.append(f"{name}: platform {plat}")
    fits = (
        python in ("py3", "py2.py3", "cp311")
        or (abi == "abi3" and re.fullmatch(r"cp3\d+", python) and int(python[3:]) <= 11)
    )
    if not fits:
        bad.append(f"{name}: python tag {python}/{abi}")
for line in bad:
    print(f"[build-image] ERROR: {line}", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# ---------------------------------------------------------------- docker build
BLOG="$ROOT/var/log/docker-build.log"
log "image: docker build -t $TAG (base $BASE_IMAGE, log: var/log/docker-build.log)"
if ! docker build --network none --pull=false \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "SOURCE_HASH=$HASH" \
    -f "$ROOT/Dockerfile" -t "$TAG" "$CTX" >"$BLOG" 2>&1; then
    tail -n 30 "$BLOG" >&2
    die "docker build failed (full log: $BLOG)"
fi
SIZE="$(docker image inspect --format '{{.Size}}' "$TAG")"
log "image: $TAG built in $((SECONDS - T0))s ($((SIZE / 1024 / 1024)) MiB, ${HASH:0:12})"
# Untagged leftovers of earlier builds.
docker image prune -f --filter "label=$LABEL_KEY" >/dev/null 2>&1 || true
docker image prune -f --filter "label=org.txnchaos.base-recipe" >/dev/null 2>&1 || true
