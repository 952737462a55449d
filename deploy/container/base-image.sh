#!/bin/sh
# Build, without any image registry, a local equivalent of the Dockerfile's base image
# (python:3.11-slim-bookworm): Debian bookworm by debootstrap, its Python 3.11 with pip,
# and `python` / `pip` on PATH as in the official image. Needs root, debootstrap and podman.
#
#   deploy/container/base-image.sh [IMAGE]        (default localhost/purgatory-base:bookworm)
#   podman build --from localhost/purgatory-base:bookworm ...   (see deploy/container/build.sh)
#
# DEBIAN_MIRROR picks the mirror (default http://deb.debian.org/debian). An image already
# there is kept: remove it (podman rmi IMAGE) to build it again.
set -eu
image=${1:-localhost/purgatory-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if podman image exists "$image"; then
    echo "base image $image: already built"
    exit 0
fi
root=$(mktemp -d "${TMPDIR:-/tmp}/purgatory-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "base image $image: debootstrap bookworm from $mirror (about a minute)"
debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
    bookworm "$root" "$mirror" > "$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    echo "debootstrap failed (whole log: $root.log)" >&2
    exit 1
}
rm -f "$root.log"
# As the official image: `python` and `pip`, and pip installs into the system's Python
# (the image is the environment; Debian's PEP 668 marker is for hosts).
ln -s /usr/bin/python3 "$root/usr/local/bin/python"
ln -s /usr/bin/pip3 "$root/usr/local/bin/pip"
rm -f "$root/usr/lib/python3.11/EXTERNALLY-MANAGED"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
tar -C "$root" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$image" > /dev/null
echo "base image $image: built"
