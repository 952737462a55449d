# One Purgatory broker per container. Configure with PURGATORY_<NAME> environment variables
# (docs/configs.md), e.g. PURGATORY_BROKER_ID=1, PURGATORY_CLUSTER_MEMBERS=0@h:9092,...
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what a broker needs: no extras (the command-line tools' `cli`, `plots`, `spark`)
# and no experiments package. Build with `--build-arg EXTRAS=cli` to add the tools.
ARG EXTRAS=""
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY broker/ broker/
COPY clients/ clients/
# purgatory/broker, clients and protocol are links to the folders above; the wheel
# installs them as purgatory.broker, ... (purgatory/experiments dangles and is left out).
COPY purgatory/ purgatory/
RUN pip install ".${EXTRAS:+[$EXTRAS]}" \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin purgatory \
    && mkdir -p /var/lib/purgatory/metadata && chown -R purgatory /var/lib/purgatory

# The metadata log (the quorum's votes and entries) outlives the process: a container that
# restarts (compose's restart policy) remembers the quorum, as Raft needs. Partition logs
# stay in memory: a restarted broker is a new incarnation that catches up as a follower.
ENV PURGATORY_METADATA_LOG_DIR=/var/lib/purgatory/metadata
VOLUME /var/lib/purgatory

USER purgatory

# A single broker reachable through `docker run -p 9092:9092 -p 9644:9644`:
# bind every interface, tell clients to come back through the published port. Its admin
# API then needs a bearer token for changes: `-e PURGATORY_ADMIN_TOKEN=...` chooses it
# (export the same for `purgatory admin`); without one, the broker prints one it made.
ENV PURGATORY_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    PURGATORY_ADVERTISED_LISTENERS=127.0.0.1:9092 \
    PURGATORY_ADMIN_LISTENER=0.0.0.0:9644
EXPOSE 9092 9644

# Healthy once the broker serves and holds the controller's metadata (/healthz answers 200).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=6 \
    CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('PURGATORY_ADMIN_LISTENER', '127.0.0.1:9644').rsplit(':', 1)[1]; urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2)"]

ENTRYPOINT ["purgatory", "broker"]
