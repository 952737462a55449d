# One Purgatory broker per container. Configure with PURGATORY_<NAME> environment variables
# (docs/configs.md), e.g. PURGATORY_BROKER_ID=1, PURGATORY_CLUSTER_MEMBERS=0@h:9092,...
#
# Without a registry, deploy/container/build.sh builds the same image from a local base
# (Debian bookworm by debootstrap, its Python 3.11): `podman build --from` that base.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A broker and the command-line tools (`podman exec C purgatory topics list`); no figures,
# Spark or experiments. `--build-arg EXTRAS=` leaves out the tools' tables (rich).
ARG EXTRAS="cli"
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY broker/ broker/
COPY clients/ clients/
# purgatory/broker, clients and protocol are links to the folders above; the wheel
# installs them as purgatory.broker, ... (purgatory/experiments dangles and is left out).
COPY purgatory/ purgatory/
COPY deploy/container/entrypoint.sh /usr/local/bin/purgatory-entrypoint
# A build machine that reaches PyPI only through its own pip configuration or certificate
# bundle lends them as build secrets (deploy/container/build.sh): used by this pip, kept in
# no layer. Without them, pip's defaults.
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=ca.crt \
    if [ -f /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi; \
    if [ -f /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi; \
    pip install ".${EXTRAS:+[$EXTRAS]}" \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin purgatory \
    && mkdir -p /var/lib/purgatory/metadata && chown -R purgatory /var/lib/purgatory

# The metadata log (the quorum's votes and entries) outlives the process: a container that
# restarts (compose's restart policy) remembers the quorum, as Raft needs. Partition logs
# stay in memory: a restarted broker is a new incarnation that catches up as a follower.
ENV PURGATORY_METADATA_LOG_DIR=/var/lib/purgatory/metadata
VOLUME /var/lib/purgatory

USER purgatory

# A single broker reachable through `docker run -p 9092:9092 -p 9644:9644`: its listeners
# are the entrypoint's (deploy/container/entrypoint.sh: PLAINTEXT for clients, BROKER for
# the tools inside) unless PURGATORY_LISTENERS and its kin are set. The admin API needs a
# bearer token for changes: `-e PURGATORY_ADMIN_TOKEN=...` chooses it (export the same for
# `purgatory admin`); without one, the broker prints one it made.
# `podman exec C purgatory ...` starts from BROKER (the entrypoint's listeners; with your
# own, set PURGATORY_BOOTSTRAP to one the tools inside can use).
ENV PURGATORY_ADMIN_LISTENER=0.0.0.0:9644 \
    PURGATORY_BOOTSTRAP=127.0.0.1:9093
EXPOSE 9092 9644

# Healthy once the broker serves and holds the controller's metadata (/healthz answers 200),
# on the admin port the broker resolved from its own flags and environment.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=6 \
    CMD ["python", "-m", "purgatory.broker.ops.container_health"]

ENTRYPOINT ["purgatory-entrypoint"]
