"""Cost curves of this host, measured with rlbench's real components (`python -m rlbench.profile`).

`env_curve` (env stepping), `inference_curve`, `fit_inference` (central inference per batch and
unit count), `update_time` (a learner update), `corun` (the actor loop beside the learner),
`gemm_peak` (a precision's GEMM peak). docs/predict.md.
"""

from __future__ import annotations

import copy
import statistics
import threading
import time

import numpy as np

from rlbench.core.algorithms import algorithm, config_module
from rlbench.core.precision import Amp
from rlbench.core.resources import ComputeLimit, resolve_device
from rlbench.envs.spec import env_spec
from rlbench.envs.vector import StepBatch, make_actors
from rlbench.predict.power import metered
from rlbench.roles.contract import AlgoContext


def env_curve(env_conf, points: list[tuple[int, int]], seconds: float = 2.0, seed: int = 0) -> list[dict]:
    """[{threads, envs, sps, env_step_s, reset_s}] for each (threads, envs); reset_s: the first
    reset of all envs (a job's actors do it before their first step: up to noop_max no-ops per
    Atari env), timed apart from the stepping."""

    rows = []
    for threads, envs in points:
        env = make_actors(env_conf, envs, threads, 0)
        rng = np.random.default_rng(seed)
        try:
            t0 = time.perf_counter()
            env.reset(seed=seed)
            reset_s = time.perf_counter() - t0
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                env.send(rng.integers(0, env.num_actions, envs))
                steps += len(env.recv().env_ids)
            sps = steps / (time.perf_counter() - t0)
        finally:
            env.close()
        used = min(env.threads_used, envs)
        rows.append(
            {"threads": env.threads_used, "envs": envs, "sps": sps, "env_step_s": used / sps, "reset_s": reset_s}
        )
    return rows


def inference_curve(conf, batches: list[int], units: list[int], repeats: int = 20) -> list[dict]:
    """[{units, batch, seconds}]: the median of `repeats` calls per point (after 2 untimed ones),
    timed in a thread under the units' grant, as central inference runs in a job."""
    rows = []
    for u in units:
        for b in batches:
            rows.append({"units": u, "batch": b, "seconds": _time_calls(conf, b, u, repeats)})
    return rows


def _server(conf, batch: int):
    """(device, env spec, a central-inference server of `batch` envs on the algorithm's policy),
    made as a job makes it (rlbench/train/trainer.py wire_inference)."""
    from rlbench.train.trainer import wire_inference  # lazy: keeps torch off the start

    device, spec = resolve_device(conf.device), env_spec(conf.env)
    _, server = wire_inference(
        algorithm(conf.algo.name).build, AlgoContext(conf, spec, device, batch, 0, threading.Event())
    )
    return device, spec, server


def _time_calls(conf, batch: int, units: int, repeats: int) -> float:
    import torch  # lazy: keeps torch off the start

    device, spec, server = _server(conf, batch)
    rng = np.random.default_rng(0)
    obs = synthetic_obs(rng, batch, spec)
    ids = np.arange(batch)
    times: list[float] = []

    def run() -> None:
        for k in range(repeats + 2):
            step = StepBatch(ids, obs, np.zeros(batch, np.float32), np.full(batch, k == 0))
            t0 = time.perf_counter()
            server.step(step)
            if k >= 2:
                times.append(time.perf_counter() - t0)

    with ComputeLimit(units, device, conf.sm_backend) as compute, torch.inference_mode():
        thread = threading.Thread(target=lambda: _in_scope(compute.thread_scope, run))
        thread.start()
        thread.join()
    if len(times) != repeats:
        raise RuntimeError(f"inference timing at batch {batch}, {units} units did not complete")
    return statistics.median(times)


def gemm_peak(precision: str, device, n: int | None = None, repeats: int = 5) -> dict:
    """{precision, n, seconds, tflops}: the fastest of `repeats` n x n GEMMs in the precision's
    dtype (tf32: fp32 operands with TF32 allowed), after 2 untimed ones, on all of the device
    (every CPU thread; the whole GPU). 2 n^3 FLOPs each."""
    import torch  # lazy: keeps torch off the start

    amp = Amp(precision, device.type)
    n = n or (8192 if device.type == "cuda" else 2048)
    gen = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, device=device, generator=gen).to(amp.dtype) for _ in range(2))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    with amp.scope():
        for k in range(repeats + 2):
            sync()
            t0 = time.perf_counter()
            torch.mm(a, b)
            sync()
            if k >= 2:
                times.append(time.perf_counter() - t0)
    best = min(times)
    return {"precision": precision, "n": n, "seconds": best, "tflops": 2 * n**3 / best / 1e12}


def synthetic_obs(rng: np.random.Generator, n: int, spec) -> np.ndarray:
    """`n` random observations of the env's spec: uniform bytes for uint8 frames (images),
    standard normal otherwise (float vectors)."""
    shape = (n, *spec.obs_shape)
    obs = rng.integers(0, 255, shape) if spec.obs_dtype == np.uint8 else rng.standard_normal(shape)
    return obs.astype(spec.obs_dtype)


def _learner_setup(conf, envs: int, gate: threading.Event, why: str):
    """(conf copy with `envs` actors, its AlgoContext, the algorithm's parts, central inference
    on their policy), wired as a job wires them (rlbench/train/trainer.py), for timing its
    learner, with the algorithm's `profile_overrides` (R2D2: min_replay lowered to one batch, no
    more to wait for; its coupling free running, no unroll queue to block the actors); `gate` is
    the learner's actors-done event, which lifts its replay-ratio wait once set."""
    from rlbench.train.trainer import wire_inference  # lazy: keeps torch off the start

    conf = copy.deepcopy(conf)
    conf.actors = envs
    for key, value in config_module(conf.algo.name).profile_overrides(conf).items():
        setattr(conf.algo, key, value)  # what the algorithm declares its learner needs to be timed alone
    ctx = AlgoContext(conf, env_spec(conf.env), resolve_device(conf.device), envs, 0, gate)
    parts, inference = wire_inference(algorithm(conf.algo.name).build, ctx)
    if parts.learner is None:
        raise ValueError(f"algo.name={conf.algo.name} with learner={conf.learner}: no learner {why}")
    return conf, ctx, parts, inference


def _run_granted(compute, fn) -> None:
    """Run `fn` in a thread inside the grant's thread scope (as a job's roles run); its error
    is raised here."""
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _in_scope(compute.thread_scope, fn, errors))
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def learner_with_data(conf):
    """(conf as the learner is timed, device, the algorithm's learner, fill): `fill()` steps
    central inference on synthetic observations until the learner may update (replay or the
    FIFO as a job fills it; the actors count as done, so R2D2's replay ratio does not hold it
    back: the update's cost does not depend on how the data arrived)."""
    done = threading.Event()
    conf, ctx, parts, server = _learner_setup(conf, conf.actors, done, "to time")
    n, learner, spec, rng = conf.actors, parts.learner, ctx.spec, np.random.default_rng(0)

    def fill() -> None:
        k = 0
        while not learner.may_update():
            obs = synthetic_obs(rng, n, spec)
            server.step(StepBatch(np.arange(n), obs, np.zeros(n, np.float32), np.full(n, k == 0)))
            k += 1
            if k > 1_000_000:
                raise RuntimeError("the learner never became ready to update")
        done.set()  # from now on only the data the learner needs, no replay-ratio wait

    return conf, ctx.device, learner, fill


def update_time(conf, units: int, repeats: int = 3, power: list | None = None) -> dict:
    """{"units", "seconds": the median of `repeats` updates, "first_s": the first update (a
    job pays it too: first allocations and autograd set-up; cold only for the first unit
    count profiled in a process)}. Replay or the FIFO is
    filled by central inference from synthetic observations (as a job fills it) until the
    learner may update; the actors count as done, so R2D2's replay ratio does not hold it back
    (the update's cost does not depend on how the data arrived)."""

    conf, device, learner, fill = learner_with_data(conf)
    times: list[float] = []

    def one() -> None:
        fill()
        t0 = time.perf_counter()
        learner.update()
        times.append(time.perf_counter() - t0)

    def timed() -> None:
        one()  # the first update, reported apart
        with metered(power, "learner", units):  # the timed updates together, as one state
            for _ in range(repeats):
                one()

    with ComputeLimit(units, device, conf.sm_backend) as compute:
        _run_granted(compute, timed)
    return {"units": units, "seconds": statistics.median(times[1:]), "first_s": times[0]}


def corun(
    conf, envs: int, threads: int, units: int, seconds: float = 3.0, updates: int = 1, power: list | None = None
) -> dict:
    """The actor loop as a job runs it (rlbench's ActorRole: env stepping, then central
    inference of all envs; no eval envs), `seconds` alone, then while the learner updates back
    to back in another thread, both under the units' grant (they share the host as in a job):
    {units, envs, threads, loop_sps, corun_sps, corun_update_s}. The learner starts
    once replay holds a batch and does not wait for the replay ratio; the first update is
    untimed, the next `updates` are timed with the actors' steps during them."""
    from rlbench.train.trainer import wire_actors  # lazy: keeps torch off the start

    free = threading.Event()
    free.set()  # the learner's view: never wait for the replay ratio
    conf, ctx, parts, inference = _learner_setup(conf, envs, free, "to run beside the actors")
    role = wire_actors(make_actors(conf.env, envs, threads, 0), inference, parts, ctx, 1 << 62, conf.seed)
    stop, errors, marks = threading.Event(), [], []
    with ComputeLimit(units, ctx.device, conf.sm_backend) as compute:
        actors = threading.Thread(target=lambda: _in_scope(compute.thread_scope, lambda: role.run(stop), errors))
        actors.start()
        try:
            _wait(lambda: role.stepping_since is not None or errors, 600, "the envs' first reset")
            with metered(power, "actors", units):
                s0, t0 = role.steps, time.perf_counter()
                time.sleep(seconds)
                loop_sps = (role.steps - s0) / (time.perf_counter() - t0)
            _wait(lambda: parts.learner.may_update() or errors, 600, "replay to hold a batch")

            def learn() -> None:
                marks.append((time.perf_counter(), role.steps))
                parts.learner.update()  # untimed: the first update warms up
                with metered(power, "both", units):
                    for _ in range(updates):
                        marks.append((time.perf_counter(), role.steps))
                        parts.learner.update()
                    marks.append((time.perf_counter(), role.steps))

            learner = threading.Thread(target=lambda: _in_scope(compute.thread_scope, learn, errors))
            learner.start()
            learner.join()
        finally:
            stop.set()
            actors.join()
            role.env.close()
    if errors:
        raise errors[0]
    (t1, n1), (t2, n2) = marks[1], marks[-1]
    return {
        "units": units,
        "envs": envs,
        "threads": role.env.threads_used,
        "loop_sps": loop_sps,
        "corun_sps": (n2 - n1) / (t2 - t1),
        "corun_update_s": (t2 - t1) / updates,
    }


def _wait(ready, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the co-run waited {timeout_s:g} s for {what}")
        time.sleep(0.02)


def _in_scope(scope, fn, errors: list | None = None) -> None:
    try:
        with scope():
            fn()
    except BaseException as e:  # re-raised by the caller's thread
        if errors is None:
            raise
        errors.append(e)


def fit_inference(rows: list[dict]) -> dict[int, tuple[float, float]]:
    """{units: (fixed_s, per_env_s)}: least squares of seconds = fixed + per_env x batch, per
    unit count (needs two or more batch sizes). Both parts are costs, so the fit is constrained
    to be >= 0: a negative slope (noise over a flat curve) becomes 0 with the mean as the fixed
    part; a negative fixed part becomes 0 with the slope refitted through the origin."""
    out = {}
    for u in sorted({r["units"] for r in rows}):
        pts = [(r["batch"], r["seconds"]) for r in rows if r["units"] == u]
        if len({b for b, _ in pts}) < 2:
            raise ValueError(f"units={u}: fitting needs two or more batch sizes, got {sorted({b for b, _ in pts})}")
        out[u] = fit_cost_line(pts)
    return out


def fit_cost_line(pts: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed, per_x): least squares of y = fixed + per_x x through (x, y) points of two or more
    x values, both parts kept >= 0 as costs are: a negative slope (noise over a flat curve)
    becomes 0 with the mean as the fixed part; a negative fixed part becomes 0 with the slope
    refitted through the origin."""
    slope, fixed = np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)
    if slope < 0:
        fixed, slope = float(np.mean([y for _, y in pts])), 0.0
    elif fixed < 0:
        fixed, slope = 0.0, sum(x * y for x, y in pts) / sum(x * x for x, _ in pts)
    return float(fixed), float(slope)
