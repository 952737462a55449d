"""Every command the README and docs/ show is run here against real brokers, unless its
block is marked `<!-- illustrative: why -->` on the line before the fence.

Blocks run in document order against one `purgatory cluster` on free ports: the
documented ports (9092-9094, 9644-9646) are rewritten to the test cluster's, and commands
that rely on the default bootstrap or admin address get the test cluster's. A block marked
`<!-- doc-test: servers -->` holds long-running server commands: they are started on
fresh free ports, must all become healthy and form one cluster, and are stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from purgatory.experiments.processes import free_port_range, free_ports
from tests.support import PURGATORY
from tests.support import purgatory_cli as cli

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_LANGUAGES = {"sh", "bash", "shell", "console", "python"}
MARK = re.compile(r"<!--\s*(illustrative|doc-test: servers)(?::\s*(.*?))?\s*-->")
DOC_PORTS = (9092, 9093, 9094, 9644, 9645, 9646, 9640)  # bootstrap, admin, cluster control
# Client commands that take --bootstrap, and admin commands that take --admin.
BOOTSTRAP = re.compile(
    r"purgatory (?:topics (?:create|list|describe|alter|delete)|produce|consume|consumer-groups"
    r"|share-groups"
    r"|perf (?:produce|consume))\b"
)
ADMIN = re.compile(r"purgatory admin (?:config|fault) [a-z]+\b")
BOOTSTRAP_ADMIN = re.compile(r"purgatory admin elect-leaders\b")
CONTROL = re.compile(r"purgatory admin broker [a-z]+\b")
# The README's readers `source .venv/bin/activate`: `purgatory` is on PATH.
ACTIVATED = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
# What a file's blocks assume exists, as the prose says.
SETUP = {"protocol.md": ["topics", "create", "orders", "--if-not-exists"]}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    text: str
    mark: str | None  # None (run it), "illustrative", "doc-test: servers"
    reason: str | None

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^(\s*)```(\w*)", lines[i])
            if not fence:
                i += 1
                continue
            indent, language = fence.group(1), fence.group(2)
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = "\n".join(line[len(indent) :] for line in lines[i + 1 : end])
            previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = MARK.search(previous)
            if language in COMMAND_LANGUAGES:
                out.append(
                    Block(
                        path,
                        i + 1,
                        language,
                        body,
                        mark.group(1) if mark else None,
                        mark.group(2) if mark else None,
                    )
                )
            i = end + 1
    return out


BLOCKS = blocks()
RUN = [b for b in BLOCKS if b.mark is None]
SERVERS = [b for b in BLOCKS if b.mark == "doc-test: servers"]


def test_every_command_block_is_run_or_says_why_not() -> None:
    assert RUN and SERVERS
    for block in BLOCKS:
        if block.mark == "illustrative":
            assert block.reason, f"{block.name}: say why it is not run"


def rewrite_ports(text: str, ports: dict[int, int]) -> str:
    return re.sub(r"\b(909[2-4]|964[04-6])\b", lambda m: str(ports[int(m.group(1))]), text)


def point_at(text: str, bootstrap: str, admin: str, control: str) -> str:
    """Give client and admin commands the test cluster's addresses where they rely on the
    defaults (which are the documented ports)."""
    text = text.replace("\\\n", " ")

    def inject(pattern: re.Pattern[str], flag: str, value: str, text: str) -> str:
        out, pos = [], 0
        for match in pattern.finditer(text):
            segment = re.split(r"[|;#<>\n]|&&", text[match.end() :], maxsplit=1)[0]
            out.append(text[pos : match.end()])
            if flag not in segment:
                out.append(f" {flag} {value}")
            pos = match.end()
        return "".join(out) + text[pos:]

    text = inject(BOOTSTRAP, "--bootstrap", bootstrap, text)
    text = inject(BOOTSTRAP_ADMIN, "--bootstrap", bootstrap, text)
    text = inject(CONTROL, "--control", control, text)
    return inject(ADMIN, "--admin", admin, text)


@pytest.fixture(scope="module")
def ports(cluster: dict) -> dict[int, int]:
    boot = [int(a.rsplit(":", 1)[1]) for a in cluster["bootstrap"].split(",")]
    admin = [int(a.rsplit(":", 1)[1]) for a in cluster["admin"]]
    control = [int(cluster["control"].rsplit(":", 1)[1])]
    return dict(zip(DOC_PORTS, boot + admin + control, strict=True))


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_documented_commands_work(block: Block, cluster: dict, ports: dict[int, int]) -> None:
    setup = SETUP.get(block.path.name)
    if setup:
        assert cli(*setup, "--bootstrap", cluster["bootstrap"]).returncode == 0
    if block.path.name == "protocol.md":  # the example talks to the leader of orders-0
        described = cli(
            "topics", "describe", "orders", "--json", "--bootstrap", cluster["bootstrap"]
        )
        leader = json.loads(described.stdout)[0]["partitions"][0]["leader"]
        ports = {**ports, 9092: int(cluster["bootstrap"].split(",")[leader].rsplit(":", 1)[1])}
    text = point_at(
        rewrite_ports(block.text, ports),
        cluster["bootstrap"],
        cluster["admin"][0],
        cluster["control"],
    )
    if block.language == "python":
        command = [sys.executable, "-c", text]
    else:
        command = ["bash", "-euo", "pipefail", "-c", text]
    try:  # below pytest's own timeout, so a hang shows what the block printed
        run = subprocess.run(
            command, capture_output=True, text=True, timeout=100, cwd=ROOT, env=ACTIVATED
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"{block.name} hung for 100 s\n{text}\n{out[-3000:]}\n{err[-3000:]}")
    assert run.returncode == 0, f"{block.name}\n{text}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    if block.path.name == "protocol.md":
        assert re.match(r"1 0 orders 0 0 \d+$", run.stdout.strip()), run.stdout


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture
def fresh_ports() -> dict[int, int]:
    boot, admin = free_port_range(3), free_port_range(3)
    while admin in range(boot - 3, boot + 3):
        admin = free_port_range(3)
    return dict(
        zip(
            DOC_PORTS,
            [boot + i for i in range(3)] + [admin + i for i in range(3)] + free_ports(1),
            strict=True,
        )
    )


def admin_ports(command: str) -> list[int]:
    if m := re.search(r"--admin-port (\d+)", command):
        return [int(m.group(1))]
    base = int(re.search(r"--admin-base-port (\d+)", command).group(1))  # type: ignore[union-attr]
    brokers = int(re.search(r"--brokers (\d+)", command).group(1))  # type: ignore[union-attr]
    return [base + i for i in range(brokers)]


@pytest.mark.parametrize("block", SERVERS, ids=[b.name for b in SERVERS])
def test_documented_servers_start_and_form_one_cluster(
    block: Block, fresh_ports: dict[int, int], tmp_path: Path
) -> None:
    commands = [
        rewrite_ports(line, fresh_ports)
        for line in block.text.splitlines()
        if line.strip() and not line.startswith("#")
    ]
    procs = [
        subprocess.Popen(
            [*PURGATORY, *command.split()[1:]],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for command in commands
    ]
    try:
        waiting = [p for command in commands for p in admin_ports(command)]
        deadline = time.monotonic() + 60
        while waiting and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), [
                p.stderr.read() for p in procs if p.stderr
            ]
            waiting = [p for p in waiting if not healthy(p)]
            time.sleep(0.1)
        assert not waiting, f"{block.name}: not healthy: {waiting}"
        states = []
        for command in commands:
            for port in admin_ports(command):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/state", timeout=5) as r:
                    states.append(json.load(r))
        assert len({s["controller_id"] for s in states}) == 1  # one cluster, one controller
        first = fresh_ports[9092]
        rf = str(len(states))
        made = cli("topics", "create", "docs", "--replication-factor", rf,
                   "--bootstrap", f"127.0.0.1:{first}")  # fmt: skip
        assert made.returncode == 0, made.stderr
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(30)
