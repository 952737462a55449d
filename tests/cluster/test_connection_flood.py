"""A connection flood from 8 processes: each opens connections as fast as it can from an
address of its own (127.0.0.2 to .9), leaves a half-sent request on each, and holds them.
max.connections.per.ip closes what each address has beyond its limit, so the broker
stays healthy and a well-behaved client from 127.0.0.1 is served during the flood."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import confluent_kafka

from purgatory.testing import Cluster

PER_IP = 40
ATTEMPTS = 200  # per flooding process: five times its address's limit
FLOODER = textwrap.dedent(
    """
    import socket, sys, time
    source, port, attempts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    held = []
    deadline = time.monotonic() + 30
    while len(held) < attempts and time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(2.0)
        try:
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"\\x00\\x00\\x10\\x00half")  # announces 4096 bytes, sends 4
        except OSError:
            s.close()
            continue
        held.append(s)
    print(len(held), flush=True)
    sys.stdin.read()  # hold them until told
    """
)


def test_a_flood_from_8_processes_leaves_the_broker_healthy_and_serving() -> None:
    config = {"max.connections.per.ip": PER_IP, "max.connections": 2000}
    with Cluster(1, config=config, mode="process") as cluster:
        cluster.create_topic("flood", partitions=1)
        port = cluster.ports[0]
        flooders = [
            subprocess.Popen(
                [sys.executable, "-c", FLOODER, f"127.0.0.{2 + i}", str(port), str(ATTEMPTS)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        try:
            for flooder in flooders:  # each has made all its attempts, and holds what it has
                assert flooder.stdout is not None
                assert int(flooder.stdout.readline()) > 0

            def refused() -> float:
                return cluster.metrics(0)[
                    ("purgatory_connections_refused_total", (("reason", "per_ip"),))
                ]

            # Every attempt beyond an address's limit is refused: the broker holds at most
            # 8 x PER_IP of the flood's connections.
            cluster.wait_for(lambda: refused() >= 8 * (ATTEMPTS - PER_IP), timeout=30)
            assert cluster.healthy(0)
            open_now = cluster.metrics(0)[("purgatory_connections", ())]
            assert open_now <= 8 * PER_IP + 2

            # A client from 127.0.0.1 is served in the middle of the flood.
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}
            )
            failed: list[object] = []
            for i in range(100):
                producer.produce(
                    "flood", str(i).encode(), on_delivery=lambda err, _: err and failed.append(err)
                )
            assert producer.flush(20) == 0 and failed == []
            assert [v for _, _, v in cluster.records("flood")] == [
                str(i).encode() for i in range(100)
            ]
            # One log line per flooding address, not one per refused connection.
            refusals = [e for e in cluster.logs(0, 1000) if e["event"] == "connection_refused"]
            assert sorted(e["ip"] for e in refusals) == [f"127.0.0.{2 + i}" for i in range(8)]
        finally:
            for flooder in flooders:
                assert flooder.stdin is not None
                flooder.stdin.close()
            for flooder in flooders:
                flooder.wait(30)
        # The flood's connections go with its processes.
        cluster.wait_for(lambda: cluster.metrics(0)[("purgatory_connections", ())] <= 2, timeout=30)
        assert cluster.alive(0) and cluster.healthy(0)
