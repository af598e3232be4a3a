"""Real servers on loopback for the scale-out tests: PostgreSQL and `mlflow server`.

The tests start them once per session (fixtures in tests/conftest.py) and stop them at the
end. Both listen only on 127.0.0.1, on free ports, with every file in a temporary folder.
PostgreSQL refuses to run as root, so as root its data folder belongs to the `postgres`
OS user (Debian's package creates it) and initdb / pg_ctl run as that user via runuser.
Where a piece is missing, `Unavailable` says why; the fixtures skip on it, except in CI
(`CI` set), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PG_PASSWORD = "s3cret-pw"  # the superuser's password over TCP (tests check it is masked)


class Unavailable(RuntimeError):
    """A server cannot be installed or started on this machine."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin_dir() -> Path:
    """The newest PostgreSQL server binaries (Debian's /usr/lib/postgresql/<v>/bin, or PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise Unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")


class Postgres:
    """A throwaway PostgreSQL cluster: initdb in a temp folder, 127.0.0.1 on a free port."""

    def __init__(self):
        self.bin = pg_bin_dir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="rlbench-pg-"))
        self.data, self.log = self.root / "data", self.root / "postgres.log"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *cmd: str, timeout: float = 120) -> None:
        out = subprocess.run([*self._as, *cmd], capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            raise Unavailable(f"{' '.join(cmd[:2])} failed ({out.returncode}): {(out.stderr or out.stdout)[-1500:]}")

    def start(self) -> Postgres:
        if self._as:
            if shutil.which("runuser") is None:
                raise Unavailable("running as root without runuser: cannot start PostgreSQL as user postgres")
            shutil.chown(self.root, "postgres", "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(PG_PASSWORD + "\n")
        if self._as:
            shutil.chown(pwfile, "postgres", "postgres")
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "90", "start"
        )
        return self

    def url(self, db: str, driver: str = "postgresql") -> str:  # the plain form the README recommends: psycopg (3)
        return f"{driver}://postgres:{PG_PASSWORD}@127.0.0.1:{self.port}/{db}"

    def create_db(self, name: str) -> str:
        self._run(str(self.bin / "createdb"), "-h", str(self.root), "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def wait_for_health(url: str, proc: subprocess.Popen, log: Path, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unavailable(f"mlflow server exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise Unavailable(f"mlflow server at {url} not healthy after {deadline_s:.0f} s: {log.read_text()[-3000:]}")


class MlflowServer:
    """`mlflow server` with its backend store in PostgreSQL and proxied artifacts in a temp folder;
    with `app_name`, served as that `mlflow.app` entry point (`--app-name`)."""

    def __init__(self, backend_store_uri: str, root: Path, app_name: str | None = None):
        self.backend, self.root, self.port, self.app_name = backend_store_uri, root, free_port(), app_name
        self.url = f"http://127.0.0.1:{self.port}"
        self.artifacts, self.log = root / "artifacts", root / "mlflow-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, deadline_s: float = 180) -> MlflowServer:
        cmd = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            self.backend,
            "--artifacts-destination",
            self.artifacts.as_uri(),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            *(["--app-name", self.app_name] if self.app_name else []),
        ]
        self.root.mkdir(parents=True, exist_ok=True)
        # the store and the UI alone: no job runner (MLflow 3 starts a pool of job-worker
        # processes by default, about 45 CPU-seconds on a 2-core host) and no usage telemetry
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
        with open(self.log, "w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True, env=env
            )
        try:
            wait_for_health(self.url, self.proc, self.log, deadline_s)
        except Unavailable:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM the server's whole process group (uvicorn workers too), SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None and not _group_alive(self.proc.pid):
            return
        for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _group_alive(self.proc.pid):
                self.proc.poll()
                time.sleep(0.2)
            if not _group_alive(self.proc.pid):
                break
        self.proc.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    import psutil

    return any(
        p.info["status"] != psutil.STATUS_ZOMBIE for p in psutil.process_iter(["status"]) if _pgid(p.pid) == pgid
    )


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
