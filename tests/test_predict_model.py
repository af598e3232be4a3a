"""The pipeline model against hand-computed cases: bound by each stage, and the async overlap."""

import pytest

from rlbench.predict.model import CORES, ENV, INFERENCE, LEARNER, SYNC, Costs, actor_rate, predict

# 1 ms per env step, 2 env threads; a forward of b envs takes 2 ms + 0.1 ms x b; 1 s per update
C = Costs(
    env_step_s=1e-3, actor_threads=2, infer_fixed_s=2e-3, infer_per_env_s=1e-4, update_s=1.0, infer_threads=0, cores=0
)


def test_synchronous_pipeline_adds_stepping_and_inference():
    # 40 envs on 2 threads: 20 ms of stepping, then a forward of 40: 2 + 4 = 6 ms -> 40 / 26 ms
    sps, bound = actor_rate(C, actors=40)
    assert sps == pytest.approx(40 / 0.026) and bound == SYNC
    assert actor_rate(C, actors=1)[0] == pytest.approx(1 / (1e-3 + 2.1e-3))  # one env: one thread works


def test_asynchronous_pipeline_bound_by_env_stepping():
    # batch 20 of 40: env capacity 2 / 1 ms = 2000/s; inference 20 / 4 ms = 5000/s -> env-bound
    sps, bound = actor_rate(C, actors=40, batch=20)
    assert (sps, bound) == (pytest.approx(2000.0), ENV)


def test_asynchronous_pipeline_bound_by_inference():
    slow = Costs(**{**C.__dict__, "infer_fixed_s": 20e-3})  # a forward of 4 envs: 20.4 ms -> 196/s
    sps, bound = actor_rate(slow, actors=40, batch=4)
    assert sps == pytest.approx(4 / 20.4e-3) and bound == INFERENCE


def test_asynchronous_pipeline_bound_by_shared_cores():
    # on 2 cores, each step costs 1 ms of env + 2 threads x (2 + 0.1 x 20) ms / 20 = 0.4 ms of inference
    shared = Costs(**{**C.__dict__, "infer_threads": 2, "cores": 2, "actor_threads": 8})
    sps, bound = actor_rate(shared, actors=40, batch=20)
    assert sps == pytest.approx(2 / 1.4e-3) and bound == CORES  # env alone 8000/s, inference 5000/s


def test_overlap_beats_the_synchronous_pipeline_when_neither_stage_dominates():
    assert actor_rate(C, actors=40, batch=20)[0] > actor_rate(C, actors=40)[0]


def test_task_with_a_learner_tail_is_bound_by_the_learner():
    # 200k frames / 4 = 50k steps at 2000/s = 25 s of actors; 15 updates of 1 s after 1000 steps (0.5 s)
    p = predict(C, actors=40, frames=200_000, frameskip=4, updates=15, batch=20, learner_start_steps=1000)
    assert p.actors_s == pytest.approx(25.0) and p.learner_s == pytest.approx(15.5)
    assert p.runtime_s == pytest.approx(25.0) and p.bound == ENV and p.fps(4) == pytest.approx(8000.0)
    # phases: 0.5 s actors alone, 15 s both, then 9.5 s actors alone again (the learner is done)
    assert p.phases == {"actors": pytest.approx(10.0), "both": pytest.approx(15.0), "learner": 0.0}
    q = predict(C, actors=40, frames=200_000, frameskip=4, updates=40, batch=20, learner_start_steps=1000)
    assert q.runtime_s == pytest.approx(40.5) and q.bound == LEARNER  # the tail: 15.5 s after the actors


def test_seeds_unroll_queue_lets_a_slower_learner_pace_the_actors():
    # 10 actors in step, unrolls of 10 steps at stride 10 (an actor's k-th ends at step 10k, so 10
    # unrolls per 100 steps); a queue of 20; the learner takes 10 before each update (1 s alone);
    # the actors alone 1000 steps/s, beside the learner 500/s, the learner at half speed beside them
    from rlbench.predict.model import UnrollQueue, paced

    q = UnrollQueue(capacity=20, take=10, first_take=10, first_steps=10, stride=10)
    p = paced(C, q, actors=10, frame_steps=600, updates=5, rate=(1000.0, SYNC), sps_s=500.0, share_l=0.5, start_s=0.0)
    # 100 steps alone (0.1 s) make the first take (put: the 60 unrolls 600 steps make). Each update the
    # actors step until the unroll that finds the queue full (consumed + 21) is made: update 1 (10
    # consumed) to 400 steps, 0.6 s beside the learner (0.3 s of its work), then blocked: it ends alone
    # at 0.1 + 1.3; update 2 (20) to 500: 0.2 s beside, 1.1 s; update 3 (30) to 600: all stepped, but
    # unrolls 51-60 wait; at update 4's start (40 consumed) they fit: done at 3.6; updates 4, 5 alone: 5.6
    assert p.actors_s == pytest.approx(3.6) and p.learner_s == pytest.approx(5.6) and p.bound == LEARNER
    assert p.sps == pytest.approx(600 / 3.6)
    assert p.phases == {"actors": pytest.approx(0.1), "both": pytest.approx(1.0), "learner": pytest.approx(4.5)}
    fast = paced(
        C, q, actors=10, frame_steps=600, updates=5, rate=(1000.0, SYNC), sps_s=5000.0, share_l=1.0, start_s=0.0
    )  # actors 10x faster than before: each update's steps take little; still 3 waits
    assert fast.actors_s == pytest.approx(0.1 + 3 * 1.0)
    free = predict(
        C, actors=40, frames=200_000, frameskip=4, updates=49, batch=20, learner_start_steps=1000, steps_per_update=1000
    )  # no queue: the actors are done at 25 s, the learner 24.5 s later
    assert free.actors_s == pytest.approx(25.0)


def test_the_actors_step_past_the_frames_until_the_learner_has_its_unrolls():
    # 10 actors, 12 steps each make one unroll each (10); 3 updates of 10 need 30: they step to 300
    # (the third unroll each), a forward of 5 envs putting 5 unrolls; the queue holds 100: never full
    from rlbench.predict.model import UnrollQueue, paced

    q = UnrollQueue(capacity=100, take=10, first_take=10, first_steps=10, stride=10)
    p = paced(
        C, q, actors=10, frame_steps=120, updates=3, rate=(1000.0, ENV), sps_s=1000.0, share_l=1.0, start_s=0.0, group=5
    )
    assert p.sps == pytest.approx(300 / p.actors_s) and p.actors_s == pytest.approx(0.3)
    assert q.made(10, 120) == 10 and q.made(10, 300) == 30 and q.task_unrolls(3) == 30
    # a queue of 15: at update 1 (0.1 s, 10 taken) unrolls 11-25 fit, the third wave (300 steps, 0.2 s
    # on) waits for update 2's take at 1.1 s; the learner makes updates 2 and 3 alone
    small = UnrollQueue(capacity=15, take=10, first_take=10, first_steps=10, stride=10)
    s = paced(
        C,
        small,
        actors=10,
        frame_steps=120,
        updates=3,
        rate=(1000.0, ENV),
        sps_s=1000.0,
        share_l=1.0,
        start_s=0.0,
        group=5,
    )
    assert s.actors_s == pytest.approx(1.1) and s.learner_s == pytest.approx(3.1)


def test_an_asynchronous_reset_runs_partly_inside_the_stepping_clock():
    from rlbench.predict.model import reset_in_clock

    assert reset_in_clock(4.0, actors=38, batch=20, eval_envs=2) == pytest.approx(2.0)  # half the envs reset late
    assert reset_in_clock(4.0, actors=40, batch=0) == 0.0 and reset_in_clock(4.0, actors=40, batch=40) == 0.0
    p = predict(C, actors=40, frames=200_000, frameskip=4, updates=0, batch=20, start_s=3.0)
    assert p.actors_s == pytest.approx(28.0) and p.sps == pytest.approx(50_000 / 26.5)


def test_no_learner_and_bad_counts():
    assert predict(C, actors=4, frames=4000, frameskip=4, updates=0).learner_s == 0.0
    with pytest.raises(ValueError, match="actors=0"):
        actor_rate(C, actors=0)


def test_sharing_the_cores_slows_both_while_they_overlap():
    # 2 cores; sync actors alone: 40 / 26 ms = 1538.5 sps, keeping 1538.5 x 1 ms = 1.54 cores busy
    # (infer_threads 0: a GPU forward); a 2-thread learner: demand 3.54 -> share 2 / 3.54
    c = Costs(**{**C.__dict__, "cores": 2})
    p = predict(c, actors=40, frames=40_000, frameskip=4, updates=10, learner_start_steps=2000, learner_threads=2)
    sps0 = 40 / 0.026
    share = 2 / (sps0 * 1e-3 + 2)
    t1 = 2000 / sps0  # actors alone until the learner may start
    t2 = 8000 / (sps0 * share)  # then 8000 steps at the shared rate: the actors finish first
    learner_s = t1 + t2 + (10 - t2 / (1.0 / share)) * 1.0  # the rest of the updates alone
    assert p.actors_s == pytest.approx(t1 + t2) and p.learner_s == pytest.approx(learner_s)
    assert p.runtime_s == pytest.approx(learner_s) and p.bound == LEARNER
    alone = predict(c, actors=40, frames=40_000, frameskip=4, updates=10, learner_start_steps=2000)
    assert alone.actors_s == pytest.approx(10_000 / sps0) and alone.runtime_s < p.runtime_s


def test_a_learner_that_finishes_first_leaves_the_actors_alone():
    c = Costs(**{**C.__dict__, "cores": 2, "update_s": 0.01})
    p = predict(c, actors=40, frames=400_000, frameskip=4, updates=5, learner_start_steps=0, learner_threads=2)
    sps0 = 40 / 0.026
    share = 2 / (sps0 * 1e-3 + 2)
    t2 = 5 * 0.01 / share
    assert p.learner_s == pytest.approx(t2)
    assert p.actors_s == pytest.approx(t2 + (100_000 - t2 * sps0 * share) / sps0) and p.bound == SYNC


def test_learner_start_counts_whole_unrolls_per_actor():
    from rlbench.predict.model import learner_start_steps

    # R2D2 smoke on Pong: 50 sequences of 121 steps (burn-in 40 + 80 + 1), stride 80, 40 actors:
    # every actor needs 2 sequences (40 x 1 < 50): 121 + 80 = 201 steps each
    assert learner_start_steps(40, 50, 121, 80) == 40 * 201
    assert learner_start_steps(4, 4, 121, 80) == 4 * 121  # one each
    assert learner_start_steps(1, 3, 21, 20) == 21 + 2 * 20  # V-trace-like: unroll 20, overlap 1
    with pytest.raises(ValueError, match="actors=0"):
        learner_start_steps(0, 1, 2, 1)


def test_a_learner_waiting_for_data_keeps_pace_with_the_actors_and_frees_its_cores():
    # update_s 10 ms alone would do 100 updates/s; the data allows sps / 200 steps per update
    c = Costs(**{**C.__dict__, "cores": 2, "update_s": 0.01})
    sps0 = 40 / 0.026
    p = predict(
        c,
        actors=40,
        frames=400_000,
        frameskip=4,
        updates=600,
        learner_start_steps=0,
        learner_threads=2,
        steps_per_update=200,
    )
    busy = sps0 * 0.01 / 200  # the learner works 7.7% of the time
    share = min(1.0, 2 / (sps0 * 1e-3 + 2 * busy))
    rate = share * sps0 / 200  # updates/s, bound by the data
    assert share == 1.0  # demand 1.54 + 0.15 cores fits in 2
    t2 = 100_000 / (sps0 * share)  # the actors finish first (600 updates need 78 s > 65 s)
    assert p.actors_s == pytest.approx(t2)
    assert p.learner_s == pytest.approx(t2 + (600 - t2 * rate) * 0.01) and p.bound == LEARNER
    busy_learner = predict(c, actors=40, frames=400_000, frameskip=4, updates=600, learner_threads=2)
    assert busy_learner.actors_s > p.actors_s  # a learner that never waits takes cores from the actors


def test_evaluation_envs_step_and_infer_but_do_not_count():
    # 40 training + 10 eval envs on 2 threads: 25 ms of stepping, a forward of 50: 7 ms -> 40 steps / 32 ms
    assert actor_rate(C, actors=40, eval_envs=10)[0] == pytest.approx(40 / 0.032)
    assert actor_rate(C, actors=40, batch=20, eval_envs=10)[0] == pytest.approx(2000.0 * 40 / 50)  # env-bound


def test_the_first_reset_delays_everything_but_not_the_stepping_rate():
    p = predict(C, actors=40, frames=200_000, frameskip=4, updates=15, batch=20, learner_start_steps=1000, start_s=3.0)
    assert (p.actors_s, p.learner_s, p.runtime_s) == (pytest.approx(28.0), pytest.approx(18.5), pytest.approx(28.0))
    # fps counts the stepping only, as the job's fps does, and the half of the reset an asynchronous
    # vector env does after its first batch is back (reset_in_clock); lock-step: the stepping only
    assert p.fps(4) == pytest.approx(4 * 50_000 / (25.0 + 1.5))
    sync = predict(C, actors=40, frames=200_000, frameskip=4, updates=0, start_s=3.0)
    assert sync.fps(4) == pytest.approx(4 * 40 / 0.026)


def test_measured_loop_overhead_and_effective_cores_replace_the_ideal_sharing():
    # the loop takes 1.25x the composed time; sharing, the actors see 1 core, the learner 1.5
    c = Costs(
        **{**C.__dict__, "cores": 2, "loop_overhead": 1.25, "share_cores_actors": 1.0, "share_cores_learner": 1.5}
    )
    sps0 = 40 / (1.25 * 0.026)
    demand = sps0 * 1.25 * 1e-3 + 2
    share_a, share_l = 1.0 / demand, 1.5 / demand
    p = predict(c, actors=40, frames=40_000, frameskip=4, updates=10, learner_start_steps=2000, learner_threads=2)
    t1, t2 = 2000 / sps0, 8000 / (sps0 * share_a)
    assert t2 < 10 / share_l  # the actors finish first
    assert p.actors_s == pytest.approx(t1 + t2) and p.learner_s == pytest.approx(t1 + t2 + (10 - t2 * share_l) * 1.0)
    assert actor_rate(c, actors=40)[0] == pytest.approx(sps0)
