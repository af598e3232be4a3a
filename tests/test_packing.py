"""Packs (pack=K: rlbench/prepare/packing.py, rlbench/sweeps/pack.py): the CPUs' split, the
members' overrides and seeds, the node figures from the members' records, the refusals through
the real command, and a packed sweep whose jobs overlap in time on disjoint CPUs."""

import statistics
from types import SimpleNamespace

import mlflow
import pytest

import rlbench
from rlbench.config.schema import PackingConfig
from rlbench.prepare.compose import compose_job
from rlbench.prepare.packing import cpu_shares, member_seed, pack_checks, pack_host_checks
from rlbench.sweeps.pack import Pack, alone_name, energy_j, expand, node_fps, node_ratio, slowdowns
from rlbench.sweeps.sweep import _groups
from tests.conftest import CARTPOLE_TINY, rlbench_cli


def test_the_cpus_split_into_disjoint_shares_in_order():
    assert cpu_shares([0, 1], 2) == [[0], [1]]
    assert cpu_shares([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    shares = cpu_shares(list(range(16)), 3)
    assert sorted(c for s in shares for c in s) == list(range(16)) and [len(s) for s in shares] == [6, 5, 5]
    with pytest.raises(ValueError):
        cpu_shares([0, 1], 3)


def _conf(**kw):
    base = dict(
        pack=2,
        actor_threads=None,
        sm_limit=None,
        sm_backend="green_context",
        actor_procs=0,
        actor_hosts=0,
        actor_server=SimpleNamespace(remote_envs=0),
        seed=7,
        packing=PackingConfig(),
    )
    return SimpleNamespace(**(base | kw))


@pytest.mark.parametrize(
    "kw, cpus, cuda, says",
    [
        ({"pack": 3}, 2, False, "pack=3: more jobs than the 2 usable CPUs here; allowed: 1..2"),
        ({"actor_threads": 2}, 2, False, "actor_threads=2 with pack=2: 4 CPU threads, more than the 2 usable"),
        ({"sm_limit": 16}, 16, True, "green contexts made in separate processes are split independently and overlap"),
        ({"sm_limit": 2}, 2, False, "sm_limit=2 with pack=2: more learner and inference threads than a job's 1 CPUs"),
    ],
)
def test_what_a_host_cannot_give_a_pack_is_named_with_what_is_allowed(kw, cpus, cuda, says):
    (problem,) = pack_host_checks(_conf(**kw), cpus, cuda)
    assert says in problem and "allowed" in problem


def test_a_pack_may_time_slice_or_share_by_mps_and_one_job_alone_is_never_checked():
    assert (
        pack_host_checks(_conf(), 2, True) == []
        and pack_host_checks(_conf(sm_limit=16, sm_backend="mps"), 16, True) == []
    )
    assert pack_host_checks(_conf(pack=1, actor_threads=64, sm_limit=99), 2, False) == []
    assert "not supported" in pack_checks(_conf(actor_procs=1))[0] and pack_checks(_conf(pack=1, actor_procs=1)) == []


def test_a_packed_configuration_becomes_its_members_with_their_seeds_and_cpus():
    confs = [compose_job(["env=cartpole", "seed=7", f"pack={k}"], host=False) for k in (1, 2)]
    jobs = [["pack=1", "seed=7"], ["pack=2", "seed=7"]]
    out = expand(jobs, confs, ["pack=1", "pack=2"], ["pack=1", "pack=2"], [0, 0], [0, 1])
    jobs2, confs2, names, configs, repeat, packs = out
    assert jobs2[0] == jobs[0] and confs2[0] is confs[0] and names == ["pack=1", "pack=2 #0", "pack=2 #1"]
    assert configs == ["pack=1", "pack=2", "pack=2"] and [p.members for p in packs] == [[0], [1, 2]]
    pid = packs[1].id
    assert jobs2[2] == [
        "pack=2",
        f"seed={member_seed(7, 1)}",
        f"++packing.id={pid}",
        "++packing.index=1",
        "++packing.cpus='1'",
    ]
    assert [c.seed for c in confs2[1:]] == [7, 1007] and [c.packing.cpus for c in confs2[1:]] == ["0", "1"]
    assert {c.packing.id for c in confs2[1:]} == {pid}


def test_a_packs_jobs_are_launched_as_one_group_the_others_alone():
    tagged = [(i, [], []) for i in (0, 1, 2, 4)]  # job 3 finished before: resume=true left it out
    assert [[i for i, _, _ in g] for g in _groups(tagged, [[1, 2, 3]])] == [[0], [1, 2], [4]]


def test_the_node_throughput_is_summed_over_the_windows_all_members_stepped():
    a = [(1000 * t, 100.0) for t in range(1, 11)]  # 1..10 s
    b = [(1000 * t, 50.0 if t < 8 else 80.0) for t in range(4, 14)]  # 4..13 s
    fps, why = node_fps([a, b], min_windows=3, period_s=1.0)
    assert why == "" and fps == pytest.approx(100.0 + statistics.fmean([50, 50, 50, 50, 80, 80, 80]))
    fps, why = node_fps([a, [(12_000, 1.0), (13_000, 1.0)]], min_windows=3, period_s=1.0)
    assert fps is None and "stepped together for 0.0 s" in why  # never together long enough: no number
    assert node_fps([a, []], 3, 1.0)[0] is None


def test_the_energy_holds_each_sample_until_the_next_over_the_packs_window():
    assert energy_j([(0, 100.0), (2000, 50.0)], 0, 4000) == pytest.approx(100 * 2 + 50 * 2)
    assert energy_j([(5000, 10.0)], 0, 4000) is None  # no sample inside: unknown, not 0


def test_a_members_slowdown_is_against_the_configuration_alone_in_the_sweep():
    rows = [
        {"config": "pack=1 actors=4", "status": "FINISHED", "runtime_s": 10.0, "name": "a"},
        {"config": "pack=1 actors=4", "status": "FINISHED", "runtime_s": 12.0, "name": "b"},
        {"config": "pack=2 actors=4", "status": "FINISHED", "runtime_s": 16.5, "name": "c"},
        {"config": "pack=2 actors=4", "status": "FAILED", "runtime_s": None, "name": "d"},
    ]
    assert alone_name("pack=2 actors=4") == "pack=1 actors=4"
    assert slowdowns(rows, Pack("p", 2, "pack=2 actors=4", 0, [2, 3])) == [1.5, None]
    assert slowdowns(rows[2:], Pack("p", 2, "pack=2 actors=4", 0, [0, 1])) == [None, None]  # nothing alone


TINY = [*CARTPOLE_TINY, "progress=log", "telemetry.rate_hz=2"]


@pytest.mark.e2e
def test_packs_are_refused_before_any_job_through_the_command(store):
    for args, says in (
        (["-m", "pack=0"], "pack=0: allowed: an integer >= 1"),
        (["-m", "pack=3"], "pack=3: more jobs than the"),
        (["-m", "pack=2", "actor_threads=2"], "actor_threads=2 with pack=2"),
        (["-m", "pack=2", "actor_procs=1"], "pack=2 with actor_procs=1"),
        (["pack=2"], "pack=2 runs 2 jobs at once as one sweep"),
        (["-m", "pack=2", "hydra/launcher=joblib"], "pack with JoblibLauncher: allowed with the basic launcher"),
    ):
        out = rlbench_cli([*args, *TINY, *store["overrides"]], timeout=120)
        assert out.returncode == 2 and says in out.stderr, (args, out.stderr[-1500:])
        assert any(line.startswith("rlbench: ") for line in out.stderr.splitlines())  # the refusal, not a traceback
        assert "Traceback" not in out.stderr
    mlflow.set_tracking_uri(store["uri"])
    exp = mlflow.get_experiment_by_name("test")
    assert exp is None or mlflow.search_runs([exp.experiment_id], output_format="list") == []


@pytest.mark.e2e
def test_a_packed_sweeps_jobs_overlap_on_disjoint_cpus_and_its_node_figures_add_up(store):
    steady = ["workload.frames=40000", "tracking.steady_min_windows=2", "tracking.log_every_s=1"]
    result = rlbench.sweep(["pack=1,2", *TINY, *steady, *store["overrides"]])
    assert result.status == "FINISHED" and len(result.rows) == 3 and len(result.packs) == 2
    mlflow.set_tracking_uri(store["uri"])
    members = [mlflow.get_run(r["run_id"]) for r in result.rows if r["name"].startswith("pack=2")]
    a, b = (m.info for m in members)
    assert a.start_time < b.end_time and b.start_time < a.end_time  # at once
    cpus = [m.data.tags["pack_cpus"] for m in members]
    assert sorted(cpus) == ["0", "1"] and {m.data.tags["pack_id"] for m in members} == {
        result.packs[1]["config"] and members[0].data.tags["pack_id"]
    }
    assert all(m.data.params["pack"] == "2" and m.data.metrics["actor_threads_used"] == 1 for m in members)
    assert all(m.data.metrics["node/cpu_gpu_ratio"] == result.packs[1]["node/cpu_gpu_ratio"] == 1.0 for m in members)
    alone = mlflow.get_run(result.rows[0]["run_id"])
    assert "pack" not in alone.data.params and "pack_id" not in alone.data.tags  # a job alone records as before
    packed = result.packs[1]
    if packed["node/fps"] is not None:  # the sum of the members' own window rates where all stepped
        client = mlflow.MlflowClient()
        means = [
            statistics.fmean(m.value for m in client.get_metric_history(x.info.run_id, "window/fps")) for x in members
        ]
        assert 0.5 * sum(means) <= packed["node/fps"] <= 1.5 * sum(means)
    else:
        assert "stepped together for" in packed["nulls"]["node/fps"]
    runtimes = [r["runtime_s"] for r in result.rows]
    assert packed["node/slowdown"] == pytest.approx(statistics.median(runtimes[1:]) / runtimes[0], rel=1e-3)
    parent = mlflow.get_run(result.parent_run_id)
    assert parent.data.tags["packing_fps"] and parent.data.tags["packing_energy"].startswith("not compared: ")


@pytest.mark.e2e
def test_a_pack_whose_jobs_fail_is_recorded_failed_with_null_figures_and_the_sweep_goes_on(store):
    result = rlbench.sweep(["pack=2", "workload.max_runtime_s=0.01,0", *TINY, *store["overrides"]])
    assert result.status == "FAILED" and [r["status"] for r in result.rows] == [
        "FAILED",
        "FAILED",
        "FINISHED",
        "FINISHED",
    ]
    assert all(r["error"] for r in result.rows[:2])  # each failed job says why
    failed, ran = result.packs
    assert failed["node/fps"] is None and "not every job of the pack finished" in failed["nulls"]["node/fps"]
    assert ran["status"] in ("FINISHED", "FAILED")  # measured, or null with its own reason (too short together)
    mlflow.set_tracking_uri(store["uri"])
    assert [mlflow.get_run(r["run_id"]).info.status for r in result.rows] == [
        "FAILED",
        "FAILED",
        "FINISHED",
        "FINISHED",
    ]


def test_the_nodes_cpu_gpu_ratio_counts_a_shared_gpu_once_and_own_units_summed():
    assert node_ratio([8, 8], [132, 132], own_units=False) == pytest.approx(16 / 132)  # time-slicing one H200
    assert node_ratio([8, 8], [64, 64], own_units=True) == pytest.approx(16 / 128)  # MPS shares
    assert node_ratio([1, 1], [1, 1], own_units=True) == 1.0  # a CPU's threads, each job its own
    assert node_ratio([8, None], [132, 132], own_units=False) is None  # unknown, not a number
