"""One rlbench job as a plain function: validate, open the MLflow run, train, record.

`run_job(cfg)` is what the Hydra entry point calls and what tests call with a config from
compose(). Validation happens first: a bad config raises ConfigError before any run,
environment or thread exists.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig

from rlbench.config.validate import validate
from rlbench.tracking.record import JobKilled, JobRecord
from rlbench.trainer import last_returns_mean, resolve_device, train

log = logging.getLogger(__name__)


@contextmanager
def sigterm_raises():
    """In the main thread, turn SIGTERM into JobKilled so the job ends KILLED and cleans up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum, frame):
        raise JobKilled(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_job(cfg: DictConfig, overrides: list[str] | None = None, output_dir: Path | None = None) -> dict:
    conf = validate(cfg)
    device = resolve_device(conf.device)
    returns: list[tuple[float, int]] = []
    with sigterm_raises(), JobRecord(cfg, conf.tracking, overrides or [], output_dir,
                                    {"device": str(device), "env_id": conf.env.id}) as record:
        log.info("MLflow run %s (%s): %s on %s", record.run_id, conf.tracking.uri, conf.env.id, device)
        final = train(conf, record.log_metrics, on_episode=lambda r, f: returns.append((r, f)))
        record.log_series("episode_return", returns)
        final["episode_return_mean20"] = last_returns_mean([r for r, _ in returns], 20)
        record.log_metrics(final, step=int(final["frames"]))
        final["run_id"] = record.run_id
    log.info("done: runtime_s=%.1f fps=%.0f sps=%.0f", final["runtime_s"], final["fps"], final["sps"])
    return final
