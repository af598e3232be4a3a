"""The generic roles with small fake inputs: central inference's per-env recurrent state, the
learners' burn-in reproducing what inference saw, the runner's stop and error paths, the
V-trace FIFO, the actors' flow control and the learner loop."""

from __future__ import annotations

import logging
import threading
import time
import types

import numpy as np
import pytest
import torch

from rlbench.algo.common.batches import rebuild_obs, to_time_major
from rlbench.algo.common.unrolls import Sequences, UnrollAssembler
from rlbench.algo.r2d2.acting import EpsilonGreedy
from rlbench.algo.r2d2.config import NetworkConfig as R2D2NetworkConfig
from rlbench.algo.r2d2.config import Schema as R2D2Schema
from rlbench.algo.r2d2.network import R2D2Net
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import unroll_layout
from rlbench.algo.vtrace.acting import SoftmaxSample
from rlbench.algo.vtrace.config import NetworkConfig as VTraceNetworkConfig
from rlbench.algo.vtrace.network import VTraceNet
from rlbench.algo.vtrace.queue import UnrollQueue
from rlbench.core.signals import JobPruned
from rlbench.envs.vector import StepBatch
from rlbench.prepare.plan import plan_job
from rlbench.prepare.validate import validate
from rlbench.roles import runner
from rlbench.roles.actors import ActorRole
from rlbench.roles.contract import SharedNet
from rlbench.roles.inference import InferenceServer
from rlbench.roles.learner import LearnerLoop
from rlbench.roles.runner import RoleFailed, run_roles
from rlbench.telemetry.timing import OpTimer
from rlbench.train.trainer import build_trainer
from tests.conftest import wait_until

WAIT_S = 5.0  # upper bound for any Event wait; the awaited things happen in milliseconds


# --- central inference: the per-env recurrent state -----------------------------------------


class _AddNet(torch.nn.Module):
    """A recurrent net that ignores `done` (so only inference can zero the state it uses):
    h' = h + obs, c' = c + 2 obs (c is [B, 1, 2]: a state tensor of more than two dims),
    out = 10 h' + c'[:, 0]."""

    def initial_state(self, n: int, device=None) -> tuple:
        return torch.zeros(n, 2, device=device), torch.zeros(n, 1, 2, device=device)

    def forward(self, obs, prev_action, reward, done, state):
        h, c = state
        outs = []
        for t in range(done.shape[0]):
            h, c = h + obs[t], c + 2 * obs[t][:, None]
            outs.append(10 * h + c[:, 0])
        return torch.stack(outs), (h, c)


class _RecordingPolicy:
    """ActingPolicy that records what inference hands it; always action 0."""

    def __init__(self, net, unrolls):
        self.shared, self.unrolls = SharedNet(net), unrolls
        self.outs: list[tuple[np.ndarray, np.ndarray]] = []
        self.stored: list[Sequences] = []

    def initial_state(self, n: int, device) -> tuple:
        return self.shared.net.initial_state(n, device)

    def act(self, ids, out):
        self.outs.append((ids.copy(), out.copy()))
        return np.zeros(len(ids), np.int64)

    def store(self, seqs, timer) -> None:
        self.stored.append(seqs.owned())


def _add_net_server():
    """3 training envs, unrolls of 2 steps without overlap, and non-zero stored states:
    env 0 h=[5, 5] c=[[1, 1]], env 1 h=[3, 4] c=[[2, 2]], env 2 h=[7, 7] c=[[9, 9]]."""
    asm = UnrollAssembler(3, 2, 0, (2,), np.float32, 2, 4)
    policy = _RecordingPolicy(_AddNet(), asm)
    server = InferenceServer(policy, "cpu", 3, actors=3)
    server.state[0][:] = torch.tensor([[5.0, 5.0], [3.0, 4.0], [7.0, 7.0]])
    server.state[1][:] = torch.tensor([[[1.0, 1.0]], [[2.0, 2.0]], [[9.0, 9.0]]])
    return server, policy


def _step(ids, obs, done) -> StepBatch:
    return StepBatch(
        np.asarray(ids), np.asarray(obs, np.float32), np.zeros(len(ids), np.float32), np.asarray(done, bool)
    )


# env 1 continues with obs [1, 1]; env 0 starts an episode with obs [1, 2]; env 2 does not step
_FIRST = _step([1, 0], [[1, 1], [1, 2]], [False, True])


def test_done_zeroes_the_state_the_forward_uses_and_only_for_that_env():
    server, policy = _add_net_server()
    server.step(_FIRST)
    ids, out = policy.outs[0]
    np.testing.assert_array_equal(ids, [1, 0])
    # env 1 from its stored state: h'=[4, 5], c'=[[4, 4]]; env 0 from zeros: h'=[1, 2], c'=[[2, 4]]
    np.testing.assert_array_equal(out, [[44.0, 54.0], [12.0, 24.0]])


def test_state_after_a_step_is_the_networks_returned_state_per_env_id():
    server, _ = _add_net_server()
    server.step(_FIRST)
    h, c = server.state
    np.testing.assert_array_equal(h.numpy(), [[1, 2], [4, 5], [7, 7]])  # env 2 untouched
    np.testing.assert_array_equal(c.numpy(), [[[2, 4]], [[4, 4]], [[9, 9]]])
    server.step(_step([2, 0], [[1, 0], [0, 1]], [False, False]))
    h, c = server.state
    np.testing.assert_array_equal(h.numpy(), [[1, 3], [4, 5], [8, 7]])  # env 1 untouched now
    np.testing.assert_array_equal(c.numpy(), [[[2, 6]], [[4, 4]], [[11, 9]]])


def test_only_a_step_where_an_unroll_starts_moves_states_to_the_host():
    server, _ = _add_net_server()
    server.step(_FIRST)  # envs 1 and 0 are one step into their unrolls of 2; env 2 has not stepped

    def start_states(ids):
        ids = np.asarray(ids)
        return server._unroll_start_states(ids, ids < 3, tuple(s[torch.as_tensor(ids)] for s in server.state))

    assert start_states([0, 1]) is None  # neither starts one: nothing crosses
    np.testing.assert_array_equal(start_states([2, 0]), [[7, 7, 9, 9]])  # env 2 starts one: its (h, c) alone


def test_an_unroll_starting_at_a_done_stores_the_zero_state():
    server, policy = _add_net_server()
    server.step(_FIRST)
    assert policy.stored == []
    server.step(_step([0, 1], [[0, 0], [0, 0]], [False, False]))  # completes both 2-step unrolls
    assert len(policy.stored) == 1
    seqs = policy.stored[0]
    np.testing.assert_array_equal(seqs.done[:, 0], [True, False])  # rows: env 0, env 1
    np.testing.assert_array_equal(seqs.state, [[0, 0, 0, 0], [3, 4, 2, 2]])  # flattened (h, c) before step 0
    np.testing.assert_array_equal(seqs.agent_out[:, 0], [[12, 24], [44, 54]])


# --- the learners' burn-in from the stored state reproduces what inference saw --------------

NUM_TRAIN, NUM_EVAL, OBS, ACTIONS = 3, 1, (4,), 3


def _drive(server: InferenceServer, steps: int, seed: int) -> int:
    """Random subsets of the envs, in random order, random observations and rewards, some
    episode starts (every env starts with one). Returns how many steps had done inside."""
    rng = np.random.default_rng(seed)
    n = NUM_TRAIN + NUM_EVAL
    started = np.zeros(n, bool)
    dones = 0
    for _ in range(steps):
        ids = rng.permutation(n)[: rng.integers(1, n + 1)]
        done = (rng.random(len(ids)) < 0.15) | ~started[ids]
        started[ids] = True
        dones += int(done.sum())
        server.step(
            StepBatch(
                ids,
                rng.normal(size=(len(ids), *OBS)).astype(np.float32),
                rng.normal(size=len(ids)).astype(np.float32),
                done,
            )
        )
    return dones


@pytest.fixture
def one_torch_thread():
    """Tiny nets: intra-op threads only contend (an LSTM step takes ~10x longer on 2 busy cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _learner_batch(seqs: Sequences, extra=()) -> dict:
    """What the learners feed their networks: time-major tensors, observations rebuilt."""
    b = to_time_major(seqs, "cpu", extra=extra)
    rebuild_obs(b)
    return b


@pytest.mark.parametrize("pad", [0, 3], ids=["no pad", "first unroll zero-padded over the burn-in (SEED)"])
def test_r2d2_stores_the_state_before_step_0_so_its_burn_in_reproduces_inference_q_values(one_torch_thread, pad):
    """rlbench's alignment (the R2D2 paper's): a sequence stores the recurrent state inference
    held before its step 0, and the learner burns in from it over steps 0..burn_in - 1, so with
    the acting weights it computes the Q values inference computed. SEED RL stores the state
    held before step burn_in and burns in from step 0 with it (agents/r2d2/learner.py:362-369,
    826-830): the last assertion shows that alignment does not give inference's Q values.
    docs/r2d2.md, "Decisions where rlbench differs"."""
    algo = R2D2Schema(
        burn_in=3,
        seq_len=4,
        n_step=2,
        network=R2D2NetworkConfig(torso="mlp", mlp_hidden=8, lstm_hidden=8, head_hidden=8),
    )
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    torch.manual_seed(1)
    acting = R2D2Net(OBS, ACTIONS, algo.network)
    asm = UnrollAssembler(NUM_TRAIN, length, overlap, OBS, np.float32, ACTIONS, 16, pad=pad)
    replay = SequenceReplay.for_shapes(200, length, OBS, np.float32, ACTIONS, 16, alpha=0.9, beta=0.6, seed=0)
    eps = np.concatenate([np.full(NUM_TRAIN, 0.5), np.zeros(NUM_EVAL)])
    policy = EpsilonGreedy(SharedNet(acting), asm, replay, eps, algo, seed=0)
    _drive(InferenceServer(policy, "cpu", NUM_TRAIN + NUM_EVAL, NUM_TRAIN), 80, seed=2)

    rows = Sequences(**{f: replay._store[f][: replay.size].copy() for f in replay._store})
    assert replay.size >= 10
    assert np.abs(rows.state).sum(axis=1).min() == 0 < np.abs(rows.state).sum(axis=1).max()  # both kinds
    assert rows.done[:, 1:].any()  # episode starts inside sequences
    if pad:  # each actor's first unroll: pad zero steps (no episode start among them), then its reset
        zeros = (np.abs(rows.frames[:, :pad]).sum(axis=(1, 2)) == 0) & (rows.state == 0).all(1)
        assert (zeros & rows.done[:, pad] & ~rows.done[:, :pad].any(1)).sum() == NUM_TRAIN
    net = R2D2Net(OBS, ACTIONS, algo.network)  # the learner's copy, as build() makes it
    net.load_state_dict(acting.state_dict())
    b = _learner_batch(rows)
    bi = algo.burn_in
    inputs = [b["obs"], b["prev_action"], b["reward"], b["done"]]
    with torch.no_grad():  # as R2D2Learner._loss: burn-in from the stored state, then the rest
        state = net.unflatten_state(b["state"])
        burnt = net(*[x[:bi] for x in inputs], state)[1]
        q = net(*[x[bi:] for x in inputs], burnt)[0]  # [seq_len + 1, B, A]
    seen = torch.from_numpy(rows.agent_out).transpose(0, 1)[bi:]
    np.testing.assert_allclose(q.numpy(), seen.numpy(), atol=1e-5, rtol=0)  # (torch's imports sympy: 2 s)
    with torch.no_grad():  # SEED's: the state before step burn_in (here `burnt`), burnt in from step 0
        seed_q = net(*[x[bi:] for x in inputs], net(*[x[:bi] for x in inputs], burnt)[1])[0]
    assert (seed_q - seen).abs().max() > 1e-3


def test_vtrace_unroll_from_the_stored_state_reproduces_the_behaviour_logits(one_torch_thread):
    unroll_length = 5
    cfg = VTraceNetworkConfig(torso="mlp", mlp_hidden=8, lstm_hidden=8)
    torch.manual_seed(3)
    acting = VTraceNet(OBS, ACTIONS, cfg)
    asm = UnrollAssembler(NUM_TRAIN, unroll_length + 1, 1, OBS, np.float32, ACTIONS, 2 * cfg.lstm_hidden)
    queue = UnrollQueue(capacity=1000)
    policy = SoftmaxSample(SharedNet(acting), asm, queue, NUM_TRAIN, eval_epsilon=0.0, seed=0)
    _drive(InferenceServer(policy, "cpu", NUM_TRAIN + NUM_EVAL, NUM_TRAIN), 60, seed=4)

    seqs, versions = queue.take(queue.size)
    assert len(seqs) >= 10 and (versions == 0).all()
    assert np.abs(seqs.state).sum(axis=1).max() > 0 and seqs.done[:, 1:].any()  # carried state, starts inside
    net = VTraceNet(OBS, ACTIONS, cfg)
    net.load_state_dict(acting.state_dict())
    b = _learner_batch(seqs, extra=("agent_out",))
    with torch.no_grad():  # as VTraceLearner._loss
        logits = net.unroll(b["obs"], b["prev_action"], b["reward"], b["done"], net.unflatten_state(b["state"]))[0]
    np.testing.assert_allclose(logits.numpy(), b["agent_out"].numpy(), atol=1e-5, rtol=0)


# --- the runner: stop and error paths ---------------------------------------------------------


class _WaitingRole:
    """Runs until `stop` (or WAIT_S); records whether it saw stop and that it returned."""

    def __init__(self, name: str):
        self.name, self.timer = name, OpTimer(name)
        self.started, self.returned = threading.Event(), threading.Event()
        self.saw_stop = None

    def run(self, stop: threading.Event) -> None:
        self.started.set()
        self.saw_stop = stop.wait(WAIT_S)
        self.returned.set()


class _RaisingRole:
    """Raises once the other roles are running."""

    name = "bad"

    def __init__(self, others):
        self.timer, self.others = OpTimer(self.name), others

    def run(self, stop: threading.Event) -> None:
        assert all(o.started.wait(WAIT_S) for o in self.others)
        raise ValueError("boom")


class _TimedRole:
    """Returns on its own after `seconds` (a wait on an Event nobody sets)."""

    def __init__(self, name: str, seconds: float):
        self.name, self.timer, self.seconds = name, OpTimer(name), seconds
        self.stop_seen = None

    def run(self, stop: threading.Event) -> None:
        threading.Event().wait(self.seconds)
        self.stop_seen = stop.is_set()


class _FakeTrainer:
    actors = types.SimpleNamespace(frames=0)  # what run_roles reads: trainer.actors.frames

    def __init__(self, roles):
        self._roles = roles
        self.final_calls: list[tuple[float, dict]] = []

    def roles(self):
        return self._roles

    def step_metrics(self, window, now) -> dict:
        return {"fps": 0.0}

    def updates(self) -> int:
        return 0

    def measured(self, runtime, walls, started=None) -> dict:
        self.final_calls.append((runtime, walls))
        return {"runtime_s": runtime, "walls": walls}


def _run(trainer, **kw) -> dict:
    return run_roles(trainer, lambda metrics, frames: None, tick_s=0.01, **kw)


def test_runner_reraises_a_role_failure_after_stopping_and_joining_the_others():
    others = [_WaitingRole("actors"), _WaitingRole("learner")]
    trainer = _FakeTrainer([*others, _RaisingRole(others)])
    with pytest.raises(RoleFailed) as caught:
        _run(trainer)
    assert isinstance(caught.value.__cause__, ValueError) and str(caught.value.__cause__) == "boom"
    assert all(o.returned.is_set() for o in others)  # joined: their run() had returned
    assert [o.saw_stop for o in others] == [True, True]  # they left because stop was set
    assert trainer.final_calls == []


def test_runner_returns_what_the_roles_measured_with_each_roles_wall_time():
    fast, slow = _TimedRole("actors", 0.0), _TimedRole("learner", 0.2)
    trainer = _FakeTrainer([fast, slow])
    final = _run(trainer)
    assert len(trainer.final_calls) == 1
    runtime, walls = trainer.final_calls[0]
    assert final == {"runtime_s": runtime, "walls": walls}
    assert set(walls) == {"actors", "learner"}
    assert walls["actors"] < 0.2 <= walls["learner"] <= runtime
    assert [fast.stop_seen, slow.stop_seen] == [False, False]  # they finished on their own


class _ReleasedRole:
    """Returns when `release` is set (by the test's tick callback)."""

    def __init__(self, name: str):
        self.name, self.timer, self.release = name, OpTimer(name), threading.Event()

    def run(self, stop: threading.Event) -> None:
        assert self.release.wait(WAIT_S)


def test_runner_logs_no_tick_once_every_role_has_finished():
    """A tick after the roles end would sample an idle process (cpu_util 0 as the run's last value)."""
    role = _ReleasedRole("learner")
    ticks = []

    def log(metrics, frames):
        ticks.append(role.release.is_set())
        role.release.set()  # the role finishes during the next window

    run_roles(_FakeTrainer([role]), log, tick_s=0.2)
    assert ticks == [False]


def test_runner_ticks_carry_the_seconds_since_the_task_started_and_their_whole_second_as_step():
    """The step is the tick's whole seconds and `task_elapsed_s` the same seconds unrounded: the
    chart view draws the window/* series over it (rlbench/tracking/views.py window_cards)."""
    ticks = []
    run_roles(
        _FakeTrainer([_TimedRole("actors", 1.6)]), lambda metrics, step: ticks.append((metrics, step)), tick_s=0.5
    )
    assert len(ticks) >= 1 and [step for _, step in ticks] == sorted(step for _, step in ticks)
    for metrics, step in ticks:
        assert metrics["fps"] == 0.0 and step == int(metrics["task_elapsed_s"]) and metrics["task_elapsed_s"] >= 0.5


def test_windowed_fps_is_logged_only_for_windows_the_actors_stepped_throughout():
    """The window the envs' first reset ends in counted its reset as stepping time: a loaded CI
    host logged window/fps 0 there (the reset ended just before the tick). Its rate is over the
    part after the reset, logged where that is at least half the window; none once the actors
    are done."""
    from rlbench.roles.runner import Window
    from rlbench.train.trainer import Trainer

    actors = types.SimpleNamespace(
        steps=0, frameskip=4, frames=0, stepping_since=None, done=threading.Event(), fault_metrics=dict
    )
    trainer = types.SimpleNamespace(
        actors=actors,
        learner=None,
        updates=lambda: 0,
        parts=types.SimpleNamespace(metrics=lambda final: {}),
        inference=types.SimpleNamespace(stats=dict),
    )

    def fps(window, now, stepping_since, steps):
        actors.stepping_since, actors.steps = stepping_since, steps
        return Trainer.step_metrics(trainer, window, now).get("window/fps")

    window = Window(0.0)
    logged = [
        fps(window, now, since, steps)
        for now, since, steps in ((1.0, None, 0), (2.0, 1.6, 0), (3.0, 1.6, 50), (4.0, 1.6, 150))
    ]
    assert logged == [None, None, 200.0, 400.0]  # the reset ended at 1.6 s: 0.4 s of its window stepped
    assert fps(Window(0.0), 1.0, 0.25, 30) == pytest.approx(30 * 4 / 0.75)  # 0.75 s of it stepped
    actors.done.set()
    assert fps(window, 5.0, 1.6, 250) is None


def test_runner_runtime_is_when_the_last_role_ended_not_the_next_tick():
    """runtime_s once waited for the next tick: a 0.05 s task measured tick_s (5 s) here."""
    trainer = _FakeTrainer([_TimedRole("actors", 0.0), _TimedRole("learner", 0.05)])
    t0 = time.perf_counter()
    run_roles(trainer, lambda metrics, frames: None, tick_s=5.0)
    returned_after = time.perf_counter() - t0
    runtime, walls = trainer.final_calls[0]
    assert walls["learner"] <= runtime < walls["learner"] + 0.5  # the learner's end, not a tick later
    assert returned_after < 2.5  # woke when the roles ended (half the tick)


def test_runner_times_out_and_stops_every_role():
    roles = [_WaitingRole("actors"), _WaitingRole("learner")]
    trainer = _FakeTrainer(roles)
    with pytest.raises(TimeoutError, match="max_runtime_s"):
        _run(trainer, max_runtime_s=0.05)
    assert all(r.returned.is_set() for r in roles)
    assert [r.saw_stop for r in roles] == [True, True]
    assert trainer.final_calls == []


def test_a_stopped_runner_waits_role_stop_s_for_a_busy_role_and_names_it(monkeypatch, caplog):
    """A role inside an operation it cannot leave (ale-py resetting its emulators: seconds on a
    loaded host) once held a SIGTERM's stop until it returned (the join waited up to 120 s)."""
    monkeypatch.setattr(runner, "ROLE_STOP_S", 0.3)
    busy, waiting = _TimedRole("actors", 3.0), _WaitingRole("learner")

    def stopped(metrics, step):
        raise KeyboardInterrupt  # as JobKilled does

    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), caplog.at_level(logging.WARNING, logger=runner.__name__):
        run_roles(_FakeTrainer([busy, waiting]), stopped, tick_s=0.01)
    assert time.perf_counter() - t0 < 1.5
    assert waiting.returned.is_set() and busy.stop_seen is None  # the busy one still runs
    assert "role 'actors' (in threading.py:" in caplog.text and "had not stopped 0.3 s after the stop" in caplog.text


@pytest.mark.parametrize("end", ["pruned", "timeout"])
def test_a_runner_ended_otherwise_than_by_a_signal_waits_for_every_role(monkeypatch, end):
    """A pruned trial or a job past its time limit may be followed by the next job in this process
    (a search's): its roles must not run on beside it, so only a signal's stop is bounded."""
    monkeypatch.setattr(runner, "ROLE_STOP_S", 0.05)
    busy = _TimedRole("actors", 0.6)

    def pruned(metrics, step):
        raise JobPruned()

    with pytest.raises(JobPruned if end == "pruned" else TimeoutError):
        run_roles(
            _FakeTrainer([busy, _WaitingRole("learner")]),
            pruned if end == "pruned" else lambda m, s: None,
            tick_s=0.01,
            max_runtime_s=0.0 if end == "pruned" else 0.05,
        )
    assert busy.stop_seen is True  # it returned (after the stop) before run_roles did


# --- V-trace's FIFO of unrolls ----------------------------------------------------------------


def _unrolls(first: int, k: int, length: int = 3) -> Sequences:
    """k unrolls numbered first .. first + k - 1; every field carries the unroll's number."""
    n = np.arange(first, first + k)
    per_step = np.repeat(n[:, None], length, axis=1)
    return Sequences(
        frames=per_step[..., None].astype(np.float32),
        head=np.zeros((k, 0, 1), np.float32),
        action=per_step.copy(),
        prev_action=per_step + 1,
        reward=per_step.astype(np.float32),
        done=per_step % 2 == 0,
        agent_out=np.repeat(per_step[..., None], 2, axis=2).astype(np.float32),
        state=np.repeat(n[:, None], 4, axis=1).astype(np.float32),
    )


def test_unroll_queue_takes_the_oldest_in_order_across_chunks_with_their_versions():
    q = UnrollQueue(capacity=10)
    q.put(_unrolls(0, 2), version=0)
    q.put(_unrolls(2, 3), version=1)
    q.put(_unrolls(5, 1), version=4)
    assert (q.size, q.put_total) == (6, 6)
    seqs, versions = q.take(3)  # a whole chunk and the first row of the next
    np.testing.assert_array_equal(seqs.action[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(versions, [0, 0, 1])
    want = _unrolls(0, 3)
    for f in ("frames", "head", "action", "prev_action", "reward", "done", "agent_out", "state"):
        np.testing.assert_array_equal(getattr(seqs, f), getattr(want, f), err_msg=f)
    seqs, versions = q.take(3)  # the split chunk's rest, then the next chunk
    np.testing.assert_array_equal(seqs.state[:, 0], [3, 4, 5])
    np.testing.assert_array_equal(versions, [1, 1, 4])
    assert (q.size, q.put_total) == (0, 6)


def test_unroll_queue_keeps_its_own_copy_of_what_was_put():
    q = UnrollQueue(capacity=10)
    seqs = _unrolls(0, 2)
    q.put(seqs, version=0)
    seqs.action[:] = -1  # the assembler reuses its rings after put
    np.testing.assert_array_equal(q.take(2)[0].action[:, 0], [0, 1])


def test_unroll_queue_take_more_than_it_holds_raises_and_keeps_the_unrolls():
    q = UnrollQueue(capacity=10)
    q.put(_unrolls(0, 2), version=0)
    with pytest.raises(RuntimeError, match="take"):
        q.take(3)
    assert q.size == 2
    np.testing.assert_array_equal(q.take(2)[0].action[:, 0], [0, 1])


def test_unroll_queue_without_keep_counts_and_drops():
    q = UnrollQueue(capacity=1, keep=False)
    q.put(_unrolls(0, 3), version=0)
    q.put(_unrolls(3, 2), version=1)
    assert (q.size, q.put_total, q.full()) == (0, 5, False)
    with pytest.raises(RuntimeError):
        q.take(1)


def test_unroll_queue_rings_after_each_put_it_keeps():
    q, rung = UnrollQueue(capacity=10), []
    q.on_put = lambda: rung.append(q.size)  # VTraceLearner sets its wakeup's ring
    q.put(_unrolls(0, 2), version=0)
    q.put(_unrolls(2, 1), version=0)
    assert rung == [2, 3]


def test_unroll_queue_is_full_at_capacity():
    q = UnrollQueue(capacity=3)
    q.put(_unrolls(0, 2), version=0)
    assert not q.full()
    q.put(_unrolls(2, 1), version=0)
    assert q.full()


# --- the actors' flow control -----------------------------------------------------------------


class _FakeEnv:
    frameskip = 1

    def __init__(self):
        self.sent = 0

    def reset(self, seed: int) -> StepBatch:
        return StepBatch(np.arange(2), np.zeros((2, 1), np.float32), np.zeros(2, np.float32), np.ones(2, bool))

    def send(self, actions) -> None:
        self.sent += 1

    def recv(self) -> StepBatch:
        return StepBatch(np.arange(2), np.zeros((2, 1), np.float32), np.ones(2, np.float32), np.zeros(2, bool))


class _FakeInference:
    def __init__(self, notify_after: int):
        self.steps, self.notify_after = 0, notify_after
        self.stepped = threading.Event()

    def step(self, batch) -> np.ndarray:
        self.steps += 1
        if self.steps >= self.notify_after:
            self.stepped.set()
        return np.zeros(len(batch.env_ids), np.int64)


def test_actors_wait_in_rate_limited_and_do_not_step_while_may_step_is_false():
    env, inference = _FakeEnv(), _FakeInference(notify_after=3)
    role = ActorRole(env, inference, actors=2, frame_target=10**9, seed=0)
    gate, polled = threading.Event(), threading.Event()
    polls = []

    def may_step() -> bool:
        polls.append(1)
        if len(polls) >= 4:
            polled.set()
        return gate.is_set()

    role.may_step = may_step
    stop = threading.Event()
    thread = threading.Thread(target=role.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert polled.wait(WAIT_S)
        # 4 refusals so far: 3 finished waits (at least), no step, no inference
        assert (inference.steps, env.sent, role.steps) == (0, 0, 0)
        assert role.timer.counts["rate_limited"] >= 3
        assert role.timer.totals["rate_limited"] >= 0.0025  # each wait is stop.wait(0.001)
        gate.set()
        assert inference.stepped.wait(WAIT_S)
    finally:
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and role.done.is_set()
    assert env.sent == inference.steps >= 3 and role.steps == 2 * env.sent


# --- the generic learner loop -----------------------------------------------------------------


class _Learner(LearnerLoop):
    def __init__(
        self,
        update_target: int,
        data: threading.Event | None = None,
        exhausted_after: int | None = None,
        fail: bool = False,
    ):
        super().__init__(update_target, threading.Event())
        self.data, self.exhausted_after, self.fail = data, exhausted_after, fail
        self.polls = 0
        self.polled = threading.Event()

    def may_update(self) -> bool:
        self.polls += 1
        if self.polls >= 2:  # the loop's own look, then the wakeup's before it sleeps
            self.polled.set()
        return self.data is None or self.data.is_set()

    def give(self) -> None:
        """What a producer does: the data, then the ring."""
        self.data.set()
        self.wakeup.ring()

    def update(self) -> float:
        if self.fail:
            raise ValueError("update failed")
        self.updates += 1
        return 0.5 * self.updates

    def exhausted(self) -> bool:
        return self.exhausted_after is not None and self.updates >= self.exhausted_after


def _start(learner: LearnerLoop, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=learner.run, args=(stop,), daemon=True)
    thread.start()
    return thread


def test_an_idle_learner_blocks_in_op_wait_and_its_data_wakes_it_at_once():
    """SEED's learner blocks in dequeue_many; a learner that polled (every 5 ms) would look
    at may_update() about 60 times in the idle 0.3 s, and would not sleep 60 s on a ring."""
    data, stop = threading.Event(), threading.Event()
    learner = _Learner(update_target=3, data=data)
    learner.stop_check_s = 60.0  # only a ring can wake it within the test
    thread = _start(learner, stop)
    try:
        assert learner.polled.wait(WAIT_S)
        time.sleep(0.3)
        assert (learner.polls, learner.updates, learner.timer.open[0]) == (2, 0, "wait")  # asleep, one wait
        learner.wakeup.ring()  # a ring without data: one more look, back to sleep
        wait_until(lambda: learner.polls == 3, WAIT_S, "the rung learner's look")
        time.sleep(0.05)
        assert learner.polls == 3 and not learner.finished.is_set()
        t0 = time.perf_counter()
        learner.give()
        assert learner.finished.wait(WAIT_S)
        assert time.perf_counter() - t0 < 2.0  # the ring, not the 60 s check
    finally:
        stop.set()
        learner.wakeup.ring()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert (learner.updates, learner.last_loss) == (3, 1.5)
    assert learner.timer.counts["wait"] == 1 and learner.timer.totals["wait"] >= 0.3  # the idle time is op wait


def test_a_blocked_learner_sees_stop_within_its_check():
    stop = threading.Event()
    learner = _Learner(update_target=3, data=threading.Event())
    learner.stop_check_s = 0.05
    thread = _start(learner, stop)
    assert learner.polled.wait(WAIT_S)
    stop.set()  # nothing rings
    thread.join(WAIT_S)
    assert not thread.is_alive() and learner.finished.is_set() and learner.updates == 0


def test_the_actors_end_wakes_a_learner_that_waits_for_it():
    """The trainer hands the actors the learner's ring (build_trainer): a learner that may
    update once the actors are done (R2D2 takes the queue's rest) does not wait for a poll."""
    stop = threading.Event()
    learner = _Learner(update_target=1, data=threading.Event())
    learner.stop_check_s = 60.0
    learner.may_update = lambda: learner.actors_done.is_set()
    role = ActorRole(
        _FakeEnv(),
        _FakeInference(notify_after=10**9),
        actors=2,
        frame_target=6,
        seed=0,
        done=learner.actors_done,
        on_done=learner.wakeup.ring,
    )
    thread = _start(learner, stop)
    try:
        wait_until(lambda: learner.timer.open is not None, WAIT_S, "the learner asleep in op wait")
        role.run(threading.Event())
        assert learner.finished.wait(2.0) and learner.updates == 1
    finally:
        stop.set()
        learner.wakeup.ring()
        thread.join(WAIT_S)


@pytest.mark.parametrize(
    "overrides, source",
    [
        (["algo=r2d2_vector"], "queue"),  # SEED's unroll queue
        (["algo=r2d2_vector", "algo.coupling=free_running"], "replay"),
        (["algo=vtrace_vector"], "queue"),
    ],
)
def test_a_jobs_learner_is_rung_by_what_it_waits_for(compose_cfg, overrides, source):
    """build_trainer's wiring: the learner's data (its queue, or replay under the free couplings)
    and the actors' end ring its wakeup."""
    conf = validate(compose_cfg(["env=cartpole", "actors=2", "eval_envs=0", "telemetry.enabled=false", *overrides]))
    trainer = build_trainer(plan_job(conf))
    try:
        learner = trainer.learner
        ring = learner.wakeup.ring
        assert trainer.actors.on_done == ring
        assert (learner.queue.on_put if source == "queue" else learner.replay.on_insert) == ring
    finally:
        trainer.close()


def test_build_trainer_returns_once_the_replay_is_zeroed(compose_cfg, monkeypatch):
    """R2D2's replay is zeroed beside the envs' making (a thread of its own), and build_trainer
    waits for it: the actors' first step comes after all of the job's start-up."""
    from rlbench.algo.r2d2 import replay as module

    zero_all, done = module._zero_all, []

    def slow(arrays):
        threading.Event().wait(0.3)
        zero_all(arrays)
        done.append(True)

    monkeypatch.setattr(module, "_zero_all", slow)
    conf = validate(compose_cfg(["env=cartpole", "actors=2", "eval_envs=0", "telemetry.enabled=false"]))
    trainer = build_trainer(plan_job(conf))
    try:
        assert done == [True] and trainer.learner.replay._zeroing is None
    finally:
        trainer.close()


def test_a_job_gets_new_envs_then_the_ones_a_job_before_left_and_says_which(compose_cfg):
    from rlbench.envs.shelf import SHELF
    from rlbench.train.trainer import job_env

    plan = plan_job(validate(compose_cfg(["env=cartpole", "actors=2", "eval_envs=0", "telemetry.enabled=false"])))
    SHELF.clear()
    env, key, got = job_env(plan)
    assert got.made and got.seconds > 0
    SHELF.shelve(key, env, 2)
    again, _, got = job_env(plan)
    try:
        assert again is env and not got.made and got.seconds >= 0
    finally:
        again.close()


def test_build_trainer_closes_its_env_when_the_parts_fail_to_be_ready(compose_cfg, monkeypatch):
    """A zeroing that failed is raised by build_trainer, and the env it made is closed, not left
    running with no Trainer to close it."""
    from rlbench.algo.r2d2 import replay as module
    from rlbench.train import trainer as wiring

    def broken(arrays):
        raise MemoryError("no pages")

    closed, take = [], wiring.SHELF.take

    def taking(key, make):
        env = take(key, make)
        close = env.close
        env.close = lambda: (closed.append(True), close())
        return env

    monkeypatch.setattr(module, "_zero_all", broken)
    monkeypatch.setattr(wiring.SHELF, "take", taking)
    conf = validate(compose_cfg(["env=cartpole", "actors=2", "eval_envs=0", "telemetry.enabled=false"]))
    with pytest.raises(MemoryError, match="no pages"):
        build_trainer(plan_job(conf))
    assert closed == [True]


def test_learner_stops_at_its_update_target():
    learner = _Learner(update_target=4)
    learner.run(threading.Event())
    assert (learner.updates, learner.last_loss, learner.finished.is_set()) == (4, 2.0, True)
    assert "wait" not in learner.timer.counts


def test_learner_stops_when_exhausted():
    learner = _Learner(update_target=100, exhausted_after=2)
    learner.run(threading.Event())
    assert (learner.updates, learner.finished.is_set()) == (2, True)


def test_learner_stops_at_once_when_stop_is_set():
    stop = threading.Event()
    stop.set()
    learner = _Learner(update_target=100)
    learner.run(stop)
    assert (learner.updates, learner.finished.is_set()) == (0, True)


def test_learner_sets_finished_when_update_raises():
    learner = _Learner(update_target=5, fail=True)
    with pytest.raises(ValueError, match="update failed"):
        learner.run(threading.Event())
    assert learner.finished.is_set() and learner.updates == 0


def test_actors_step_on_past_the_frame_target_while_the_algorithm_needs_more_data():
    env, inference = _FakeEnv(), _FakeInference(notify_after=10**9)
    role = ActorRole(env, inference, actors=2, frame_target=6, seed=0)  # 3 steps of 2 envs
    asked = []
    role.more_data = lambda: (asked.append(role.frames) or len(asked)) <= 2  # two more steps, then done
    role.run(threading.Event())
    assert role.frames == 10 and asked == [6, 8, 10] and role.done.is_set()
    plain = ActorRole(_FakeEnv(), _FakeInference(notify_after=10**9), actors=2, frame_target=6, seed=0)
    plain.run(threading.Event())
    assert plain.frames == 6  # without the hook the frame target ends it
