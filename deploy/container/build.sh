#!/usr/bin/env bash
# Build the image with podman where no image registry is reachable: first the local base
# (base-image.sh: what python:3.11-slim-bookworm is, from Debian's packages), then the
# Dockerfile `--from` it.
#
#   deploy/container/build.sh [TAG]        (default localhost/purgatory:latest)
#
# pip inside the build uses this machine's pip configuration and certificate bundle, lent
# as build secrets: nothing of them is in the image. `--format docker` keeps the
# HEALTHCHECK (OCI images have none). With a registry at hand,
# `docker build -t purgatory .` (or `podman build`) needs none of this.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-localhost/purgatory:latest}
base=localhost/purgatory-base:bookworm
deploy/container/base-image.sh "$base"

secrets=()
for conf in "${PIP_CONFIG_FILE:-}" "${XDG_CONFIG_HOME:-$HOME/.config}/pip/pip.conf" \
    /etc/pip.conf /etc/xdg/pip/pip.conf; do
    if [[ -n $conf && -f $conf ]]; then
        secrets+=(--secret "id=pip.conf,src=$conf")
        break
    fi
done
for bundle in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [[ -n $bundle && -f $bundle ]]; then
        secrets+=(--secret "id=ca.crt,src=$bundle")
        break
    fi
done
# A container may not raise a limit above this shell's (a nested or rootless engine).
nofile=$(ulimit -n)
nproc=$(ulimit -u)
[[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
podman build --format docker --network host --from "$base" --ulimit "nofile=$nofile:$nofile" \
    --ulimit "nproc=$nproc:$nproc" "${secrets[@]}" -t "$tag" .
