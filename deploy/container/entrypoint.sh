#!/bin/sh
# The image's entrypoint: `purgatory broker` with the container's arguments.
#
# PURGATORY_WAIT_FOR_CONFIG=FILE holds the broker back until FILE exists, then starts it
# with FILE's `name=value` lines as --set configs (which win over the image's environment;
# `#` comments and blank lines are skipped). A harness that publishes the port on a random
# host port (`-p 9092`, `-p 0:9092`) learns that port only once the container runs, and
# then tells the broker the address clients must use, as testcontainers' Kafka module does:
#   podman exec C sh -c 'echo advertised.listeners=PLAINTEXT://localhost:HOSTPORT \
#       > /tmp/purgatory.part && mv /tmp/purgatory.part /tmp/purgatory.properties'
#
# Listeners: unless one of the listener variables is set (then they are all the user's, as
# in Apache Kafka's image), a single broker listens for clients on PLAINTEXT, every
# interface, advertised as PURGATORY_ADVERTISED_ADDRESS (default 127.0.0.1:9092, for
# `-p 9092:9092`; `-p 19092:9092 -e PURGATORY_ADVERTISED_ADDRESS=localhost:19092`; a port
# chosen by the engine: as above), and on BROKER on the container's loopback, which the
# tools inside use (`podman exec C purgatory topics list`): Kafka's EXTERNAL and INTERNAL.
set -eu
if [ -z "${PURGATORY_LISTENERS:-}${PURGATORY_ADVERTISED_LISTENERS:-}${PURGATORY_LISTENER_SECURITY_PROTOCOL_MAP:-}${PURGATORY_INTER_BROKER_LISTENER_NAME:-}${PURGATORY_CONTROLLER_LISTENER_NAMES:-}" ]; then
    export PURGATORY_LISTENERS=PLAINTEXT://0.0.0.0:9092,BROKER://127.0.0.1:9093
    export PURGATORY_ADVERTISED_LISTENERS=PLAINTEXT://${PURGATORY_ADVERTISED_ADDRESS:-127.0.0.1:9092},BROKER://127.0.0.1:9093
    export PURGATORY_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT
    export PURGATORY_INTER_BROKER_LISTENER_NAME=BROKER
fi
if [ -n "${PURGATORY_WAIT_FOR_CONFIG:-}" ]; then
    trap 'exit 0' TERM INT
    while [ ! -e "$PURGATORY_WAIT_FOR_CONFIG" ]; do
        sleep 0.1
    done
    trap - TERM INT
    # The file's settings go before the container's arguments (which may add --set too).
    count=$#
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in
            '' | '#'*) ;;
            *) set -- "$@" --set "$line" ;;
        esac
    done < "$PURGATORY_WAIT_FOR_CONFIG"
    # Rotate the container's own arguments to the end.
    while [ "$count" -gt 0 ]; do
        first=$1
        shift
        set -- "$@" "$first"
        count=$((count - 1))
    done
fi
exec purgatory broker "$@"
