"""A grading cluster on one machine, for the distributed tests: a throw-away Redis and Postgres of the test's
own (so it can kill and stop them), `grade worker` processes each in its own network namespace reaching
Redis and Postgres over a veth pair — as separate hosts would — and the API (`grade serve --broker`).

Network namespaces need root (CAP_NET_ADMIN); elsewhere the workers fall back to loopback, except in CI
(CI=true), where that is a failure. Addresses are in 10.213.0.0/16, created here on interfaces of our own; the
namespaces have no default route, so no traffic can leave the machine."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.parallel import subnet_octet
from tests.service.support import free_port

IN_CI = os.environ.get("CI") == "true"
GRADE = [sys.executable, "-c", "from harness.cli import main; main()"]
# a `grade worker` that writes every thread's stack to its log on SIGUSR1 (WorkerProc.stacks): a worker that never
# reports alive says where it waits
WORKER = [sys.executable, "-c", "import faulthandler, signal; faulthandler.register(signal.SIGUSR1, all_threads=True)"
                                "\nfrom harness.cli import main; main()"]
REDIS_ENV = "GRADER_TEST_REDIS_URL"


def redis_url_or_skip() -> str:
    import pytest

    url = os.environ.get(REDIS_ENV)
    if not url:
        if IN_CI:
            pytest.fail(f"{REDIS_ENV} is not set: CI must start a Redis (.ci/redis-setup.sh)")
        pytest.skip(f"no Redis: set {REDIS_ENV} (e.g. $(bash .ci/redis-setup.sh)); never skipped in CI")
    return url


def binary_or_skip(name: str, hint: str) -> str:
    import pytest

    found = next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))[-1:]), None) or shutil.which(name)
    if not found:
        if IN_CI:
            pytest.fail(f"{name} is not installed: {hint}")
        pytest.skip(f"{name} is not installed ({hint}); never skipped in CI")
    return str(found)


def _wait_port(host: str, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


class NetHosts:
    """``n`` network namespaces, each joined to the root namespace by a veth pair with a /30 of its own."""

    def __init__(self, n: int):
        self.tag = secrets.token_hex(2)
        self.octet = subnet_octet(random.randrange(25))
        self.names = [f"ag{self.tag}{i}" for i in range(n)]
        self.available = False
        self.why = ""
        self.host_ips: list[str] = []
        self.ns_ips: list[str] = []

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)

    def create(self) -> "NetHosts":
        if os.geteuid() != 0 or not shutil.which("ip"):
            self.why = "not root or no `ip` command"
            return self
        try:
            for i, ns in enumerate(self.names):
                host_ip, ns_ip = f"10.213.{self.octet}.{4 * i + 1}", f"10.213.{self.octet}.{4 * i + 2}"
                self._ip("netns", "add", ns)
                self._ip("link", "add", f"{ns}h", "type", "veth", "peer", "name", f"{ns}n")
                self._ip("link", "set", f"{ns}n", "netns", ns)
                self._ip("addr", "add", f"{host_ip}/30", "dev", f"{ns}h")
                self._ip("link", "set", f"{ns}h", "up")
                self._ip("-n", ns, "addr", "add", f"{ns_ip}/30", "dev", f"{ns}n")
                self._ip("-n", ns, "link", "set", f"{ns}n", "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
                self.host_ips.append(host_ip)
                self.ns_ips.append(ns_ip)
            for i in range(len(self.names)):
                self._reach(i)
            self.available = True
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            self.why = f"ip netns failed: {getattr(exc, 'stderr', b'') or exc}"
            self.delete()
        return self

    def _reach(self, i: int) -> None:
        """A TCP connection from namespace ``i`` to its host address, or OSError with what the namespace holds:
        the services the workers need listen there (a worker whose connection goes nowhere waits in connect)."""
        with socket.socket() as srv:
            srv.bind((self.host_ips[i], 0))
            srv.listen(1)
            srv.settimeout(15)
            probe = (f"import socket; socket.create_connection(('{self.host_ips[i]}', {srv.getsockname()[1]}), "
                     "timeout=10).close()")
            done = subprocess.run(self.wrap(i, [sys.executable, "-c", probe], force=True), capture_output=True,
                                  text=True, timeout=30)
            why = (done.stderr.strip()[-400:] or f"exit code {done.returncode}") if done.returncode else ""
            if not why:
                try:
                    srv.accept()[0].close()
                except OSError:
                    why = "connected, but not to this listener"
            if why:
                shown = subprocess.run(["ip", "-n", self.names[i], "-br", "addr"], capture_output=True, text=True)
                raise OSError(f"namespace {self.names[i]} cannot reach {self.host_ips[i]}: {why}\n{shown.stdout}")

    def delete(self) -> None:
        for ns in self.names:
            for cmd in (["ip", "link", "del", f"{ns}h"], ["ip", "netns", "del", ns]):
                try:
                    subprocess.run(cmd, capture_output=True, timeout=20)
                except subprocess.TimeoutExpired:
                    pass    # the next command, and the next namespace, still get their turn

    def wrap(self, i: int, cmd: list[str], force: bool = False) -> list[str]:
        # nsenter switches the network namespace only: `ip netns exec` also remounts /sys, which hides the cgroup
        # hierarchy a real worker host has (the host's memory measurement and worker cgroups need it)
        return ["nsenter", f"--net=/run/netns/{self.names[i]}", "--", *cmd] if self.available or force else cmd

    def address_for(self, i: int) -> str:
        """The address worker ``i`` reaches the services at."""
        return self.host_ips[i] if self.available else "127.0.0.1"


class RedisProc:
    """A Redis of the test's own (no persistence: a restart loses every message)."""

    def __init__(self, binds: list[str], workdir: Path):
        self.binary = binary_or_skip("redis-server", "apt-get install redis-server (.ci/redis-setup.sh)")
        self.port = free_port()
        self.binds = ["127.0.0.1", *binds]
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def url(self, host: str = "127.0.0.1", db: int = 0) -> str:
        return f"redis://{host}:{self.port}/{db}"

    def start(self) -> "RedisProc":
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "redis.log", "ab")
        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", *self.binds, "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir), "--protected-mode", "no"],
                                     stdout=log, stderr=log, start_new_session=True)
        log.close()
        _wait_port("127.0.0.1", self.port)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def restart(self, down_s: float = 0.0) -> None:
        self.kill()
        time.sleep(down_s)
        self.start()


class PostgresCluster:
    """A Postgres cluster of the test's own (initdb + pg_ctl in a temp dir, as the postgres user), listening on
    loopback and the given addresses; it can be stopped and started."""

    def __init__(self, listen: list[str], subnets: list[str]):
        self.initdb = binary_or_skip("initdb", "apt-get install postgresql (.ci/postgres-setup.sh)")
        self.bin = Path(self.initdb).parent
        self.port = free_port()
        self.listen = ["127.0.0.1", *listen]
        self.subnets = subnets
        self.dir = Path(tempfile.mkdtemp(prefix="attn-grader-pgt-"))
        self.data = self.dir / "data"

    def _as_pg(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], capture_output=True, text=True,
                              timeout=120, check=check)

    def init(self) -> "PostgresCluster":
        subprocess.run(["id", "postgres"], check=True, capture_output=True)
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        self._as_pg(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        with open(self.data / "pg_hba.conf", "a") as f:
            for net in self.subnets:
                f.write(f"host all all {net} trust\n")
        return self.start()

    def start(self) -> "PostgresCluster":
        opts = (f"-c listen_addresses={','.join(self.listen)} -c port={self.port} "
                f"-c unix_socket_directories={self.dir} -c fsync=off -c max_connections=200")
        self._as_pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w",
                    "-o", opts, "start")
        return self

    def stop(self) -> None:
        self._as_pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def url(self, db: str = "postgres", host: str = "127.0.0.1") -> str:
        return f"postgresql://postgres@{host}:{self.port}/{db}"

    def create_db(self) -> str:
        from sqlalchemy import create_engine, text

        name = "t_" + secrets.token_hex(5)
        eng = create_engine(self.url().replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        eng.dispose()
        return name

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class WorkerProc:
    """`grade worker` (in network namespace ``i`` of ``hosts`` when there are namespaces)."""

    def __init__(self, hosts: NetHosts, i: int, *, broker: str, db: str, data_dir: Path, concurrency: int = 1,
                 env: dict | None = None, queues: str | None = None):
        self.cmd = hosts.wrap(i, [*WORKER, "worker", "--broker", broker, "--db", db, "--data-dir", str(data_dir),
                                  "--concurrency", str(concurrency), *(["--queues", queues] if queues else [])])
        self.env = {**os.environ, "GRADER_SANDBOX": "local", "PYTHONWARNINGS": "ignore", **(env or {})}
        self.env.pop("GRADER_DATABASE_URL", None)
        self.env.pop("GRADER_BROKER_URL", None)
        self.log_path = data_dir.parent / f"{data_dir.name}-worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "WorkerProc":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=log, env=self.env, start_new_session=True,
                                     cwd=str(self.log_path.parent))
        log.close()
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 60) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()

    def stacks(self) -> None:
        """Every thread's stack into the log, when the worker is still running."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGUSR1)
            time.sleep(0.5)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
