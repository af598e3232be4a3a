"""Real `python -m rlbench.actor` processes driven through RemoteEnvs on loopback by a test
loop (random actions): CartPole and Pong with 2 actor processes, the frame stacks equal a
local AtariVectorEnv's, refusals (token, env spec), an unreachable job, the job closing, an
actor SIGKILLed mid-run and a new one rejoining. Every process is reaped after each test."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from rlbench.envs.spec import env_spec
from rlbench.prepare.compose import compose_job
from rlbench.remote.hub import RemoteError
from rlbench.remote.server import RemoteEnvs
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
EXIT_S = 10  # the job closing ends every actor process within this


@contextlib.contextmanager
def _sigint_as_from_a_terminal():
    """Start children with SIGINT at its default, as from a terminal. A suite started as a
    background job runs with SIGINT ignored, which a child inherits (Python then installs no
    KeyboardInterrupt). Not a preexec_fn: that forks instead of vfork, and gRPC's fork handlers
    abort the child while this process's server threads are busy (docs/testing.md)."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def actors():
    """start(server, envs, *overrides, token=None) -> a running actor process; all are reaped."""
    started: list[psutil.Popen] = []

    def start(server: str, envs: int, *overrides: str, token: str | None = None) -> psutil.Popen:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        env.pop("RLBENCH_ACTOR_TOKEN", None)
        if token is not None:
            env["RLBENCH_ACTOR_TOKEN"] = token
        with _sigint_as_from_a_terminal():
            p = psutil.Popen(
                [sys.executable, "-m", "rlbench.actor", "--server", server, "--envs", str(envs), *overrides],
                cwd=ROOT,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=30)
    assert not [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not [c.pid for c in psutil.Process().children(recursive=True) if _is_actor(c)]


def _is_actor(proc: psutil.Process) -> bool:
    try:
        return "rlbench.actor" in " ".join(proc.cmdline())
    except psutil.NoSuchProcess:  # ended between the listing and the look
        return False


def _remote(overrides: list[str], envs: int, **kw) -> RemoteEnvs:
    cfg = compose_job(overrides, host=False).env
    return RemoteEnvs(cfg, env_spec(cfg), envs, **kw)


def _drive(remote: RemoteEnvs, batch, steps: int, rng: np.random.Generator) -> list:
    batches = [batch]
    for _ in range(steps):
        remote.send(rng.integers(0, remote.num_actions, len(batch.env_ids)))
        batch = remote.recv()
        batches.append(batch)
    return batches


def _drive_until(remote: RemoteEnvs, batch, rng: np.random.Generator, procs, reached, timeout_s: float = 60):
    """One step at a time until `reached(batch)` gives something other than None: (batch, that).
    Past `timeout_s`, fails with each ended actor's exit code and stderr."""
    deadline = time.monotonic() + timeout_s
    while True:
        batch = _drive(remote, batch, 1, rng)[-1]
        if (value := reached(batch)) is not None:
            return batch, value
        assert time.monotonic() < deadline, "; ".join(
            f"pid {p.pid}: exit {p.poll()}: {p.communicate()[1].strip()[-2000:]}"
            if p.poll() is not None
            else f"pid {p.pid}: running"
            for p in procs
        )


def _close_and_wait(remote: RemoteEnvs, procs) -> list[tuple[int, str]]:
    """close(), then each process's exit code and output, all within EXIT_S of the close."""
    t = time.monotonic()
    remote.close()
    ended = [(p.wait(timeout=EXIT_S), p.communicate()[0]) for p in procs]
    assert time.monotonic() - t < EXIT_S
    return ended


def test_two_cartpole_actor_processes_step_in_lock_step(actors):
    remote = _remote(["env=cartpole"], 6, batch=0, join_timeout_s=90)
    procs = []
    try:
        procs += [actors(remote.address, 3, "env=cartpole") for _ in range(2)]
        batches = _drive(remote, remote.reset(seed=3), 40, np.random.default_rng(0))
        assert batches[0].env_ids.tolist() == list(range(6)) and batches[0].done.all()
        assert all(sorted(b.env_ids.tolist()) == list(range(6)) for b in batches)
        assert all(b.obs.shape == (6, 4) and b.obs.dtype == np.float32 for b in batches)
        assert any(b.done.any() for b in batches[1:])  # episodes end and restart (random CartPole: ~20 steps)
        assert sorted(a["first_env_id"] for a in remote.actors()) == [0, 3] and remote.threads_used == 2
    finally:
        ended = _close_and_wait(remote, procs)
    assert [code for code, _ in ended] == [0, 0]
    assert all("ended the stream after 40 steps" in out for _, out in ended)


def test_two_pong_actor_processes_batch_on_the_server_within_the_wire_budget(actors):
    remote = _remote(["env=pong"], 4, batch=-1, join_timeout_s=90)  # -1: half the envs per forward
    procs = []
    try:
        procs += [actors(remote.address, 2, "env=pong") for _ in range(2)]
        batches = _drive(remote, remote.reset(seed=5), 40, np.random.default_rng(1))
        assert remote.inference_batch == 2 and batches[0].obs.shape == (4, 4, 84, 84)
        assert all(
            len(b.env_ids) == 2 and b.obs.shape == (2, 4, 84, 84) and b.obs.dtype == np.uint8 for b in batches[1:]
        )  # one actor's whole Step each
        wire = remote.wire_bytes()
        per_env_step = (wire["received"] + wire["sent"]) / wire["env_steps"]
        print(f"bytes per Atari env step on the wire (messages): {per_env_step:.0f}")
        assert 84 * 84 <= per_env_step <= 7500
    finally:
        ended = _close_and_wait(remote, procs)
    assert [code for code, _ in ended] == [0, 0]


def test_remote_atari_observations_equal_a_local_atari_vector_env(actors):
    from rlbench.envs.atari.vector_env import AtariActors

    overrides = ["env=pong", "env.max_episode_frames=240"]  # 60 steps: episodes restart during the test
    cfg = compose_job(overrides, host=False).env
    local = AtariActors(cfg, 3, threads=1, batch=0)
    remote = _remote(overrides, 3, batch=0, join_timeout_s=90)
    procs = []
    try:
        procs.append(actors(remote.address, 3, *overrides))
        rng = np.random.default_rng(2)
        mine, theirs = local.reset(seed=11), remote.reset(seed=11)
        starts = 0
        for _ in range(150):
            for field in ("env_ids", "obs", "reward", "done"):
                np.testing.assert_array_equal(getattr(theirs, field), getattr(mine, field), err_msg=field)
            starts += int(mine.done.sum())
            actions = rng.integers(0, local.num_actions, 3)
            local.send(actions)
            remote.send(actions)
            mine, theirs = local.recv(), remote.recv()
        assert starts >= 3 + 3 * 2  # the reset, then two truncations per env
    finally:
        local.close()
        _close_and_wait(remote, procs)


def test_a_wrong_token_is_refused_and_counted_and_the_right_one_joins(actors, caplog):
    caplog.set_level("WARNING", logger="rlbench.remote.server")
    remote = _remote(["env=cartpole"], 2, token="s3cret-value", join_timeout_s=90)
    procs = []
    try:
        wrong = actors(remote.address, 2, "env=cartpole", token="not-the-token")
        assert wrong.wait(timeout=60) == 2
        out, err = wrong.communicate()
        assert err.strip() == (
            f"rlbench.actor: the job at {remote.address} refused this actor: wrong or missing "
            f"token (the authorization metadata, from RLBENCH_ACTOR_TOKEN)"
        )
        assert "not-the-token" not in out + err  # never printed
        assert remote.counts["refused_token"] == 1
        (line,) = [r.getMessage() for r in caplog.records if r.name == "rlbench.remote.server"]
        assert line.startswith("refused an actor process from ") and ": token: wrong or missing token" in line
        assert "not-the-token" not in line and "s3cret-value" not in line  # the job's log names no token
        procs.append(actors(remote.address, 2, "env=cartpole", token="s3cret-value"))
        assert remote.reset(seed=0).env_ids.tolist() == [0, 1]
    finally:
        _close_and_wait(remote, procs)


def test_a_mismatched_env_spec_is_refused_naming_both_sides(actors):
    remote = _remote(["env=pong"], 2)
    try:
        p = actors(remote.address, 2, "env=pong", "env.frameskip=3")
        assert p.wait(timeout=60) == 2
        err = p.communicate()[1]
        assert "refused this actor: env spec differs: frameskip: actor 3, job 4; env.frameskip: actor 3, job 4" in err
        assert remote.counts["refused_spec"] == 1
    finally:
        remote.close()


def test_an_actor_that_cannot_reach_the_job_exits_2_naming_the_address(actors, tmp_path):
    address = f"unix:{tmp_path}/no-job.sock"
    p = actors(address, 1, "env=cartpole")
    assert p.wait(timeout=60) == 2
    assert p.communicate()[1].startswith(f"rlbench.actor: cannot reach the job at {address}: UNAVAILABLE")


def test_a_killed_actor_leaves_the_batching_and_a_new_one_rejoins_its_range(actors, tmp_path):
    remote = _remote(
        ["env=cartpole"], 4, batch=0, bind=f"unix:{tmp_path}/job.sock", join_timeout_s=90, idle_timeout_s=1
    )
    rng = np.random.default_rng(3)
    try:
        procs = [actors(remote.address, 2, "env=cartpole") for _ in range(2)]
        batch = _drive(remote, remote.reset(seed=0), 5, rng)[-1]
        victim = next(p for p in procs if p.pid == remote.actors()[0]["pid"])  # holds ids 0, 1
        victim.kill()
        victim.wait(timeout=10)
        # recv goes on with the other actor; the loss is reported once
        batch, lost = _drive_until(
            remote, batch, rng, procs, lambda _: d if (d := remote.take_disconnected()).size else None
        )
        assert lost.tolist() == [0, 1] and remote.counts["disconnects"] == 1
        batch = _drive(remote, batch, 3, rng)[-1]
        assert batch.env_ids.tolist() == [2, 3] and remote.take_disconnected().size == 0
        procs.append(actors(remote.address, 2, "env=cartpole"))
        batch, _ = _drive_until(
            remote, batch, rng, procs, lambda b: b if 0 in b.env_ids else None
        )  # the new one joined
        first = batch.env_ids < 2
        assert batch.done[first].all() and sorted(batch.env_ids.tolist()) == [0, 1, 2, 3]
        assert remote.counts["rejoins"] == 1 and remote.counts["joins"] == 3
        for p in procs:  # the other two (the victim may be either of the first two: they join in any order)
            if p is not victim:
                p.kill()
                p.wait(timeout=10)
        with pytest.raises(RemoteError, match="no actor process has been connected for 1 s"):
            _drive(remote, batch, 1000, rng)
    finally:
        remote.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_actor_stopped_by_a_signal_says_so_in_one_line(actors, signum):
    remote = _remote(["env=cartpole"], 1, join_timeout_s=90)
    try:
        p = actors(remote.address, 1, "env=cartpole")
        remote.reset(seed=0)  # returns once the actor is stepping: it now waits for its actions
        p.send_signal(signum)
        assert p.wait(timeout=EXIT_S) == 128 + signum
        out, err = p.communicate()
        assert (
            out + err
        ).strip() == f"rlbench.actor: stopped by {signal.Signals(signum).name} (job at {remote.address})"
    finally:
        remote.close()
