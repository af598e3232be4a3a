"""`python -m rlbench.actor --server HOST:PORT|unix:PATH --envs N --threads T [env overrides]`:
an actor process stepping N envs on T threads for a job's central inference over gRPC; the env
overrides are a job's, composed as the job composes them, and the token comes from
RLBENCH_ACTOR_TOKEN. Exits 0 when the job ends the stream, 2 when the job cannot be reached or
refuses it or the arguments are wrong, 1 when the job is lost mid-run, 143 / 130 on SIGTERM /
SIGINT. docs/actors.md."""

from __future__ import annotations

import os
import signal
import sys

from rlbench.cli.command import Parser, command
from rlbench.config.flags import number
from rlbench.config.rules import ConfigError
from rlbench.core.address import TOKEN_ENV, cpu_list, cpu_text
from rlbench.core.errors import Refusal
from rlbench.core.resources import usable_cpus
from rlbench.core.signals import JobKilled, sigterm_raises
from rlbench.envs.spec import EnvIdError
from rlbench.prepare.compose import compose_job

PROG = "rlbench.actor"


def parse(argv: list[str] | None):
    p = Parser(prog=PROG, description=__doc__)
    p.add_argument("--server", required=True, help="the job's actor server: HOST:PORT or unix:PATH")
    p.add_argument("--envs", type=number(int, lo=1), required=True, help="envs this process steps")
    p.add_argument("--threads", type=number(int, lo=1), default=1, help="CPU threads stepping them (default 1)")
    p.add_argument(
        "--cpus",
        type=cpu_list,
        default=None,
        help="run on these CPUs only, e.g. 0-3 or 0,2 (default: every CPU this process may use)",
    )
    p.add_argument(
        "--env-nice",
        type=number(int, lo=0, hi=19),
        default=None,
        help="nice value of the env threads (default 5: gRPC's threads go first)",
    )
    p.add_argument("overrides", nargs="*", help="the job's env overrides, e.g. env=pong")
    return p.parse_args(argv)


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        with sigterm_raises():
            line = actor(args)  # a Refusal or a Failure: the wrapper's line on stderr, exit 2 or 1
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, JobKilled) else signal.SIGINT
        print(f"{PROG}: stopped by {signal.Signals(signum).name} (job at {args.server})", flush=True)
        return 128 + signum
    print(line, flush=True)
    return 0


def actor(args) -> str:
    from rlbench.remote.actor_loop import ENV_NICE, run_actor  # lazy: keeps grpc off the start

    try:
        env_cfg = compose_job(args.overrides, host=False).env
        if args.cpus is not None:
            pin(args.cpus)
        nice = ENV_NICE if args.env_nice is None else args.env_nice
        return run_actor(
            args.server, env_cfg, args.envs, args.threads, os.environ.get(TOKEN_ENV) or None, env_nice=nice
        )
    except EnvIdError as e:  # an id its family cannot run: a refusal (ConfigError is one already)
        raise Refusal(str(e)) from e


def pin(cpus: list[int]) -> None:
    """Run on `cpus` only, before any thread starts (every thread inherits it); ConfigError
    naming them and the CPUs allowed where this process cannot."""

    try:
        os.sched_setaffinity(0, cpus)
    except (OSError, AttributeError):
        raise ConfigError(
            f"--cpus={cpu_text(cpus)}: allowed: CPUs this process may use ({cpu_text(usable_cpus())})"
        ) from None


if __name__ == "__main__":
    sys.exit(main())
