"""`python -m rlbench [overrides]` / `python -m rlbench -m actors=4,40,256`: the Hydra shell.

All work happens in rlbench.job.run_job; this file only checks the command line's keys,
hands over to Hydra, and maps a bad config to a clear message and a non-zero exit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlbench.config.argv import check_override_keys
from rlbench.config.compose import CONF_DIR
from rlbench.config.schema import register_configs


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _entry(cfg: DictConfig, on_tick=None) -> dict:  # on_tick: a search trial's, see search/trials.py
    from rlbench.config.validate import ConfigError, validate

    hc = HydraConfig.get()
    if cfg.get("search") is not None and hc.mode.name == "RUN":
        print("rlbench: search=... runs an Optuna study over many jobs: add -m "
              "(python -m rlbench -m search=ratio)", file=sys.stderr)
        sys.exit(2)
    if cfg.get("repeats", 1) > 1 and hc.mode.name == "RUN":
        print(f"rlbench: repeats={cfg.repeats} runs every configuration {cfg.repeats} times as one sweep: add -m "
              f"(python -m rlbench -m repeats={cfg.repeats} ...)", file=sys.stderr)
        sys.exit(2)
    try:
        conf = validate(cfg)  # a bad value is refused before the trainer and MLflow are imported (~2 s, not ~6)
        from rlbench.job import run_job

        result = run_job(cfg, list(hc.overrides.task), Path(hc.runtime.output_dir), conf, on_tick)
    except ConfigError as e:
        print(f"rlbench: {e}", file=sys.stderr)
        sys.exit(2)
    return result  # the job's final metrics: a sweep's summary and a search's objectives read them


def main() -> None:
    register_configs()
    problem = check_override_keys(sys.argv[1:], CONF_DIR)
    if problem:
        print(f"rlbench: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        _entry()
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: its runs ended KILLED; one line and 128 + the signal
        from rlbench.signals import stopped

        sys.exit(stopped(e))


if __name__ == "__main__":
    main()
