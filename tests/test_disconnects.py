"""Actors that leave mid-job (issue 26, faults): central inference forgets their envs, so no half
sequence reaches replay or the learner, and the job counts the departures and the lost steps.

Fakes stand in for RemoteEnvs: a VectorEnv with `take_disconnected()` that drops a range of env
ids mid-run and later rejoins it (done=True first), as an actor process that dies and restarts."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from rlbench.algo.common.unrolls import Sequences, UnrollAssembler
from rlbench.algo.r2d2.sequences import unroll_layout
from rlbench.envs.vector import StepBatch
from rlbench.roles.actors import ActorRole
from rlbench.roles.inference import InferenceServer

BURN_IN, SEQ_LEN = 3, 5
R2D2 = dict(
    zip(("length", "overlap"), unroll_layout(BURN_IN, SEQ_LEN, None), strict=True), pad=BURN_IN
)  # 9 steps, overlap 4
VTRACE = {"length": 6, "overlap": 1, "pad": 0}  # unroll_length 5 + 1, as rlbench/algo/vtrace/build.py cuts them
LAYOUTS = pytest.mark.parametrize("layout", [R2D2, VTRACE], ids=["r2d2", "vtrace"])
STATE = 2  # floats of recurrent state per env


def _value(env: int, life: int, t: int) -> int:
    """A step's frame: never 0 (the pad's value), distinct per env, actor life and step."""
    return 1 + env * 100_000 + life * 10_000 + t


def _assembler(layout: dict, envs: int, stack: int = 2) -> UnrollAssembler:
    return UnrollAssembler(
        envs, layout["length"], layout["overlap"], (stack, 1), np.int32, 3, STATE, stack, pad=layout["pad"]
    )


class _Emitted:
    """A sink keeping each emitted row (owned) by the env its frames name."""

    def __init__(self):
        self.rows: dict[int, list[Sequences]] = {}

    def __call__(self, seqs: Sequences) -> None:
        owned = seqs.owned()
        for r in range(len(owned)):
            row = owned.rows(slice(r, r + 1))
            self.rows.setdefault(_env_of(row), []).append(row)

    def values(self, env: int) -> set[int]:
        return {int(v) for row in self.rows.get(env, []) for v in row.frames[0, :, 0] if v}


def _env_of(row: Sequences) -> int:
    return int(row.frames[0, :, 0].max() - 1) // 100_000


def _step(asm, sink, ids, t, life=0) -> None:
    """One step of envs `ids` (t, life: one per env or one for all): every field, the stack's older
    frame and the state name (env, life, t)."""
    ids = np.asarray(ids)
    vals = _value(ids, np.asarray(life), np.asarray(t))
    obs = np.stack([vals - 1, vals], axis=1)[:, :, None].astype(np.int32)  # [k, stack 2, 1]: older, newest
    need = asm.needs_state(ids)
    state = np.repeat(vals[:, None], STATE, 1).astype(np.float32)[need]
    asm.add(
        ids,
        obs,
        vals % 5,
        vals % 3,
        (vals % 7).astype(np.float32),
        vals % 11 == 0,
        np.repeat(vals[:, None], 3, 1).astype(np.float32),
        state,
        sink,
    )


def _same(a: Sequences, b: Sequences) -> bool:
    return all(
        np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
        for f in ("frames", "head", "action", "prev_action", "reward", "done", "agent_out", "state")
    )


@LAYOUTS
@pytest.mark.parametrize("before", [4, 11, 14])  # mid first sequence, mid a later one, at an emission
def test_a_dropped_env_emits_nothing_from_before_and_restarts_as_a_new_actor(layout, before):
    asm, sink = _assembler(layout, 3), _Emitted()
    for t in range(before):
        _step(asm, sink, [0, 1, 2], t)
    sent_before, emitted_before = sink.values(1), len(sink.rows.get(1, []))
    lost = asm.drop([1])
    for t in range(30):  # env 1's new life; the others go on
        _step(asm, sink, [0, 1, 2], [before + t, t, before + t], [0, 1, 0])

    received = {_value(1, 0, t) for t in range(before)}
    assert lost == len(received - sent_before)  # exact: what it sent that no sequence emitted
    assert sink.values(1) & received == sent_before  # no later sequence holds a step from before the drop
    after = sink.rows[1][emitted_before:]
    fresh, fresh_sink = _assembler(layout, 3), _Emitted()  # env 1 as a new actor, fed its new life alone
    for t in range(30):
        _step(fresh, fresh_sink, [1], t, 1)
    assert len(after) == len(fresh_sink.rows[1]) >= 2
    assert all(
        _same(a, b) for a, b in zip(after, fresh_sink.rows[1], strict=True)
    )  # pad, overlap, state, head as at start

    untouched, ref = _assembler(layout, 3), _Emitted()  # envs 0 and 2 as if nothing had happened
    for t in range(before + 30):
        _step(untouched, ref, [0, 2], t)
    for env in (0, 2):
        assert len(sink.rows[env]) == len(ref.rows[env])
        assert all(_same(a, b) for a, b in zip(sink.rows[env], ref.rows[env], strict=True))


def test_drop_counts_nothing_twice_and_refuses_an_id_out_of_range():
    asm, sink = _assembler(R2D2, 2), _Emitted()
    for t in range(3):
        _step(asm, sink, [0, 1], t)
    assert asm.drop([0, 0]) == 3 and asm.drop([0]) == 0  # dropped once; a fresh ring has lost nothing
    assert asm.drop([]) == 0
    with pytest.raises(ValueError, match=r"drop ids=\[2\]: allowed: actor ids in \[0, 2\)"):
        asm.drop([2])


# --- central inference: forget ------------------------------------------------------------------


class _ZeroNet(torch.nn.Module):
    """A recurrent net whose state is (h [B, 2], c [B, 1, 2]); out and new state: the state + 1."""

    def initial_state(self, n: int, device=None) -> tuple:
        return torch.zeros(n, 2, device=device), torch.zeros(n, 1, 2, device=device)

    def forward(self, obs, prev_action, reward, done, state):
        h, c = state
        return (h + 1)[None], (h + 1, c + 1)


class _Policy:
    """ActingPolicy over a network or none; action 1 always; `store` hands the unrolls to `check`."""

    def __init__(self, unrolls, net=None, check=lambda seqs: None):
        from rlbench.roles.contract import SharedNet

        self.shared = SharedNet(net) if net is not None else None
        self.unrolls, self.check = unrolls, check

    def initial_state(self, n: int, device) -> tuple:
        return self.shared.net.initial_state(n, device) if self.shared is not None else ()

    def act(self, ids, out):
        return np.ones(len(ids), np.int64)

    def store(self, seqs, timer) -> None:
        self.check(seqs)


def test_forget_gives_those_envs_a_new_actors_state_and_prev_action_and_leaves_the_others():
    asm = UnrollAssembler(2, 4, 1, (2,), np.float32, 2, 4)  # envs 0, 1 train; env 2 evaluates
    server = InferenceServer(_Policy(asm, _ZeroNet()), "cpu", 3, actors=2)
    batch = StepBatch(np.arange(3), np.ones((3, 2), np.float32), np.zeros(3, np.float32), np.zeros(3, bool))
    for _ in range(3):
        server.step(batch)
    h, c = (s.clone() for s in server.state)
    assert (h == 3).all() and (c == 3).all() and server.prev_action.tolist() == [1, 1, 1]

    assert server.forget(np.array([1, 2])) == 3  # env 1's three steps were in no unroll; env 2 has none
    assert server.state[0].tolist() == [[3, 3], [0, 0], [0, 0]]
    assert server.state[1][:, 0].tolist() == [[3, 3], [0, 0], [0, 0]]
    assert server.prev_action.tolist() == [1, 0, 0]
    assert asm.pos.tolist() == [3, 0] and server.forget(np.array([2])) == 0
    with pytest.raises(ValueError, match=r"forget ids=\[3\]: allowed: env ids in \[0, 3\)"):
        server.forget(np.array([3]))


# --- the actors: a fake RemoteEnvs whose process leaves and rejoins --------------------------


class _Departing:
    """5 envs in lock-step (4 train, 1 eval): obs = _value(env, life, t). Ids `gone` leave at
    recv `leave_at` (reported once by take_disconnected; absent from the batches after) and a
    new process takes them at recv `rejoin_at`: a new life from t = 0, its first step done=True."""

    frameskip = 1

    def __init__(self, gone=(3, 5), leave_at=7, rejoin_at=12, envs=5):
        self.gone, self.leave_at, self.rejoin_at = np.arange(*gone), leave_at, rejoin_at
        self.active = np.ones(envs, bool)
        self.t, self.life = np.zeros(envs, np.int64), np.zeros(envs, np.int64)
        self.recvs, self.pending, self.sent_to = 0, np.zeros(0, np.int64), None
        self.received: list[tuple[int, int]] = []  # (env, value) of every step handed to the actors

    def reset(self, seed: int) -> StepBatch:
        return self._batch(np.zeros(len(self.active), bool))

    def send(self, actions) -> None:
        assert len(actions) == len(self.sent_to)  # one action per env of the last batch

    def recv(self) -> StepBatch:
        self.recvs += 1
        done = np.zeros(len(self.active), bool)
        if self.recvs == self.leave_at:
            self.active[self.gone], self.pending = False, self.gone.copy()
        if self.recvs == self.rejoin_at:
            self.active[self.gone], done[self.gone] = True, True
            self.life[self.gone] += 1
            self.t[self.gone] = -1
        self.t[self.active] += 1
        return self._batch(done)

    def take_disconnected(self) -> np.ndarray:
        out, self.pending = self.pending, np.zeros(0, np.int64)
        return out

    def _batch(self, done) -> StepBatch:
        ids = np.flatnonzero(self.active)
        vals = 1 + ids * 100_000 + self.life[ids] * 10_000 + self.t[ids]
        self.received += list(zip(ids.tolist(), vals.tolist(), strict=True))
        self.sent_to = ids
        return StepBatch(ids, vals[:, None].astype(np.float32), np.ones(len(ids), np.float32), done[ids])


def _whole(values: np.ndarray) -> bool:
    """A sequence's frames are whole: zeros (the pad) only first, then consecutive steps of one life."""
    real = np.flatnonzero(values)
    return real.size > 0 and real[-1] == len(values) - 1 and bool(np.all(np.diff(values[real[0] :]) == 1))


class _WholeSink:
    def __init__(self):
        self.values: set[int] = set()
        self.unrolls = 0

    def __call__(self, seqs: Sequences) -> None:
        frames = seqs.owned().frames[:, :, 0]
        for row in frames:
            assert _whole(row), f"a half sequence reached the store: {row.tolist()}"
        self.values |= {int(v) for v in frames.ravel() if v}
        self.unrolls += len(frames)


def test_actors_forget_a_departed_process_count_it_and_store_only_whole_sequences():
    length, overlap = unroll_layout(BURN_IN, SEQ_LEN, None)
    asm, sink = UnrollAssembler(4, length, overlap, (1,), np.float32, 2, 0, pad=BURN_IN), _WholeSink()
    env = _Departing()
    role = ActorRole(
        env,
        InferenceServer(_Policy(asm, check=sink), "cpu", 5, actors=4),
        actors=4,
        frame_target=80,
        seed=0,
        eval_envs=1,
    )
    role.run(threading.Event())

    first_life = {v for e, v in env.received if e == 3 and v < _value(3, 1, 0)}  # env 3 trains; env 4 evaluates
    lost = len(first_life - sink.values)
    assert role.fault_metrics() == {"actor_disconnects": 1, "actor_lost_steps": lost} and lost > 0
    assert _value(3, 1, 0) in sink.values  # the rejoined process's steps are trained, from its first
    assert role.frames == sum(e < 4 for e, _ in env.received[5:]) >= 80  # what inference received (not the reset)
    assert role.episodes == 0 and not role.episode_returns and not role.eval_returns  # a rejoin ends no episode


def test_in_process_actors_report_no_disconnects_null_not_zero():
    class InProcess(_Departing):
        take_disconnected = None  # an env that cannot lose its actors offers no such method

    asm = UnrollAssembler(4, 6, 1, (1,), np.float32, 2, 0)
    role = ActorRole(
        InProcess(leave_at=-1, rejoin_at=-1),
        InferenceServer(_Policy(asm), "cpu", 5, actors=4),
        4,
        20,
        0,
        eval_envs=1,
    )
    role.run(threading.Event())
    assert role.fault_metrics() == {} and role.frames >= 20


# --- the real trainer: CartPole with a wrapper whose envs leave and rejoin -------------------


class _DepartingWrap:
    """A real vector env whose ids `gone` leave after recv `leave_at` and rejoin at `rejoin_at`
    (first step done=True); the inner env steps on for them (action 0), unseen. Every row handed
    out is indexed by its bytes: (env, life, index), so a sequence can be checked whole."""

    def __init__(self, inner, gone, leave_at: int, rejoin_at: int, fail_at: int | None = None):
        self.inner, self.gone, self.leave_at, self.rejoin_at, self.fail_at = inner, gone, leave_at, rejoin_at, fail_at
        self.life, self.active = 0, True
        self.recvs, self.pending, self.ids = 0, np.zeros(0, np.int64), None
        self.count: dict[tuple[int, int], int] = {}
        self.where: dict[bytes, tuple[int, int, int]] = {}

    def __getattr__(self, name):  # frameskip, obs_shape, num_actions, threads_used, close ...
        return getattr(self.inner, name)

    def reset(self, seed: int) -> StepBatch:
        b = self.inner.reset(seed=seed)
        self.envs = len(b.env_ids)  # lock-step: every env in each batch
        return self._out(b)

    def send(self, actions) -> None:
        full = np.zeros(self.envs, np.int64)
        full[self.ids] = actions
        self.inner.send(full)

    def recv(self) -> StepBatch:
        self.recvs += 1
        if self.recvs == self.fail_at:
            raise RuntimeError("no actor process connected for 0.5 s (actor_server.timeout_s)")
        b = self.inner.recv()
        if self.recvs == self.leave_at:
            self.active, self.pending = False, np.asarray(self.gone)
        if self.recvs == self.rejoin_at:
            self.active, self.life = True, self.life + 1
            b.done = b.done | np.isin(b.env_ids, self.gone)
        return self._out(b)

    def take_disconnected(self) -> np.ndarray:
        out, self.pending = self.pending, np.zeros(0, np.int64)
        return out

    def _out(self, b: StepBatch) -> StepBatch:
        keep = np.ones(len(b.env_ids), bool) if self.active else ~np.isin(b.env_ids, self.gone)
        b = StepBatch(b.env_ids[keep], b.obs[keep], b.reward[keep], b.done[keep])
        for i, row in zip(b.env_ids.tolist(), b.obs, strict=True):
            life = self.life if i in self.gone else 0
            n = self.count.get((i, life), 0)
            self.where[row.tobytes()] = (i, life, n)
            self.count[(i, life)] = n + 1
        self.ids = b.env_ids
        return b

    def check_whole(self, seqs: Sequences) -> None:
        for row in seqs.owned().frames:
            real = [k for k, f in enumerate(row) if f.any()]
            assert real == list(range(real[0], len(row))), "zero (pad) frames after the first step"
            steps = [self.where[row[k].tobytes()] for k in real]
            assert {s[:2] for s in steps} == {steps[0][:2]} and [s[2] for s in steps] == list(
                range(steps[0][2], steps[0][2] + len(steps))
            ), f"a half sequence reached replay: {steps}"


def _cartpole(compose_cfg, monkeypatch, **wrap):
    from rlbench.algo.r2d2.acting import EpsilonGreedy
    from rlbench.prepare.plan import plan_job
    from rlbench.prepare.validate import validate

    made = []

    def make(*args, **kw):
        made.append(_DepartingWrap(real(*args, **kw), **wrap))
        return made[-1]

    def store(self, seqs, timer):
        made[0].check_whole(seqs)
        return stored(self, seqs, timer)

    conf = validate(
        compose_cfg(
            [
                "env=cartpole",
                "workload=smoke",
                "workload.frames=600",
                "workload.learner_updates=2",
                "algo.min_replay=16",
                "actors=4",
                "eval_envs=1",
                "telemetry.enabled=false",
                "progress=log",
                "tracking.log_every_s=1",
            ]
        )
    )
    plan = plan_job(conf)
    real, stored = plan.family.make, EpsilonGreedy.store  # the trainer makes the envs through the plan's family
    monkeypatch.setattr(plan.family, "make", make)
    monkeypatch.setattr(EpsilonGreedy, "store", store)
    return plan, made


def test_a_cartpole_job_whose_actors_leave_and_rejoin_trains_on_whole_sequences_and_reports_the_loss(
    compose_cfg, monkeypatch
):
    from rlbench.train.trainer import train

    plan, made = _cartpole(compose_cfg, monkeypatch, gone=np.array([2, 3, 4]), leave_at=30, rejoin_at=60)
    final = train(plan)
    wrap = made[0]
    assert final["actor_disconnects"] == 1 and final["actor_lost_steps"] > 0
    received = sum(n for (i, _), n in wrap.count.items() if i < 4) - 4  # training steps after the reset
    assert final["frames"] == received >= 600  # frames: what inference received, the lost steps among them
    assert final["learner_updates"] == 2 and (2, 1, 0) in wrap.where.values()


def test_a_job_whose_actors_are_all_gone_too_long_fails_with_that_reason(compose_cfg, monkeypatch):
    from rlbench.roles.runner import RoleFailed
    from rlbench.train.trainer import train

    """RemoteEnvs's recv raises once no actor process is connected for its timeout (a fake raises it)."""
    plan, _ = _cartpole(compose_cfg, monkeypatch, gone=np.arange(5), leave_at=-1, rejoin_at=-1, fail_at=8)
    with pytest.raises(RoleFailed, match=r"role 'actors' failed: .*no actor process connected for 0.5 s"):
        train(plan)


@pytest.mark.e2e
def test_a_job_whose_actors_are_all_gone_too_long_is_recorded_failed_with_that_reason(compose_cfg, monkeypatch, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job
    from tests.conftest import runs

    _cartpole(compose_cfg, monkeypatch, gone=np.arange(5), leave_at=-1, rejoin_at=-1, fail_at=8)
    cfg = compose_cfg(
        [
            "env=cartpole",
            "workload=smoke",
            "workload.frames=600",
            "workload.learner_updates=2",
            "algo.min_replay=16",
            "actors=4",
            "eval_envs=1",
            "progress=log",
            *store["overrides"],
        ]
    )
    with pytest.raises(Exception, match="no actor process connected for 0.5 s"):
        run_job(job_of(cfg))
    (run,) = runs(store["uri"])
    assert run.info.status == "FAILED" and "no actor process connected for 0.5 s" in run.data.tags["error"]
