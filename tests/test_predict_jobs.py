"""A job's configuration through the model: costs read off a (synthetic) profile at the
job's point, estimates named, the learner's data needs, the grid and its recommendation."""

import math

import pytest

from rlbench.cli.predict import grid_overrides, parse
from rlbench.predict import model
from rlbench.predict.curves import Profile, env_step_s, inference_s, update_s
from rlbench.predict.jobs import Machine, learner_data, predict_job
from rlbench.predict.report import recommend

ENV = [
    {"threads": t, "envs": e, "sps": 0.0, "env_step_s": s}
    for t, e, s in ((1, 4, 1e-3), (1, 64, 2e-3), (2, 4, 1.5e-3), (2, 64, 3e-3))
]
INF = [{"units": u, "batch": b, "seconds": (2e-3 + 1e-4 * b) / u} for u in (1, 2) for b in (4, 16, 64)]
UPD = [{"units": 1, "seconds": 2.0}, {"units": 2, "seconds": 1.2}]
TAGS = {"host": "h", "cpu_model": "cpu", "hardware_threads": "2", "device": "cpu", "env_id": "CartPole-v1"}


def prof(run_id="p1", **tags) -> Profile:
    return Profile(run_id, {**TAGS, **tags}, ENV, INF, UPD)


def test_costs_are_read_off_the_profile_at_the_jobs_point():
    p, notes = prof(), []
    assert env_step_s(p, 2, 4, notes) == pytest.approx(1.5e-3)
    assert env_step_s(p, 1, 16, notes) == pytest.approx(1.5e-3)  # halfway in log(envs) between 4 and 64
    assert env_step_s(p, 2, 256, notes) == pytest.approx(3e-3)  # flat beyond the last measured count
    assert inference_s(p, 2, 10, notes) == pytest.approx((2e-3 + 1e-3) / 2)  # between batches 4 and 16
    assert inference_s(p, 1, 128, notes) == pytest.approx(2e-3 + 1e-4 * 128)  # the fitted line beyond 64
    assert update_s(p, 2, notes) == 1.2 and not notes


def test_points_the_profile_did_not_measure_are_named_as_estimates():
    p, notes = prof(), []
    assert env_step_s(p, 8, 64, notes) == pytest.approx(3e-3)  # 2 threads' cost: linear scaling assumed
    assert update_s(p, 4, notes) == 1.2
    assert "estimate: env stepping on 8 actor threads" in notes[0] and "at 4 units taken from 2 units" in notes[1]


def test_learner_data_follows_the_algorithm(compose_cfg):
    from rlbench.prepare.validate import validate

    # Pong R2D2 under SEED's unroll queue: an update after one insertion batch of int(64 / 0.75) = 85
    # sequences (the first of each actor zero-padded: 81 real steps), then 85 fresh ones (x stride 80) each
    r2d2 = validate(compose_cfg(["actors=40"]))
    start, per_update = learner_data(r2d2)
    assert start == model.learner_start_steps(40, 85, 81, 80) and per_update == pytest.approx(85 * 80)
    free = validate(compose_cfg(["actors=40", "algo.coupling=free_running"]))  # min_replay 50, 64 / 0.75 per update
    assert learner_data(free) == (model.learner_start_steps(40, 86, 81, 80), pytest.approx(64 * 80 / 0.75))
    vt = validate(compose_cfg(["env=cartpole", "algo=vtrace_vector", "actors=4"]))
    assert learner_data(vt) == (
        model.learner_start_steps(4, vt.algo.batch_size, vt.algo.unroll_length + 1, vt.algo.unroll_length),
        float(vt.algo.batch_size * vt.algo.unroll_length),
    )
    assert learner_data(validate(compose_cfg(["env=cartpole", "algo=random", "actors=2"]))) == (0, 0.0)


def test_a_cartpole_job_predicted_by_hand(compose_cfg):
    from rlbench.prepare.validate import validate

    conf = validate(
        compose_cfg(["env=cartpole", "algo=vtrace_vector", "actors=4", "sm_limit=1", "learner=false", "eval_envs=0"])
    )
    pred = predict_job(conf, Machine(prof(), prof()))
    # gym envs step on one thread: 4 x 1 ms, then a forward of 4 on 1 thread: 2.4 ms -> 4 / 6.4 ms
    assert pred.fps == pytest.approx(4 / 6.4e-3 * conf.env.frameskip)
    conf.eval_envs = 2  # 2 evaluation envs step and infer with them; only the 4 training envs' steps count
    env_6 = 1e-3 + (2e-3 - 1e-3) * math.log(6 / 4) / math.log(64 / 4)  # log-interpolated between 4 and 64 envs
    assert predict_job(conf, Machine(prof(), prof())).fps == pytest.approx(4 / (6 * env_6 + 2.6e-3))
    assert pred.runtime_s == pytest.approx(conf.workload.frames / pred.fps) and pred.learner_updates_per_s is None
    assert (
        pred.cpu_gpu_ratio == 1.0
        and pred.energy_per_task_j is None
        and "the profile metered no power" in pred.energy_reason
    )


def test_what_if_machines_name_both_profiles_and_their_estimates(compose_cfg):
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["actors=64", "learner=false"]), host=False)
    gpu = Profile("g1", {**TAGS, "device": "cuda", "gpu_name": "H100", "compute_units_total": "132"}, ENV, INF, UPD)
    m = Machine(prof(env_id="pong"), gpu, threads=16)
    pred = predict_job(conf, m)
    assert pred.knobs["actor_threads"] == 16 and pred.knobs["sm_limit"] == 132 and "H100" in m.names()
    assert any("scaled from 2 to 16" in n for n in pred.notes) and any("132 units" in n for n in pred.notes)


def test_grid_expands_lists_and_recommends_the_fastest_task():
    assert grid_overrides(["actors=4,40", "sm_limit=1,2", "env=pong"]) == [
        ["actors=4", "sm_limit=1", "env=pong"],
        ["actors=4", "sm_limit=2", "env=pong"],
        ["actors=40", "sm_limit=1", "env=pong"],
        ["actors=40", "sm_limit=2", "env=pong"],
    ]

    class P:
        def __init__(self, runtime, units):
            self.runtime_s, self.knobs = runtime, {"sm_limit": units, "actor_threads": 2}

    assert recommend([P(10.0, 2), P(9.0, 2), P(9.0, 1)]).knobs["sm_limit"] == 1


def test_bad_command_lines_are_refused(capsys):
    for argv, says in (
        (["actors=4,40"], "needs --grid"),
        (["--validate"], "--validate --sweep"),
        (["--threads", "0"], "--threads=0"),
        (["--profile", "a", "--cpu-profile", "b"], "not both"),
        (["--validate", "--sweep", "x", "--grid"], "allowed with it"),
    ):
        with pytest.raises(SystemExit):
            parse(argv)
        assert says in capsys.readouterr().err


def test_startup_is_the_profiles_reset_cost_per_env_times_envs_per_thread():
    from rlbench.predict.curves import reset_s

    rows = [{**r, "reset_s": {4: 0.2, 64: 4.8}[r["envs"]] * (1 if r["threads"] == 2 else 2)} for r in ENV]
    p, notes = Profile("p2", TAGS, rows, INF, UPD), []
    # 2 threads: 0.1 s per env-thread at 4 envs, 0.15 at 64; at 16 envs halfway in log(envs): 0.125 x 16 / 2
    assert reset_s(p, 2, 16, notes) == pytest.approx(0.125 * 16 / 2) and not notes
    assert reset_s(prof(), 2, 16, notes) == 0.0 and "did not time the envs' first reset" in notes[0]


def test_sharing_is_read_off_the_co_run():
    from rlbench.predict.curves import sharing

    co = [{"units": 2, "envs": 16, "threads": 2, "loop_sps": 400.0, "corun_sps": 200.0, "corun_update_s": 2.4}]
    p, notes = Profile("p3", TAGS, ENV, INF, UPD, co), []
    step = 1.5e-3 + 1.5e-3 * math.log(16 / 4) / math.log(64 / 4)  # env_step_s at 2 threads, 16 envs
    infer = (2e-3 + 1e-4 * 16) / 2  # a forward of 16 at 2 units
    overhead = 16 / (16 * step / 2 + infer) / 400  # composed rate / the loop's
    demand = 400 * overhead * (step + 2 * infer / 16) + 2  # the actors' cores + a 2-thread learner
    assert sharing(p, 2, notes) == pytest.approx((overhead, demand / 2, demand / (2.4 / 1.2))) and not notes
    assert sharing(p, 1, notes)[0] == pytest.approx(overhead) and "taken from the co-run at 2 units" in notes[0]
    assert sharing(prof(), 2, notes) is None  # no co-run measured
    idle = [dict(co[0], corun_sps=0.0)]  # a learner update shorter than an actor step: nothing timed
    notes = []
    assert sharing(Profile("p4", TAGS, ENV, INF, UPD, idle), 2, notes) is None and "corun_sps 0" in notes[0]


def test_energy_is_each_phase_at_its_states_power_and_never_counts_the_unknown_as_zero():
    from rlbench.predict.power import task_energy

    rows = [
        {"state": s, "units": 2, "power_cpu_w": w, "power_gpu_w": None, "cpu_reason": None, "gpu_reason": "no NVML"}
        for s, w in (("actors", 50.0), ("both", 80.0), ("learner", 60.0))
    ]
    joules, how = task_energy({"actors": 10.0, "both": 20.0, "learner": 5.0}, rows, 2)
    assert joules == pytest.approx(10 * 50 + 20 * 80 + 5 * 60) and how.startswith("estimate:")
    assert "not included: gpu: no NVML" in how
    unread = [{**r, "power_cpu_w": None, "cpu_reason": "no RAPL"} for r in rows]
    joules, how = task_energy({"actors": 10.0, "both": 0.0, "learner": 0.0}, unread, 1)
    assert joules is None and "cpu: no RAPL" in how and "gpu: no NVML" in how
    assert task_energy({"actors": 1.0}, [], 1)[0] is None


def test_metered_records_a_states_power_or_why_not():
    from rlbench.predict.power import metered

    class FakeSampler:
        def __init__(self, cpu, gpu):
            self.cpu, self.gpu, self.running = cpu, gpu, False

        def start(self):
            self.running = True

        def stop(self):
            self.running = False

        def summary(self):
            return {
                "power_cpu_w_avg": self.cpu,
                "power_gpu_w_avg": self.gpu,
                "telemetry_cpu_reason": "no RAPL here",
                "telemetry_gpu_reason": "no NVML here",
            }

    rows = []
    with metered(rows, "both", 2, make_sampler=lambda: FakeSampler(41.5, None)):
        pass
    with metered(None, "learner", 2, make_sampler=lambda: pytest.fail("no rows: nothing metered")):
        pass
    assert rows == [
        {
            "state": "both",
            "units": 2,
            "power_cpu_w": 41.5,
            "power_gpu_w": None,
            "cpu_reason": None,
            "gpu_reason": "no NVML here",
        }
    ]


def test_a_tasks_mean_update_pays_the_first_updates_cost_once():
    rows = [{"units": 1, "seconds": 2.0, "first_s": 5.0}, {"units": 2, "seconds": 1.2, "first_s": 3.0}]
    p = Profile("p4", TAGS, ENV, INF, rows)
    assert update_s(p, 2, [], updates=4) == pytest.approx((3.0 + 3 * 1.2) / 4)
    assert update_s(p, 2, []) == 1.2 and update_s(prof(), 2, [], updates=4) == 1.2  # steady; an older profile


def test_a_profile_of_another_env_or_algorithm_is_refused(compose_cfg):
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["env=cartpole", "algo=vtrace_vector", "actors=4", "eval_envs=0"]))
    pong = Profile("p5", {**TAGS, "env_id": "pong"}, ENV, INF, UPD, params={"algo.name": conf.algo.name})
    with pytest.raises(ValueError, match="measured env_id=pong; the job has env_id=CartPole-v1"):
        predict_job(conf, Machine(pong, pong))
    other = Profile("p6", TAGS, ENV, INF, UPD, params={"algo.name": "r2d2"})
    with pytest.raises(ValueError, match=f"measured algo.name=r2d2; the job has algo.name={conf.algo.name}"):
        predict_job(conf, Machine(prof(), other))


def test_the_suggested_profile_command_names_the_jobs_env_and_algorithm(compose_cfg):
    from rlbench.predict.curves import profile_command
    from rlbench.prepare.validate import validate

    assert profile_command("pong", "atari", "r2d2") == "python -m rlbench.profile env=pong algo=r2d2"
    assert (
        profile_command("space_invaders", "atari", "vtrace")
        == "python -m rlbench.profile env=pong env.id=space_invaders algo=vtrace"
    )
    cmd = profile_command("CartPole-v1", "gym", "r2d2")
    assert cmd == "python -m rlbench.profile env=cartpole algo=r2d2_vector"
    conf = validate(compose_cfg(cmd.split()[3:]))  # the command composes the job's env and algorithm
    assert (conf.env.id, conf.algo.name) == ("CartPole-v1", "r2d2")
