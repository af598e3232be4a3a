"""A job's life as its observers see it (rlbench/core/observers.py), and its plan (rlbench/prepare/plan.py).

The trainer runs a real CartPole task here (algo=random, no store, no telemetry): a few
thousand frames, about a second."""

from __future__ import annotations

import pytest

from rlbench.core.observers import JobObserver, Observers
from rlbench.prepare.plan import envs_of, plan_job
from rlbench.prepare.validate import validate
from rlbench.train.trainer import train

TASK = [
    "env=cartpole",
    "algo=random",
    "workload=smoke",
    "workload.frames=3000",
    "actors=2",
    "eval_envs=0",
    "telemetry.enabled=false",
    "progress=log",
    "tracking.log_every_s=1",
]


class Diary(JobObserver):
    """Writes down each hook it is called with."""

    def __init__(self, stop_at_tick: bool = False):
        self.calls, self.stop_at_tick = [], stop_at_tick
        self.error = None

    def started(self, trainer):
        self.calls.append("started")

    def tick_values(self, trainer):
        return {"diary/ticks": sum(c == "tick" for c in self.calls)}

    def tick(self, metrics, step):
        self.calls.append("tick")
        self.last_tick = metrics
        if self.stop_at_tick:
            raise RuntimeError("pruned")

    def episode(self, ret, frames, evaluation):
        self.calls.append("episode")

    def stopped(self):
        self.calls.append("stopped")

    def final_values(self, final, trainer):
        self.calls.append("final_values")
        return {"diary_value": 1.5}, {"diary_tag": "yes"}

    def ended(self, final, tags):
        self.calls.append("ended")
        self.final, self.tags = final, tags

    def closed(self, error):
        self.calls.append("closed")
        self.error = error


def _order(calls: list[str]) -> list[str]:
    """The calls with runs of one hook folded: ['started', 'tick', 'episode', 'tick', ...] -> unique steps."""
    out = []
    for c in calls:
        if not out or out[-1] != c:
            out.append(c)
    return out


def test_observers_see_the_life_in_order_and_add_to_the_one_final(compose_cfg):
    plan = plan_job(validate(compose_cfg(TASK)))
    diary = Diary()
    final = train(plan, [diary])
    order = _order(diary.calls)
    assert order[0] == "started" and order[-4:] == ["stopped", "final_values", "ended", "closed"]
    assert "episode" in order  # CartPole episodes end within 3000 frames
    assert diary.error is None
    assert final["diary_value"] == 1.5 and diary.tags.pop("diary_tag") == "yes"  # an observer's values join the final
    # and nothing else but the reasons the bare-forward reference is unknown (algo=random has no network)
    reference = ("inference_forward_ms", "inference_forward_batch", "inference_overhead")
    assert set(diary.tags) == {f"null/{k}" for k in reference}
    assert diary.final == final  # `ended` is told the final metrics the job returns
    assert final["frames"] >= 3000 and final["actor_threads_used"] == plan.envs.actor_threads
    assert final["cpu_gpu_ratio"] == plan.grant_metrics(final["actor_threads_used"])["cpu_gpu_ratio"]


def test_a_tick_that_raises_stops_the_job_and_every_observer_is_closed_with_the_error(compose_cfg):
    plan = plan_job(validate(compose_cfg(TASK + ["workload.frames=10000000", "workload.max_runtime_s=60"])))
    stopper, witness = Diary(stop_at_tick=True), Diary()
    with pytest.raises(RuntimeError, match="pruned"):
        train(plan, [witness, stopper])
    assert "ended" not in witness.calls and "final_values" not in witness.calls  # a failed job has no final
    assert witness.calls[-2:] == ["stopped", "closed"] and isinstance(witness.error, RuntimeError)
    assert witness.last_tick["diary/ticks"] == 0 and "frames" in witness.last_tick  # every tick_values joins the tick


def test_a_closing_observer_that_fails_does_not_stop_the_others(caplog):
    class Broken(JobObserver):
        def closed(self, error):
            raise OSError("disk full")

    later = Diary()
    Observers([Broken(), None, later]).closed(None)
    assert later.calls == ["closed"] and "disk full" in caplog.text


def test_the_plan_decides_envs_threads_and_the_task_once(compose_cfg):
    # device=cpu: the compute unit below is the CPU's (on a CUDA host device=auto tags "sm")
    conf = validate(compose_cfg(["actors=40", "eval_envs=2", "actor_threads=2", "workload=smoke", "device=cpu"]))
    envs = envs_of(conf)
    assert (envs.eval, envs.total, envs.actor_threads) == (2, 42, 2)  # the 40 actors: conf.actors, not copied
    assert envs.inference_batch == 21  # SEED's auto rule: half of all envs, eval envs counted
    plan = plan_job(conf)
    assert plan.envs == envs and plan.pin >= 0  # an explicit thread count is pinned
    assert plan.learner_updates == conf.workload.learner_updates and plan.replay_ratio is not None
    assert plan.tags()["inference_batch_used"] == "21" and plan.tags()["compute_unit"] == "cpu_thread"
    random = plan_job(validate(compose_cfg(["algo=random", "eval_envs=2"])))
    assert random.envs.eval == 0 and random.learner_updates == 0 and random.replay_ratio is None  # nothing learns
    assert random.pin == -1  # actor_threads null: all usable CPUs, not pinned
