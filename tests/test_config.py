"""The config tree composes, every group validates, and bad input is refused early."""

import time

import pytest

from rlbench.algo.r2d2.sequences import unroll_layout
from rlbench.config.rules import ConfigError
from rlbench.prepare.validate import validate
from tests.conftest import rlbench_cli, runs


@pytest.mark.parametrize("env", ["pong", "breakout", "cartpole"])
@pytest.mark.parametrize("workload", ["smoke", "default", "large"])
def test_every_group_composes_and_validates(compose_cfg, env, workload):
    conf = validate(compose_cfg([f"env={env}", f"workload={workload}"]))
    assert conf.workload.name == workload
    assert conf.algo.network.torso == ("mlp" if env == "cartpole" else "nature_cnn")


def test_cartpole_picks_its_algo_and_workload(compose_cfg):
    conf = validate(compose_cfg(["env=cartpole"]))
    assert conf.env.id == "CartPole-v1" and conf.workload.name == "cartpole" and conf.algo.burn_in == 4


def test_defaults_are_pong_r2d2_reference(compose_cfg):
    conf = validate(compose_cfg([]))
    a = conf.algo
    assert conf.env.id == "pong" and conf.env.frameskip == 4 and conf.env.stack == 4
    assert (a.burn_in, a.seq_len, a.overlap, a.n_step, a.discount) == (40, 80, None, 5, 0.997)
    assert unroll_layout(a.burn_in, a.seq_len, a.overlap) == (121, 41)  # SEED RL: burn-in + 80 + 1, tiled
    # SEED's published Atari run (gcp/train_atari.sh): replay_ratio 0.75, clip_norm 80, lr 1e-4
    assert (a.samples_per_insert, conf.env.reward_clipping, conf.eval_epsilon) == (0.75, False, 0.001)
    assert (a.priority_eta, a.priority_exponent, a.importance_exponent) == (0.9, 0.9, 0.6)
    assert (a.target_update, a.learning_rate, a.adam_eps, a.batch_size, a.grad_clip) == (2500, 1e-4, 1e-3, 64, 80)
    assert (a.coupling, a.unroll_queue_size) == ("unroll_queue", 100)  # SEED's unroll_queue_max_size


@pytest.mark.parametrize(
    "override, key",
    [
        ("actors=0", "actors=0"),
        ("actors=-3", "actors=-3"),
        ("workload.frames=0", "workload.frames=0"),
        ("sm_limit=0", "sm_limit=0"),
        ("algo.overlap=100", "algo.overlap=100"),
        ("actor_threads=100000", "actor_threads=100000"),
        ("algo.overlap=10", "algo.overlap=10"),
        ("eval_envs=-1", "eval_envs=-1"),
        ("algo.replay_memory_gb=0", "algo.replay_memory_gb=0"),
        ("repeats=0", "repeats=0"),
    ],
)
def test_validate_names_key_value_and_rule(compose_cfg, override, key):
    with pytest.raises(ConfigError, match="allowed") as e:
        validate(compose_cfg([override]))
    assert key in str(e.value)


def test_too_few_frames_for_one_sequence_is_refused(compose_cfg):
    # 40 actors x (121 - 40) steps x frameskip 4: the first sequence is zero-padded over the burn-in
    with pytest.raises(ConfigError, match=r"workload.frames=1000: too few .* allowed: >= 12960"):
        validate(compose_cfg(["workload.frames=1000"]))


BAD = {
    "actors=0": ["actors=0", "allowed: an integer >= 1"],
    "actors=-3": ["actors=-3", "allowed: an integer >= 1"],
    "actors=abc": ["abc", "actors", "allowed: an integer"],
    "actorz=4": ["actorz", "'4'", "allowed top-level keys", "did you mean 'actors'"],
    "env=nosuchgame": ["nosuchgame", "no such env preset", "pong"],
    "workload.frames=0": ["workload.frames=0", "allowed: an integer >= 1"],
    "sm_limit=0": ["sm_limit=0", "allowed: null (all) or an integer >= 1"],
    "search.n_trials=3": ["'search.n_trials' (value '3')", "search group, which is not selected", "search=ratio"],
}


def _bad_args(bad: str, multirun: bool) -> list[str]:
    """In the multirun, the bad value sits in a later job: nothing may start before it is found."""
    key = bad.split("=")[0]
    if multirun and "." not in key and key in ("actors", "sm_limit"):
        return ["-m", f"{key}=4,{bad.split('=')[1]}"]
    return ["-m", "seed=1,2", bad] if multirun else [bad]


def _refused_fast(command, store, bad: str, multirun: bool) -> None:
    t0 = time.monotonic()
    out = command(_bad_args(bad, multirun) + store["overrides"] + ["workload=smoke"])
    assert out.returncode == 2, out.stderr[-2000:]  # a refusal (docs/usage.md)
    for fragment in BAD[bad]:
        assert fragment in out.stderr + out.stdout, out.stderr
    assert time.monotonic() - t0 < 30
    assert not store["db"].exists() or runs(store["uri"]) == []


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("multirun", [False, True], ids=["run", "multirun"])
def test_bad_input_exits_fast_with_message_and_no_run(store, bad, multirun, rlbench_main):
    """The command's main() in this process: the same check, message and exit code as a shell's."""
    _refused_fast(rlbench_main, store, bad, multirun)


@pytest.mark.e2e
@pytest.mark.parametrize("multirun", [False, True], ids=["run", "multirun"])
def test_bad_input_exits_fast_from_a_shell_too(store, multirun):
    """One refusal per mode as a new process: its exit status as the shell sees it."""
    _refused_fast(lambda args: rlbench_cli(args, timeout=60), store, "actors=0", multirun)


def test_replay_that_would_not_fit_in_free_memory_is_refused_with_the_numbers(compose_cfg):
    with pytest.raises(
        ConfigError,
        match=r"algo.replay_capacity=1000000: replay needs [\d.]+ GB \(1000000 "
        r"sequences x 0.89\d MB\) but this host has [\d.]+ GB free; allowed: at most",
    ):
        validate(compose_cfg(["algo.replay_capacity=1000000"]))


def test_replay_memory_budget_sets_the_capacity(compose_cfg):
    from rlbench.algo.r2d2.derived import replay_capacity, sequence_bytes
    from rlbench.envs.spec import env_spec

    conf = validate(compose_cfg(["algo.replay_memory_gb=0.5"]))
    spec = env_spec(conf.env)
    per_seq = sequence_bytes(conf, spec)
    # 121 frames + 3 head frames of 84x84 bytes, plus actions, rewards, dones, Q values (18 actions) and
    # the LSTM state
    assert per_seq == 124 * 84 * 84 + 121 * (8 + 8 + 4 + 1 + 18 * 4) + 2 * 512 * 4
    assert replay_capacity(conf, per_seq) == int(0.5e9 // per_seq) == 561


def test_learner_updates_follow_from_frames_and_the_replay_ratio(compose_cfg):
    from rlbench.algo.r2d2.config import task_replay_ratio

    conf = validate(compose_cfg([]))  # default workload: 200k frames, learner_updates null
    # 625 sequences, one insertion batch of int(64 / 0.75) = 85 per update (the first after one fill)
    assert conf.workload.learner_updates == 200_000 // 4 // 80 // 85 == 7
    assert task_replay_ratio(conf) == pytest.approx(7 * 64 / 625)
    assert validate(compose_cfg(["workload=large"])).workload.learner_updates == 10_000_000 // 4 // 80 // 85
    free = ["algo.coupling=free_running"]  # samples per inserted sequence / batch, rounded
    assert validate(compose_cfg(free + ["algo.samples_per_insert=1.5"])).workload.learner_updates == 15
    with pytest.raises(ConfigError, match="algo.samples_per_insert=0"):
        validate(compose_cfg(free + ["algo.samples_per_insert=0"]))


def test_a_cuda_device_this_host_lacks_is_refused_naming_it(compose_cfg, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"device=cuda: this host has no CUDA device .*; allowed: auto or cpu"):
        validate(compose_cfg(["device=cuda"]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a fake one-GPU host
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(
        ConfigError,
        match=r"device=cuda:1: this host has 1 CUDA device\(s\); allowed: auto or cpu, "
        r"or cuda:0..cuda:0",
    ):
        validate(compose_cfg(["device=cuda:1"]))


@pytest.mark.parametrize(
    "line",
    [
        ["env=cartpole", "actors=3", "workload.frames=5000"],
        ["actors=3", "env=cartpole", "algo=vtrace", "algo.learning_rate=0.001"],
        ["env=breakout", "env.stack=2", "+tracking.tags={a: b}", "tracking.experiment=x"],
        ["workload=smoke", "telemetry.cpu_tdp_w=null", "env.id=pong", "~eval_epsilon"],
    ],
)
def test_the_tests_compose_cache_gives_what_hydra_composes(line):
    """conftest composes a line's config groups once and sets its values after, as Hydra does:
    the config must be the one Hydra composes from the whole line, struct flag included."""
    from omegaconf import OmegaConf

    from rlbench.prepare import compose

    fast, whole = compose.compose_config(line), compose.compose_config.uncached(line)
    assert OmegaConf.to_yaml(fast) == OmegaConf.to_yaml(whole)
    assert OmegaConf.is_struct(fast) and OmegaConf.is_struct(whole)


@pytest.mark.parametrize(
    "line", [["env=cartpole", "actorz=3"], ["actors=abc", "env=cartpole"], ["env=nosuch", "actors=3"], ["+actors=3"]]
)
def test_the_tests_compose_cache_refuses_what_hydra_refuses(line):
    from rlbench.prepare import compose

    with pytest.raises(Exception) as fast:
        compose.compose_config(line)
    with pytest.raises(Exception) as whole:
        compose.compose_config.uncached(line)
    assert (type(fast.value), str(fast.value)) == (type(whole.value), str(whole.value))


def test_a_grids_jobs_compose_as_hydras_launcher_composes_them_their_groups_once(monkeypatch):
    """JobComposer (validate_jobs) composes a job from its groups' composition with its values set
    after; each job's config equals Hydra's whole composition of it (less the node that lists the
    job's own overrides), the groups are composed once per line of groups, and a value that does
    not apply is composed whole, so the error is Hydra's own."""
    from hydra import initialize_config_dir
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from rlbench.config.schema import register_configs
    from rlbench.prepare.compose import CONF_DIR
    from rlbench.prepare.grid import JobComposer

    register_configs()
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", ConfigLoaderImpl.load_configuration.uncached)
    jobs = [
        ["env=cartpole", "actors=3"],
        ["env=cartpole", "actors=5", "~eval_envs", "+tracking.tags.k=v"],
        ["env=pong", "actors=3"],
        ["actors=7", "algo=vtrace", "algo.unroll_length=9", "hydra.job.chdir=false"],
        ["env=cartpole", "actors=4"],
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["hydra.job.chdir=false"], RunMode.MULTIRUN)
        compose = JobComposer(loader, master)
        wholes = []
        monkeypatch.setattr(compose, "whole", lambda job: wholes.append(job) or JobComposer.whole(compose, job))
        for job in jobs:
            mine, hydras = (OmegaConf.to_container(c) for c in (compose(job), JobComposer.whole(compose, job)))
            for cfg in (mine, hydras):
                del cfg["hydra"]["overrides"], cfg["hydra"]["job"]["override_dirname"]
            assert mine == hydras, job
        assert wholes == [["env=cartpole"], ["env=pong"], ["algo=vtrace", "hydra.job.chdir=false"]]
        wholes.clear()
        with pytest.raises(HydraException, match="actors=abc"):
            compose(["env=cartpole", "actors=abc"])
        assert wholes == [["env=cartpole", "actors=abc"]]


def test_the_tests_hydra_cache_gives_a_fresh_copy_equal_to_what_hydra_composes():
    from hydra import initialize_config_dir
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from rlbench.prepare.compose import CONF_DIR

    line = ["env=cartpole", "actors=3"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        first = loader.load_configuration("config", line, RunMode.RUN)
        first.actors = 99  # as Hydra's run sets its node on what it got
        again = loader.load_configuration("config", line, RunMode.RUN)
        hydras = ConfigLoaderImpl.load_configuration.uncached(loader, "config", line, RunMode.RUN)
    assert again.actors == 3
    assert OmegaConf.to_container(again) == OmegaConf.to_container(hydras)
