"""The actor protocol's pure parts and the server's refusals, in-process and fast: the
generated stubs are fresh, frame stacks follow ale-py's rule, id ranges, the spec check, the
hub's batching and disconnect bookkeeping, a non-loopback bind without a token and a port
in use refused. The real actor processes: tests/test_remote_actors.py (e2e)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlbench.config.rules import ConfigError
from rlbench.core.address import is_local
from rlbench.envs.spec import env_spec
from rlbench.prepare.compose import compose_job
from rlbench.remote import actors_pb2 as pb
from rlbench.remote.hub import Hub, Refused, RemoteError
from rlbench.remote.slots import EnvSlots
from rlbench.remote.stacks import FrameStacks
from rlbench.remote.wire import Step, decode_step, spec_difference, spec_message, step_message
from tests.conftest import ROOT

PROTO = "rlbench/remote/actors.proto"


def test_checked_in_stubs_are_generated_from_the_proto(tmp_path):
    (tmp_path / "rlbench/remote").mkdir(parents=True)
    shutil.copy(ROOT / PROTO, tmp_path / PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--grpc_python_out=.", PROTO],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    for name in ("actors_pb2.py", "actors_pb2_grpc.py"):
        fresh, checked_in = (
            (tmp_path / "rlbench/remote" / name).read_text(),
            (ROOT / "rlbench/remote" / name).read_text(),
        )
        assert fresh == checked_in, (
            f"rlbench/remote/{name} is stale: regenerate it from the repository root with "
            f"python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. {PROTO}"
        )


def test_frame_stacks_zero_the_frames_before_an_episode_start_as_replay_rebuilds_them():
    import torch

    from rlbench.algo.common.frames import rebuild_stacks

    L, stack = 9, 4
    frames = np.arange(1, 2 * L + 1, dtype=np.uint8).reshape(L, 2, 1)  # [t, env, frame]: distinct values
    done = np.zeros((L, 2), bool)
    done[0] = True  # the first observation starts an episode (reset)
    done[5, 0] = done[2, 1] = done[3, 1] = True
    stacks = FrameStacks(2, stack, (1,), np.dtype(np.uint8))
    got = np.stack([stacks.push(np.array([1, 0]), frames[t, ::-1], done[t, ::-1])[::-1] for t in range(L)], 1)
    head = torch.zeros((2, stack - 1, 1), dtype=torch.uint8)
    want = rebuild_stacks(head, torch.from_numpy(frames.transpose(1, 0, 2).copy()), torch.from_numpy(done.T.copy()))
    np.testing.assert_array_equal(got, want.numpy())
    assert got[0, 6].ravel().tolist() == [0, 0, 11, 13]  # env 0: its episode started at t=5 (frame 11)
    assert FrameStacks(2, 1, (3,), np.dtype(np.float32)).push(
        np.array([0]), np.ones((1, 3), np.float32), np.array([False])
    ).shape == (1, 3)


def test_env_slots_hand_out_contiguous_ranges_first_fit():
    slots = EnvSlots(6)
    assert [slots.take(2), slots.take(3), slots.take(2)] == [0, 2, None]
    slots.release(0, 2)
    assert slots.free == 3 and slots.take(3) is None and slots.take(2) == 0


def test_spec_difference_names_both_sides():
    cfg = compose_job(["env=cartpole"], host=False).env
    job = spec_message(cfg, env_spec(cfg))
    assert spec_difference(job, job) is None
    actor = pb.EnvSpec()
    actor.CopyFrom(job)
    actor.frameskip = 3
    actor.settings[:] = [s if not s.startswith("id=") else "id=Acrobot-v1" for s in job.settings]
    diff = spec_difference(actor, job)
    assert "frameskip: actor 3, job 1" in diff and "env.id: actor Acrobot-v1, job CartPole-v1" in diff


def test_decode_step_refuses_malformed_steps():
    msg = step_message(np.arange(2), np.zeros((2, 3), np.float32), np.zeros(2), np.ones(2, bool)).step
    step = decode_step(msg, 2, (3,), np.dtype(np.float32))
    assert step.frames.shape == (2, 3) and step.done.all()
    with pytest.raises(ValueError, match="bytes"):
        decode_step(msg, 2, (4,), np.dtype(np.float32))
    with pytest.raises(ValueError, match="distinct in 0..0"):
        decode_step(msg, 1, (3,), np.dtype(np.float32))


def test_decode_step_takes_a_lock_step_step_fast_and_any_other_order_by_the_full_rule():
    def step(ids):
        k = len(ids)
        return step_message(np.array(ids), np.zeros((k, 1), np.uint8), np.zeros(k), np.zeros(k, bool)).step

    assert decode_step(step([0, 1, 2, 3]), 4, (1,), np.dtype(np.uint8)).env_ids.tolist() == [0, 1, 2, 3]
    assert decode_step(step([0, 2, 1, 3]), 4, (1,), np.dtype(np.uint8)).env_ids.tolist() == [0, 2, 1, 3]
    assert decode_step(step([3, 1]), 4, (1,), np.dtype(np.uint8)).env_ids.tolist() == [3, 1]
    for bad in ([0, 0, 2, 3], [0, 2, 2, 3], [0, 1, 2, 4], [-1, 1, 2, 3], [0, 1, 1]):
        with pytest.raises(ValueError, match="distinct in 0..3"):
            decode_step(step(bad), 4, (1,), np.dtype(np.uint8))


def test_step_size_is_the_messages_byte_size_without_encoding_it():
    from rlbench.remote.wire import step_size

    cases = [
        ([], 0),
        ([0], 1),
        ([0, 1, 2], 3 * 7056),
        ([127, 128], 255),
        (list(range(20)), 141_120),
        ([16_383, 16_384, 2**21, 2**28, 2**31 - 1], 5 * 12),
        ([-1, 3], 8),
        (list(range(130)), 130 * 4),
    ]
    for ids, nbytes in cases:
        msg = step_message(
            np.array(ids, np.int64), np.zeros(nbytes, np.uint8), np.zeros(len(ids)), np.zeros(len(ids), bool)
        )
        assert msg.step.env_ids[:] == ids and len(msg.step.frames) == nbytes
        assert step_size(np.array(ids), nbytes) == msg.ByteSize(), (ids[:3], nbytes)


def test_grpc_engine_experiments_are_set_only_where_measured_and_never_over_the_users():
    from rlbench.remote.engine import EXPERIMENTS, configure, experiments_setting

    assert experiments_setting({}, "1.85.3", grpc_imported=False) == EXPERIMENTS
    assert experiments_setting({"GRPC_EXPERIMENTS": ""}, "1.85.3", grpc_imported=False) is None  # the user's
    assert experiments_setting({}, "1.85.3", grpc_imported=True) is None  # too late: read once at grpc's start
    assert experiments_setting({}, "1.86.0", grpc_imported=False) is None  # not measured there
    assert experiments_setting({}, None, grpc_imported=False) is None
    environ = {"GRPC_EXPERIMENTS": "-x"}
    assert configure(environ) is None and environ == {"GRPC_EXPERIMENTS": "-x"}


def test_importing_the_remote_package_picks_the_engine_before_grpc_starts():
    code = (
        "import os, sys; import rlbench.remote.server, rlbench.remote.actor_loop; "
        "print(os.environ.get('GRPC_EXPERIMENTS'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    from importlib import metadata

    from rlbench.remote.engine import experiments_setting

    assert out.strip() == str(experiments_setting({}, metadata.version("grpcio"), grpc_imported=False))


def test_only_loopback_and_unix_binds_are_local():
    assert all(map(is_local, ["127.0.0.1:0", "localhost:5000", "[::1]:1", "unix:/tmp/x.sock"]))
    assert not any(map(is_local, ["0.0.0.0:5000", "[::]:5000", "10.0.0.2:1", "myhost:1", ":5000"]))


def _step(envs: int, done: bool = False) -> Step:
    return Step(np.arange(envs), np.zeros((envs, 1), np.uint8), np.zeros(envs, np.float32), np.full(envs, done))


def test_hub_batches_whole_steps_and_reports_a_lost_range_once_before_handing_it_out_again():
    hub = Hub(total=5, join_timeout_s=0, idle_timeout_s=0)
    a, b = hub.join(2, 1, "h", 1, 11), hub.join(3, 1, "h", 2, 12)
    assert (a.first, b.first) == (0, 2)
    with pytest.raises(Refused, match="asks for 1 envs; the job has 5, 0 free"):
        hub.join(1, 1, "h", 3, 13)
    hub.push(b, _step(3, True))
    hub.push(a, _step(2, True))
    assert [s for s, _ in hub.take_first(seed=100)] == [b, a]
    assert hub.welcome(a) == 100 and hub.welcome(b) == 102  # global env i: seed + i, as in-process
    hub.push(a, _step(2))
    assert [s for s, _ in hub.take_ready(batch=2)] == [a]  # the first ready steps, at least 2 envs
    hub.push(b, _step(3))
    hub.lose(b)  # its pending step leaves the batching
    assert hub.take_lost().tolist() == [2, 3, 4] and hub.take_lost().size == 0
    c = hub.join(3, 1, "h", 4, 14)  # the range is free again once reported
    assert c.first == 2 and hub.welcome(c) == 100 + 2 + 5  # a fresh seed for a rejoin
    hub.push(c, _step(3, True))
    hub.push(a, _step(2))
    assert [s for s, _ in hub.take_ready(batch=5)] == [c, a]  # lock-step waits for the rejoined actor too
    assert dict(hub.counts) == {"joins": 3, "refused_full": 1, "disconnects": 1, "rejoins": 1}


def test_a_stream_lost_while_its_step_is_in_the_jobs_batch_is_reported_after_that_batch():
    """The job drops a lost env's unfinished unroll; a Step of it that the job already holds must
    go into that unroll (and be dropped with it), not start the env's fresh one."""
    hub = Hub(total=4, join_timeout_s=0, idle_timeout_s=0)
    a, b = hub.join(2, 1, "h", 1, 11), hub.join(2, 1, "h", 2, 12)
    hub.push(a, _step(2, True))
    hub.push(b, _step(2, True))
    hub.take_first(seed=0)
    hub.push(b, _step(2))
    (held,) = hub.take_ready(batch=2)  # the job holds b's step...
    hub.lose(b)  # ...when b is lost
    assert hub.take_lost(in_batch=[held[0]]).size == 0  # not yet: that step is inferred and assembled first
    assert hub.take_lost(in_batch=[]).tolist() == [2, 3] and hub.take_lost().size == 0


def test_hub_refuses_to_step_once_every_actor_is_gone():
    hub = Hub(total=1, join_timeout_s=0, idle_timeout_s=0)
    a = hub.join(1, 1, "h", 1, 1)
    hub.push(a, _step(1, True))
    hub.take_first(seed=0)
    hub.lose(a)
    with pytest.raises(RemoteError, match="no actor process has been connected for 0 s"):
        hub.take_ready(batch=1)


def test_a_restarted_actor_joins_when_every_actor_is_gone_and_the_loss_comes_with_its_first_step():
    """With no actor connected the job waits for steps and cannot take the loss, so the lost range
    is handed out at once; the job learns of the loss after the recv that returns the new actor's
    first step (and forgets the old unrolls before inferring it), the range staying the new one's."""
    hub = Hub(total=2, join_timeout_s=0, idle_timeout_s=60)
    a = hub.join(2, 1, "h", 1, 11)
    hub.push(a, _step(2, True))
    hub.take_first(seed=0)
    hub.push(a, _step(2))
    (held,) = hub.take_ready(batch=2)  # the job holds a's step when a is lost
    hub.lose(a)
    assert hub.take_lost(in_batch=[held[0]]).size == 0  # reported after that batch
    c = hub.join(2, 1, "h", 3, 13)  # join_timeout_s=0: refused had it to wait for the job
    assert c.first == 0 and hub.welcome(c) == 0 + 0 + 2
    hub.push(c, _step(2, True))
    assert [s for s, _ in hub.take_ready(batch=2)] == [c]
    assert hub.take_lost(in_batch=[c]).tolist() == [0, 1]  # with c's first step: forgotten before it is inferred
    assert hub.take_lost().size == 0
    with pytest.raises(Refused, match="asks for 1 envs; the job has 2, 0 free"):  # the range stays c's
        hub.join(1, 1, "h", 5, 15)


def test_hub_reset_names_who_joined_and_how_many_are_missing():
    hub = Hub(total=4, join_timeout_s=0, idle_timeout_s=0)
    hub.join(1, 1, "hostA", 7, 1)
    with pytest.raises(RemoteError, match=r"1 of 4 envs joined within 0 s \(1 env from hostA \(pid 7\)\); 3 missing"):
        hub.take_first(seed=0)


def _cartpole():
    cfg = compose_job(["env=cartpole"], host=False).env
    return cfg, env_spec(cfg)


def test_a_non_loopback_bind_without_a_token_is_refused():
    from rlbench.remote.server import RemoteEnvs

    with pytest.raises(ConfigError, match=r"actor_server.bind=0.0.0.0:0: a non-loopback address needs a token"):
        RemoteEnvs(*_cartpole(), 2, bind="0.0.0.0:0")


def test_a_port_in_use_is_refused_naming_the_address():
    from rlbench.remote.server import RemoteEnvs

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"actor_server.bind=127.0.0.1:{port}: cannot listen there"):
            RemoteEnvs(*_cartpole(), 2, bind=f"127.0.0.1:{port}")


def test_a_second_job_on_the_same_port_is_refused_not_sharing_it():
    """gRPC sets SO_REUSEPORT by default: two jobs would split one port's actors between them."""
    from rlbench.remote.server import RemoteEnvs

    first = RemoteEnvs(*_cartpole(), 2)
    try:
        with pytest.raises(ConfigError, match=rf"actor_server.bind={first.address}: cannot listen there"):
            RemoteEnvs(*_cartpole(), 2, bind=first.address)
    finally:
        first.close()


def test_cpu_lists_read_as_taskset_writes_them_and_name_a_bad_one():
    import argparse

    from rlbench.core.address import cpu_list, cpu_text

    assert cpu_list("0-3") == [0, 1, 2, 3] and cpu_list("0,2,5-6") == [0, 2, 5, 6] and cpu_list("4") == [4]
    assert cpu_text(range(2, 5)) == "2,3,4" and cpu_list(cpu_text([1, 7])) == [1, 7]
    for bad in ("", "a", "1-x", "-1", "0,,2"):
        with pytest.raises(argparse.ArgumentTypeError, match="allowed: CPU numbers"):
            cpu_list(bad)


def test_only_the_env_threads_get_the_lower_priority():
    """The pool the env family starts is niced; the calling thread and gRPC's threads are not."""
    import threading

    from rlbench.remote.actor_loop import _thread_ids, lower_priority

    if not _thread_ids():
        pytest.skip("no /proc/self/task here: per-thread nice is Linux's")
    ready, release = threading.Barrier(3), threading.Event()

    def hold(name):
        with open("/proc/thread-self/comm", "w") as f:  # as the pool's C++ and gRPC's threads are named
            f.write(name)
        ready.wait()
        release.wait()

    before = _thread_ids()
    workers = [threading.Thread(target=hold, args=(name,)) for name in ("env-pool", "grpc_global_timer")]
    for w in workers:
        w.start()
    ready.wait()
    try:
        new = _thread_ids() - before
        lower_priority(new, 5)
        nice = {Path(f"/proc/self/task/{t}/comm").read_text().strip(): os.getpriority(os.PRIO_PROCESS, t) for t in new}
        base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert nice == {"env-pool": 5, "grpc_global_tim": base} and base < 5  # comm keeps 15 characters
    finally:
        release.set()
        for w in workers:
            w.join()


class _Envs:
    """Two CartPole-shaped envs that count the actions they are sent."""

    def __init__(self):
        self.sent = 0

    def _batch(self):
        from rlbench.envs.vector import StepBatch

        return StepBatch(np.arange(2), np.zeros((2, 4), np.float32), np.zeros(2, np.float32), np.zeros(2, bool))

    def reset(self, seed):
        return self._batch()

    def send(self, actions):
        assert actions.shape == (2,)
        self.sent += 1

    def recv(self):
        return self._batch()


class _Call:
    """An actor's side of the stream: answers `answers` Steps, then ends the call as the job
    does when it closes (reads give EOF), or, with `ended_before_write`, makes the next write
    find the call already over (gRPC's InvalidStateError)."""

    def __init__(self, answers: int, ended_before_write: bool = False):
        self.answers, self.ended_before_write, self.steps = answers, ended_before_write, 0

    async def write(self, msg):
        import asyncio

        if msg.WhichOneof("kind") == "step":
            if self.steps == self.answers and self.ended_before_write:
                raise asyncio.InvalidStateError("the RPC has already finished")
            self.steps += 1

    async def read(self):
        import grpc

        if self.steps > self.answers:
            return grpc.aio.EOF
        return pb.ServerMessage(actions=pb.Actions(actions=[1, 0]))


@pytest.mark.parametrize("ended_before_write", [False, True])
def test_the_actor_loop_ends_quietly_when_the_job_ends_the_call_between_its_steps(ended_before_write):
    import asyncio

    from rlbench.remote.actor_loop import _Loop

    spec = env_spec(compose_job(["env=cartpole"], host=False).env)
    envs, call = _Envs(), _Call(3, ended_before_write)
    loop = _Loop(envs, spec, call, report_every_s=3600.0)
    asyncio.run(loop.run(seed=0))
    assert loop.steps == envs.sent == 3 and len(loop._rtts) == 3
    step_bytes = step_message(np.arange(2), np.zeros((2, 4), np.float32), np.zeros(2), np.zeros(2, bool)).ByteSize()
    assert loop.bytes_sent == call.steps * step_bytes  # a Step the ended call refused is not counted as sent


def test_the_actor_command_refuses_cpus_it_may_not_use(capsys):
    from rlbench.cli.actor import main

    assert main(["--server", "unix:/nonexistent/actors.sock", "--envs", "1", "--cpus", "4096", "env=cartpole"]) == 2
    assert "--cpus=4096: allowed: CPUs this process may use" in capsys.readouterr().err
