"""`python -m rlbench.stage SPEC.json`: one stage of the GPU study in one process (run by
pipelines/gpu_study.py --stage): the GPU's idle power first (NVML), then one discarded warm-up
job (run name `warmup`, tag role=warmup), then the stage's sweeps, each `python -m rlbench -m
...` run in this process, so that every measured job runs warm. docs/gpu.md, "Stages".
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from rlbench.cli import run as entry
from rlbench.cli.command import command
from rlbench.core.errors import Refusal
from rlbench.core.metrics import IDLE_POWER
from rlbench.telemetry.idle import idle_power
from rlbench.telemetry.nvml import NvmlSource
from rlbench.tracking.store import log_alone
from rlbench.tracking.study_records import WARMUP

DOOR = Path(__file__).resolve().parents[1] / "__main__.py"  # argv[0] as `python -m rlbench` has it
STOPPED = (130, 143)  # 128 + SIGINT, SIGTERM: rlbench.core.signals.exit_stopped


def run_main(args: list[str], echo: bool = True) -> int:
    """`python -m rlbench ARGS` in this process (Hydra composes it, its multirun launches the
    jobs, each through run_job): its exit code; sys.argv (which Hydra's main reads) and the root
    logger's handlers put back after (also the tests' in-process command: tests/conftest.py).
    Why main() and not the compose API: docs/architecture.md, "A GPU study stage"."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    argv, sys.argv = sys.argv, [str(DOOR), *args]
    if echo:
        print(f"[stage] python -m rlbench {' '.join(args)}", flush=True)
    try:
        entry.main()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        sys.argv = argv
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def run_stage(spec: dict) -> int:
    """The idle power, the warm-up, the sweeps in order; 0 when every sweep ended 0, else the
    first other code (the warm-up's failure stops the stage: nothing after it would be warm; a
    sweep stopped by a signal stops it too)."""
    source = NvmlSource()
    idle = idle_power(source, spec.get("idle_s", 10.0))
    source.close()
    Path(spec["out"], "idle_power.json").write_text(json.dumps(idle, indent=2))
    print(f"[stage] idle GPU power: {json.dumps(idle)}", flush=True)
    log_alone(
        spec["uri"],
        spec["experiment"],
        "idle power",
        {"rlbench.role": "idle_power"},
        {IDLE_POWER: idle["value"]} if idle["value"] is not None else {},
        {} if idle["value"] is not None else {IDLE_POWER: idle["reason"]},
    )
    code = run_main(
        [*spec["common"], *spec["warmup"], "tracking.run_name=warmup", f"++tracking.tags.{WARMUP[0]}={WARMUP[1]}"]
    )
    if code != 0:
        print(
            f"[stage] the warm-up job ended with exit {code}: the stage stops (nothing after it is warm)",
            file=sys.stderr,
            flush=True,
        )
        return code
    codes = []
    for k, grid in enumerate(spec["grids"]):
        codes.append(run_main(["-m", *spec["common"], *grid, f"hydra.sweep.dir={spec['out']}/multirun/{k}"]))
        if codes[-1] in STOPPED:  # Ctrl-C or SIGTERM (the budget): no later sweep
            break
    return next((c for c in codes if c != 0), 0)


@command("rlbench.stage")
def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_file():
        raise Refusal(
            f"{' '.join(args) or '(nothing)'}: allowed: one SPEC.json written by pipelines/gpu_study.py --stage"
        )
    return run_stage(json.loads(Path(args[0]).read_text()))


if __name__ == "__main__":
    sys.exit(main())
