"""precision=: autocast where claimed, fp32 where claimed, FLOPs counted by torch's counter,
refusals before any job, the peak a job compares with, the report's precision verdict."""

from __future__ import annotations

import re
import threading
import types

import numpy as np
import pytest
import torch

import rlbench.algo.r2d2.learner as r2d2_learner
import rlbench.algo.vtrace.learner as vtrace_learner
from rlbench.config.rules import ConfigError
from rlbench.core.algorithms import algorithm
from rlbench.core.precision import Amp, allowed, precision_problem, published_peak
from rlbench.envs.spec import env_spec
from rlbench.envs.vector import StepBatch
from rlbench.prepare.validate import validate
from rlbench.roles.contract import AlgoContext
from rlbench.roles.inference import InferenceServer
from rlbench.roles.learner import LearnerLoop
from rlbench.telemetry.flops import FlopRate
from rlbench.tracking.store import config_hash
from tests.conftest import CARTPOLE_TINY, main_in_process, runs

DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
N = 4  # training envs


def _built(compose_cfg, algo: str, precision: str):
    """The algorithm's parts for CartPole at `precision` (set after validation: the tests run
    every precision's code path on any CPU), replay or the FIFO filled by central inference
    until the learner may update (as the profile times an update)."""
    from rlbench.core.algorithms import config_module
    from rlbench.predict.measure import synthetic_obs

    tiny = CARTPOLE_TINY if algo.startswith("r2d2") else [o for o in CARTPOLE_TINY if not o.startswith("algo.")]
    conf = validate(compose_cfg([*tiny, f"algo={algo}", f"actors={N}", "eval_envs=0"]), host=False)
    conf.precision = precision
    for key, value in config_module(conf.algo.name).profile_overrides(conf).items():
        setattr(conf.algo, key, value)
    done, spec = threading.Event(), env_spec(conf.env)
    parts = algorithm(conf.algo.name).build(AlgoContext(conf, spec, torch.device("cpu"), N, 0, done))
    server, rng = InferenceServer(parts.policy, torch.device("cpu"), N, actors=N), np.random.default_rng(0)
    k = 0
    while not parts.learner.may_update():
        server.step(StepBatch(np.arange(N), synthetic_obs(rng, N, spec), np.ones(N, np.float32), np.full(N, k == 0)))
        k += 1
    done.set()
    return parts, server, spec, rng


def _dtypes(module: torch.nn.Module, seen: list) -> None:
    module.register_forward_hook(lambda m, i, out: seen.append(out[0].dtype if isinstance(out, tuple) else out.dtype))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_r2d2_runs_its_torso_at_the_precision_and_its_lstm_state_and_head_in_fp32(compose_cfg, monkeypatch, precision):
    from rlbench.algo.common import torsos

    core: list = []

    def recorded(*args):
        out, (h, c) = lstm_core(*args)
        core.append({out.dtype, h.dtype, c.dtype})
        return out, (h, c)

    lstm_core = torsos.lstm_core
    monkeypatch.setattr(torsos, "lstm_core", recorded)  # the networks call the shared core through its module
    parts, server, spec, rng = _built(compose_cfg, "r2d2_vector", precision)
    for net in (parts.learner.net, parts.policy.shared.net):
        torso, head = [], []
        _dtypes(net.torso, torso), _dtypes(net.advantage, head)
        core.clear()
        if net is parts.learner.net:
            parts.learner.update()
        else:
            server.step(StepBatch(np.arange(N), synthetic(rng, spec), np.zeros(N, np.float32), np.zeros(N, bool)))
        assert torso and set(torso) == {DTYPE[precision]}, torso  # autocast: the torso's activations
        assert core and all(d == {torch.float32} for d in core) and set(head) == {torch.float32}  # LSTM, Q head: fp32


def test_the_lstm_under_autocast_is_torchs_cell_with_its_state_in_fp32():
    from rlbench.algo.common.torsos import _cell

    torch.manual_seed(0)
    cell, x, h, c = torch.nn.LSTMCell(10, 6), torch.randn(3, 10), torch.randn(3, 6), torch.randn(3, 6)
    h32, c32 = cell(x, (h, c))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h16, c16 = _cell(cell, x, h, c)
    assert h16.dtype == c16.dtype == torch.float32
    torch.testing.assert_close(h16, h32, atol=2e-2, rtol=0), torch.testing.assert_close(c16, c32, atol=2e-2, rtol=0)
    assert not torch.equal(h16, h32)  # the gate matmuls did run in bf16


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_vtrace_runs_its_torso_at_the_precision_and_its_heads_in_fp32(compose_cfg, precision):
    parts, *_ = _built(compose_cfg, "vtrace_vector", precision)
    torso, logits = [], []
    _dtypes(parts.learner.net.torso, torso), _dtypes(parts.learner.net.policy_logits, logits)
    parts.learner.update()
    assert set(torso) == {DTYPE[precision]} and set(logits) == {torch.float32}


def synthetic(rng, spec):
    from rlbench.predict.measure import synthetic_obs

    return synthetic_obs(rng, N, spec)


def _recording(fn, calls: list):
    def wrapped(*args, **kw):
        tensors = [a for a in (*args, *kw.values()) if isinstance(a, torch.Tensor) and a.is_floating_point()]
        calls.append(({t.dtype for t in tensors}, torch.is_autocast_enabled("cpu")))
        out = fn(*args, **kw)
        outs = out.values() if isinstance(out, dict) else [out]
        calls.append(({o.dtype for o in outs if isinstance(o, torch.Tensor)}, torch.is_autocast_enabled("cpu")))
        return out

    return wrapped


def test_r2d2_targets_loss_and_priorities_are_fp32_outside_autocast(compose_cfg, monkeypatch):
    calls: list = []
    for name in ("n_step_double_q_targets", "sequence_loss", "mixed_priority"):
        monkeypatch.setattr(r2d2_learner, name, _recording(getattr(r2d2_learner, name), calls))
    parts, *_ = _built(compose_cfg, "r2d2_vector", "bf16")
    parts.learner.update()
    assert len(calls) == 6 and all(dtypes == {torch.float32} and not autocast for dtypes, autocast in calls), calls


def test_vtrace_loss_and_importance_weights_are_fp32_outside_autocast(compose_cfg, monkeypatch):
    calls: list = []
    monkeypatch.setattr(vtrace_learner, "loss_terms", _recording(vtrace_learner.loss_terms, calls))
    parts, *_ = _built(compose_cfg, "vtrace_vector", "bf16")
    parts.learner.update()
    assert len(calls) == 2 and all(dtypes == {torch.float32} and not autocast for dtypes, autocast in calls), calls


def test_fp16_scales_the_loss_and_bf16_does_not(compose_cfg):
    fp16, *_ = _built(compose_cfg, "r2d2_vector", "fp16")
    bf16, *_ = _built(compose_cfg, "r2d2_vector", "bf16")
    assert bf16.learner.amp.scaler is None and fp16.learner.amp.scaler is not None
    fp16.learner.update()
    assert fp16.learner.amp.scaler.get_scale() > 1 and fp16.learner.updates == 1  # GradScaler's step ran


def test_tf32_sets_the_cuda_flags_for_the_job_and_restores_them():
    ns = types.SimpleNamespace
    backends = ns(cuda=ns(matmul=ns(allow_tf32=False)), cudnn=ns(allow_tf32=False))
    with Amp("fp32").scope(backends):
        assert not backends.cuda.matmul.allow_tf32
    with Amp("tf32").scope(backends):
        assert backends.cuda.matmul.allow_tf32 and backends.cudnn.allow_tf32
    assert not backends.cuda.matmul.allow_tf32 and not backends.cudnn.allow_tf32


def test_the_flop_count_of_known_layers_is_the_hand_count():
    rate = FlopRate()
    lin = torch.nn.Linear(7, 5)
    with rate.call(3):  # 3 items: a batch of 3 rows, forward and backward
        lin(torch.randn(3, 7)).sum().backward()
    # forward 2*3*7*5; backward as many for the weight's gradient (the input needs none)
    assert rate.flops_per_item == 2 * (2 * 3 * 7 * 5) / 3
    conv, rate = torch.nn.Conv2d(4, 32, 8, stride=4), FlopRate()
    with rate.call(2), torch.no_grad():
        conv(torch.zeros(2, 4, 84, 84))  # Nature-CNN's first layer: 20x20 outputs of 8x8x4 inputs
    assert rate.flops_per_item == 2 * 20 * 20 * 32 * (8 * 8 * 4)


def test_the_counted_call_is_left_out_of_the_rate_and_other_threads_are_not_counted():
    rate, lin = FlopRate(), torch.nn.Linear(64, 64)
    assert rate.tflops() is None
    other = threading.Thread(target=lambda: [lin(torch.randn(512, 64)) for _ in range(20)])
    with rate.call(1):
        other.start()
        other.join()
        lin(torch.randn(8, 64))
    assert rate.flops_per_item == 2 * 8 * 64 * 64 and rate.tflops() is None  # only its own thread's
    with rate.call(0):
        pass  # a call that did no work counts nothing
    assert rate.items == 0
    with rate.call(2):
        lin(torch.randn(8, 64))
        lin(torch.randn(8, 64))
    assert rate.items == 2 and rate.tflops() > 0


class _Matmuls(LearnerLoop):
    """Trains on every other call (the others only feed, as R2D2's first calls under the unroll queue)."""

    def __init__(self):
        super().__init__(3, threading.Event())
        self.calls, self.w = 0, torch.randn(32, 32, requires_grad=True)

    def may_update(self) -> bool:
        return True

    def update(self) -> float:
        self.calls += 1
        if self.calls % 2:
            return self.last_loss
        loss = (torch.randn(16, 32) @ self.w).sum()
        loss.backward()
        self.updates += 1
        return float(loss)


def test_learner_tflops_counts_the_first_update_that_trained_and_times_the_others():
    learner = _Matmuls()
    learner.run(threading.Event())
    metrics, nulls = learner.efficiency()
    assert metrics["learner_flops_per_update"] == 2 * (2 * 16 * 32 * 32) and not nulls  # forward + the weight's grad
    assert learner.flops.items == 2 and metrics["learner_tflops"] > 0
    one = _Matmuls()
    one.update_target = 1
    one.run(threading.Event())
    assert one.efficiency() == (
        {"learner_flops_per_update": 2 * (2 * 16 * 32 * 32)},
        {
            "learner_tflops": "only the first learner update (counted by FlopCounterMode, so left out of "
            "the rate) did work"
        },
    )


CPU_BF16 = frozenset({"avx512f", "avx512_bf16"})


@pytest.mark.parametrize(
    "precision, device, flags, major, says",
    [
        (
            "fp16",
            "cpu",
            CPU_BF16,
            None,
            (
                "precision=fp16: no fast fp16 math on this CPU (x) (none of the CPU flags "
                "avx512_fp16, amx_fp16); allowed on device cpu: fp32, bf16"
            ),
        ),
        ("bf16", "cpu", frozenset({"avx2"}), None, "allowed on device cpu: fp32"),
        (
            "tf32",
            "cpu",
            CPU_BF16,
            None,
            "precision=tf32: TF32 is a CUDA tensor-core format; allowed on device cpu: fp32, bf16",
        ),
        (
            "bf16",
            "cuda",
            frozenset(),
            7,
            (
                "precision=bf16: needs compute capability >= 8.0 for tensor-core bf16, "
                "Tesla V100 has 7.x; allowed on device cuda: fp32, fp16"
            ),
        ),
        ("tf32", "cuda", frozenset(), 7, "allowed on device cuda: fp32, fp16"),
    ],
)
def test_a_precision_the_device_cannot_run_fast_is_refused_naming_key_device_and_allowed(
    precision, device, flags, major, says
):
    name = "this CPU (x)" if device == "cpu" else "Tesla V100"
    assert says in precision_problem(precision, device, name, flags, major)


def test_what_each_device_runs_fast():
    assert allowed("cpu", CPU_BF16) == ["fp32", "bf16"]
    assert allowed("cpu", frozenset({"avx512_bf16", "amx_fp16"})) == ["fp32", "bf16", "fp16"]
    assert allowed("cuda", cuda_major=9) == ["fp32", "tf32", "bf16", "fp16"] and allowed("cuda", cuda_major=6) == [
        "fp32"
    ]
    assert precision_problem("fp32", "cpu", "any", frozenset()) is None


def test_validation_refuses_a_precision_this_cpu_lacks_before_any_job(compose_cfg, monkeypatch):
    import rlbench.core.precision

    monkeypatch.setattr(rlbench.core.precision, "cpu_flags", lambda: CPU_BF16)
    with pytest.raises(
        ConfigError,
        match=r"precision=fp16: no fast fp16 math on this CPU .*allowed on device cpu: "
        r"fp32, bf16",
    ):
        validate(compose_cfg(["env=cartpole", "device=cpu", "precision=fp16"]))
    assert validate(compose_cfg(["env=cartpole", "device=cpu", "precision=bf16"])).precision == "bf16"
    monkeypatch.setattr(rlbench.core.precision, "cpu_flags", lambda: frozenset({"avx2"}))
    with pytest.raises(ConfigError, match="precision=bf16: no fast bf16 math"):
        validate(compose_cfg(["env=cartpole", "device=cpu", "precision=bf16"]))
    with pytest.raises(ConfigError, match="precision='fp8': allowed: one of fp32, tf32, bf16, fp16"):
        validate(compose_cfg(["env=cartpole", "precision=fp8"]))


def test_the_command_refuses_it_with_exit_2_and_records_nothing(store, rlbench_main):
    out = rlbench_main(["env=cartpole", "device=cpu", "precision=tf32", *store["overrides"]])
    assert (
        out.returncode == 2
        and "\n  precision=tf32: TF32 is a CUDA tensor-core format; allowed on device cpu: fp32" in out.stderr
    ), out.stderr[-2000:]
    assert "Traceback" not in out.stderr and runs(store["uri"]) == []


def test_fp32_jobs_keep_their_config_hash_and_other_precisions_get_their_own(compose_cfg):
    import dataclasses
    import hashlib
    import json

    conf = validate(compose_cfg(["env=cartpole"]), host=False)
    d = dataclasses.asdict(conf)
    for key in (
        "tracking",
        "progress",
        "resume",
        "repeats",
        "dry_run",
        "verdict",
        "sweep",
        "pack",
        "packing",
        "actor_procs",
        "actor_hosts",
        "actor_launch",
        "actor_server",
        "precision",
        "hot_path",
    ):
        d.pop(key)  # the work as it was hashed before the key existed
    assert config_hash(conf) == hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
    conf.precision = "bf16"
    assert config_hash(conf) != config_hash(validate(compose_cfg(["env=cartpole"]), host=False))


def test_a_known_gpu_takes_its_published_peak_and_a_cpu_the_profiles_gemm(store):
    import mlflow

    from rlbench.config.schema import TrackingConfig
    from rlbench.tracking.peaks import host_peak, peak_metric
    from rlbench.tracking.profiles import write_profile

    assert published_peak("NVIDIA H100 80GB HBM3", "bf16") == (989.4, "published: NVIDIA H100 datasheet, dense bf16")
    assert published_peak("NVIDIA H100 PCIe", "fp32")[0] == 51.2 and published_peak("Tesla V100", "bf16") is None
    mlflow.set_tracking_uri(store["uri"])
    assert host_peak("bf16", "cuda", "NVIDIA A100-SXM4-40GB", "h")[0] == 312.0
    none, why = host_peak("bf16", "cpu", "cpu", "h", experiment="profiles")
    assert none is None and "python -m rlbench.profile precision=bf16" in why
    tags = {"host": "h", "profile_device": "cpu", "env_id": "CartPole-v1"}
    run = write_profile(
        TrackingConfig(uri=store["uri"], experiment="profiles"),
        "p",
        tags,
        {"precision": "bf16"},
        {},
        {peak_metric("bf16"): 1.25},
        [],
    )
    assert host_peak("bf16", "cpu", "cpu", "h", experiment="profiles") == (
        1.25,
        f"measured: a bf16 GEMM in profile run {run} of this host",
    )
    assert host_peak("fp32", "cpu", "cpu", "h", experiment="profiles")[0] is None  # measured per precision


def test_the_gemm_peak_is_2n3_flops_over_the_fastest_time():
    from rlbench.predict.measure import gemm_peak

    peak = gemm_peak("bf16", torch.device("cpu"), n=128, repeats=2)
    assert peak["tflops"] == pytest.approx(2 * 128**3 / peak["seconds"] / 1e12) and peak["precision"] == "bf16"


def test_the_verdict_says_how_far_the_best_actor_count_moved_or_what_bounds_instead():
    from rlbench.report.rules import precision_shift

    fp32 = {"actors": 4, "runtime_s": 100.0, "ratio": None, "bound": "learner 80%", "learner_mfu": 0.2}
    bf16 = {"actors": 40, "runtime_s": 60.0, "ratio": None, "bound": "environment stepping 55%", "learner_mfu": 0.1}
    moved = precision_shift({"bf16": bf16, "fp32": fp32})
    assert moved.moved and moved.text == (
        "the best actor count moved between precisions: fp32 best at 4 actors (100.0 s, learner_mfu 20.0%); "
        "bf16 best at 40 actors (60.0 s, -40% task time against fp32, learner_mfu 10.0%)"
    )
    still = precision_shift({"fp32": fp32, "bf16": bf16 | {"actors": 4}})
    assert not still.moved and still.text.startswith("the best actor count did not move (4 actors at every precision)")
    assert still.text.endswith("what bounds the best jobs instead: fp32 learner 80%, bf16 environment stepping 55%")
    assert precision_shift({"fp32": fp32}) is None


def _job(name, precision, actors, runtime):
    from rlbench.tracking.study_records import JobRun

    params = {"actors": str(actors)} | ({"precision": precision} if precision else {})
    return JobRun(
        run_id=name,
        name=name,
        status="FINISHED",
        params=params,
        nulls={},
        tags={},
        metrics={"runtime_s": runtime, "fps": 1000.0 * actors / runtime, "cpu_gpu_ratio": 1.0},
    )


def test_the_report_draws_runtime_and_fps_per_precision_and_a_job_without_the_param_is_fp32():
    from rlbench.report.figures import precision_scaling
    from rlbench.report.findings import precision_best
    from rlbench.tracking.study_records import Study

    jobs = [
        _job("a", None, 4, 100.0),
        _job("b", None, 40, 90.0),
        _job("c", "bf16", 4, 70.0),
        _job("d", "bf16", 40, 50.0),
    ]
    study = Study(kind="sweep", title="t", parent_id="p", host={}, jobs=jobs, missing=[])
    drawn = precision_scaling(study)
    gids = {line.get_gid() for ax in drawn.fig.axes for line in ax.get_lines()}
    assert gids == {"runtime_s|precision=fp32", "runtime_s|precision=bf16", "fps|precision=fp32", "fps|precision=bf16"}
    best = precision_best(jobs)
    assert (best["fp32"]["actors"], best["bf16"]["actors"], best["bf16"]["runtime_s"]) == (40, 40, 50.0)
    one = Study(kind="sweep", title="t", parent_id="p", host={}, jobs=jobs[:2], missing=[])
    assert precision_scaling(one).fig is None and precision_best(jobs[:2]) == {}


@pytest.mark.e2e
def test_a_precision_sweep_records_both_precisions_and_their_flop_rates(store, tmp_path, capsys, monkeypatch):
    import rlbench.core.precision
    from rlbench.predict import measure
    from rlbench.report.findings import findings
    from rlbench.tracking.study_records import load_parent
    from tests.bf16_cpu import cpu_flags

    monkeypatch.setattr(
        rlbench.core.precision, "cpu_flags", cpu_flags
    )  # the sweep and the profiles run in this process
    peak = measure.gemm_peak  # their GEMM peak small: bf16 emulated on a CPU without it takes minutes at 2048
    monkeypatch.setattr(
        measure, "gemm_peak", lambda precision, device, n=None, repeats=5: peak(precision, device, 256, 2)
    )
    args = [
        "-m",
        "precision=fp32,bf16",
        *CARTPOLE_TINY,
        "workload.learner_updates=3",
        "actors=2",
        "progress=log",
        *store["overrides"],
    ]
    out = main_in_process(args)  # any CPU: this tests the record, not the CPU
    assert out.returncode == 0, out.stderr[-3000:]
    all_runs = runs(store["uri"])
    (parent,) = [r for r in all_runs if r.data.tags.get("rlbench.role") == "sweep"]
    kids = [r for r in all_runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(k.data.params["precision"] for k in kids) == ["bf16", "fp32"]
    assert sorted(k.info.run_name for k in kids) == ["precision=bf16", "precision=fp32"]
    for k in kids:
        m = k.data.metrics
        assert k.info.status == "FINISHED" and m["learner_tflops"] > 0 and m["inference_tflops"] > 0
        assert m["learner_flops_per_update"] > 0 and "learner_mfu" in k.data.tags["unmeasured"]  # no profile here
    assert len({k.data.tags["config_hash"] for k in kids}) == 2
    f = findings(load_parent(parent.info.run_id))
    assert f["precision"]["text"].startswith("the best actor count did not move (2 actors at every precision)")
    _validate_and_report_per_precision(store, parent.info.run_id, tmp_path, capsys)


def _validate_and_report_per_precision(store, parent: str, tmp_path, capsys):
    """A tiny profile per precision; --validate and the report predict each job from its own."""
    from rlbench.cli.predict import main as predict_main
    from rlbench.cli.profile import main as profile_main
    from rlbench.report.build import build_report
    from rlbench.tracking.study_records import load_parent

    tiny = [
        "--threads",
        "1",
        "--envs",
        "2",
        "--batches",
        "2,4",
        "--units",
        "1",
        "--seconds",
        "0.2",
        "--repeats",
        "2",
        "--updates",
        "1",
        "--corun-envs",
        "0",
        "--tracking-uri",
        store["uri"],
        *CARTPOLE_TINY,
        "eval_envs=0",
    ]
    assert predict_main(["--validate", "--sweep", parent, "--tracking-uri", store["uri"], "--no-log"]) == 2
    assert re.search(r"precision '(fp32|bf16)'", capsys.readouterr().err)  # no profile yet: names the precision
    ids = {}
    for p in ("fp32", "bf16"):
        assert profile_main([*tiny, f"precision={p}"]) == 0
        ids[p] = re.search(r"profile logged as run ([0-9a-f]+)", capsys.readouterr().out).group(1)
    result = build_report(load_parent(parent), tmp_path / "report")  # before --validate names one profile
    assert {"precision_scaling", "predicted_vs_measured"} <= set(result["figures"])
    (model,) = [ln for ln in result["lines"] if ln.startswith("model: prediction_error=")]
    assert "over 2 jobs" in model and ids["fp32"][:8] in model and ids["bf16"][:8] in model
    assert any(ln.startswith("precision: the best actor count did not move") for ln in result["lines"])
    assert predict_main(["--validate", "--sweep", parent, "--tracking-uri", store["uri"]]) == 0
    out = capsys.readouterr().out
    assert ids["fp32"][:8] in out and ids["bf16"][:8] in out and "prediction_error=" in out
    again = build_report(load_parent(parent), tmp_path / "again")  # after --validate logged its profiles
    (model,) = [ln for ln in again["lines"] if ln.startswith("model: prediction_error=")]
    assert "over 2 jobs" in model and ids["fp32"][:8] in model and ids["bf16"][:8] in model
