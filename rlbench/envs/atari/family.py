"""The Atari family's declarations (docs/envs.md lists what each family declares).

Its schema holds SEED RL's Atari settings (README "### Atari settings"; docs/r2d2.md, the
"Atari env" row) and the engine that steps them, ale-py or EnvPool (docs/envs.md, "Two
engines"); an engine and its emulator load only when a spec is probed or the actors are made.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.config.rules import Rules, int_at_least
from rlbench.config.schema import EnvConfig
from rlbench.envs.atari.engines import engine_rules
from rlbench.envs.atari.envpool_env import EnvPoolActors
from rlbench.envs.atari.probe import atari_spec
from rlbench.envs.atari.vector_env import AtariActors

OBSERVATION = "image"  # uint8 grey frames, `stack` of them along axis 0
PARTIAL_BATCHES = True  # AtariVectorEnv's async recv(): the first k envs ready
PACKAGE = "ale-py"
# Memory of one env besides its observations (the emulator, its screens); validation bounds the
# envs by it. Where the figure comes from: docs/envs.md, "Memory per env".
ENV_BYTES = 1_500_000
PRESET_IDS = ("pong", "breakout")  # ROMs with a preset of their own: conf/env/<id>.yaml
# Fields added after records existed, with the value every earlier record ran: at that value they
# are left out of config_hash and the dataset's digest, so earlier records keep theirs.
ADDED_FIELDS = {"engine": "ale"}


@dataclass
class Schema(EnvConfig):
    kind: str = "atari"
    # what steps the emulators: "ale" (ale-py's AtariVectorEnv) or "envpool" (EnvPool's pool);
    # the default by measurement: docs/results/engines.md
    engine: str = "ale"
    frameskip: int = 4  # emulator frames per agent step, max-pooled over the last two
    stack: int = 4  # stacked frames per observation
    img_size: int = 84  # square grey observation side
    # SEED's max_random_noops: SEED draws 1..noop_max no-ops at each reset; ale-py draws
    # 0..n-1 with no lower end to set, so AtariActors passes n = noop_max + 1: 0..noop_max (the
    # one deviation: a 1-in-31 chance of no no-op, mean 15 vs SEED's 15.5; same maximum)
    noop_max: int = 30
    full_action_space: bool = True  # all 18 ALE actions: SEED atari/env.py, gym.make(full_action_space=True)
    fire_reset: bool = False  # press FIRE at each reset; SEED atari_preprocessing.py presses none
    sticky_actions: float = 0.0  # repeat_action_probability
    episodic_life: bool = False  # end an episode at each life loss
    reward_clipping: bool = False  # clip rewards to [-1, 1]; off: R2D2 uses value rescaling instead
    max_episode_frames: int = 108_000  # frames before truncation (= 30 min of play)


def rules(env: Schema) -> Rules:
    return {
        "env.stack": int_at_least(1),
        "env.img_size": int_at_least(36),
        "env.noop_max": int_at_least(0),
        "env.sticky_actions": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "env.max_episode_frames": int_at_least(1),
    } | engine_rules(env)


def spec(env: Schema):
    return atari_spec(env)


def make(env: Schema, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0):
    """The engine's vector env; `seed` is the one its first reset will get (EnvPool seeds when it
    makes its envs; ale-py at each reset)."""
    if env.engine == "envpool":
        return EnvPoolActors(env, num_envs, threads, batch, affinity_offset, seed)
    return AtariActors(env, num_envs, threads, batch, affinity_offset)


def hardware_threads(actor_threads: int | None, cores: int) -> int:
    """The engine's thread pool (AtariVectorEnv's, EnvPool's): actor_threads, or every core."""
    return actor_threads or cores


def source_url(env: Schema) -> str:
    """ALE's page for the game."""
    return f"https://ale.farama.org/environments/{env.id.replace('_', '')}/"


def overrides(env_id: str) -> str:
    return f"env={env_id}" if env_id in PRESET_IDS else f"env=pong env.id={env_id}"
