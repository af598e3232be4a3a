"""One-command experiment pipelines: run a sweep or a search, then its report.

The scripts in pipelines/ name their overrides and call `run_pipeline`, which runs
`python -m rlbench -m <overrides>`, then `rlbench.report` on the parent run it printed.
docs/jobs.md, "Pipelines".
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rlbench.cli.command import Parser, preflight_or_exit
from rlbench.config.flags import writable_folder
from rlbench.config.rules import ConfigError
from rlbench.prepare.command_line import precheck as rlbench_precheck
from rlbench.prepare.compose import compose_checked

ROOT = Path(__file__).resolve().parents[2]  # the clone: rlbench/cli/ is two below it
PARENT_LINE = re.compile(r"\[rlbench (?:sweep|search)\] parent run ([0-9a-f]{32})")


def merge(base: list[str], extra: list[str]) -> list[str]:
    """Overrides `base` then `extra`; a key given in `extra` replaces the same key in `base`."""
    keys = {o.split("=", 1)[0].lstrip("+~") for o in extra}
    return [o for o in base if o.split("=", 1)[0].lstrip("+~") not in keys] + list(extra)


def tracking_uri(overrides: list[str]) -> str:
    """The store the jobs will use, resolved as they resolve it: the config composed with the
    tracking and experiment overrides (presets, MLFLOW_TRACKING_URI, tracking.uri=...).
    ConfigError (naming the override) for a bad key, preset or value among them."""

    keep = [o for o in overrides if o.split("=", 1)[0].lstrip("+~").split(".")[0] in ("tracking", "experiment")]
    return compose_checked(keep).tracking.uri


@dataclass
class Sweep:
    code: int  # the multirun's exit code
    parent: str | None  # its parent run id, None when it opened none
    stopped: bool = False  # stopped at its time limit (SIGTERM: the running job ends KILLED)
    seconds: float = 0.0  # wall time


def run_sweep(
    overrides: list[str],
    timeout_s: float | None = None,
    grace_s: float = 30.0,
    module: str = "rlbench",
    multirun: bool = True,
) -> Sweep:
    """Runs the multirun (`python -m <module> -m ...`; multirun False: without `-m`), echoing its
    output. With `timeout_s`: SIGTERM once it has run that long (its finished jobs stay), SIGKILL
    `grace_s` later."""
    cmd = [sys.executable, "-m", module, *(["-m"] if multirun else []), *overrides]
    print("[pipeline] " + " ".join(cmd), flush=True)
    parent, t0, fired = None, time.monotonic(), threading.Event()

    def stop(proc: subprocess.Popen) -> None:
        fired.set()
        print(f"[pipeline] time limit of {timeout_s:.0f} s reached: stopping the sweep (SIGTERM)", flush=True)
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
            return
        proc.kill()

    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
        timer = threading.Timer(max(0.0, timeout_s), stop, (proc,)) if timeout_s is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        for line in proc.stdout:
            sys.stdout.write(line)
            parent = (m := PARENT_LINE.search(line)) and m.group(1) or parent
        proc.wait()
        if timer is not None:
            timer.cancel()
    return Sweep(proc.returncode, parent, fired.is_set(), time.monotonic() - t0)


def run_sweep_command(overrides: list[str]) -> tuple[int, str | None]:
    """Runs the multirun, echoing its output; returns its exit code and the parent run id."""
    sweep = run_sweep(overrides)
    return sweep.code, sweep.parent


def precheck(overrides: list[str]) -> str | None:
    """The pipeline's overrides checked as `python -m rlbench -m` checks them (keys, presets,
    values; each sweep's job is checked by the sweep itself), before any process starts."""

    return rlbench_precheck(["-m", *overrides])


def run_pipeline(name: str, full: list[str], quick: list[str], argv: list[str] | None = None) -> int:
    p = Parser(prog=f"pipelines/{name}.py", description=f"{name}: run it, then its report.")
    p.add_argument("--quick", action="store_true", help="a few-minute variant for a 2-core CPU machine")
    p.add_argument("--report-out", type=Path, default=None, help="report folder (default: reports/<parent run id>)")
    p.add_argument("overrides", nargs="*", help="extra rlbench overrides, e.g. env=breakout tracking.uri=...")
    args = p.parse_args(argv)
    out = args.report_out.resolve() if args.report_out else None
    if out is not None and (problem := writable_folder("--report-out", out)):
        p.error(problem)
    os.chdir(ROOT)  # relative stores (sqlite:///mlruns/...) mean the same to the jobs and the report
    overrides = merge(quick if args.quick else full, args.overrides)
    try:
        problem = precheck(overrides)
        uri = tracking_uri(overrides)
    except ConfigError as e:
        problem = str(e)
    if problem:
        p.error(f"{problem} (no job started, no report)")
    preflight_or_exit(uri, prog=f"pipelines/{name}.py")  # the store the sweep and the report use: one line, exit 2
    code, parent = run_sweep_command(overrides)
    if parent is None:  # refused by rlbench before any job (2), or it died before its parent run (1)
        print(f"[pipeline] {name}: no parent run was opened (exit {code}); no report", file=sys.stderr)
        return code or 1
    from rlbench.cli.report import main as report  # lazy: keeps matplotlib, mlflow off the start

    report_args = ["--sweep", parent, "--tracking-uri", uri] + (["--out", str(out)] if out else [])
    report_code = report(report_args)
    return code or report_code
