"""Does learning survive a precision? R2D2 and V-trace on CartPole for N seeds each, and the
Atari smoke job, at `--precision` (default bf16); the evidence behind docs/r2d2.md's and
docs/vtrace.md's "Precision" sections.

Per algorithm one sweep `python -m rlbench -m env=cartpole algo=<a> workload=<its task>
precision=<p> seed=1..N` (R2D2: workload=cartpole, 400k frames; V-trace: cartpole_onpolicy,
800k), then the Atari smoke job (`workload=smoke`, Pong) at the same precision. Reads every job
back from MLflow and writes one JSON file (`--out`):
per job its seed, status, greedy `eval_return_mean20`, loss, learner_tflops and runtime_s;
per algorithm how many seeds reached `--target` (CartPole's 195); the smoke job's loss and
whether it is finite. Prints one line per algorithm, then `learning_survives=<true|false>`.
Took about 18 minutes on a 2-core CPU host (R2D2 CartPole jobs 69-81 s, V-trace 20-25 s).

    python pipelines/learn_precision.py --out precision_learning.json
    python pipelines/learn_precision.py --precision bf16 --seeds 3 --algos r2d2_vector --no-atari
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROG = "pipelines/learn_precision.py"
# Each preset's CartPole learning task (conf/workload/): on-policy V-trace trains each frame once,
# so its task has twice R2D2's frames (conf/workload/cartpole_onpolicy.yaml says why).
TASKS = {"vtrace_vector": "cartpole_onpolicy"}


def parse(argv):
    sys.path.insert(0, str(ROOT))
    from rlbench.cli.command import Parser
    from rlbench.config.flags import number

    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--seeds", type=number(int, lo=1), default=10, help="N seeds per algorithm (default 10)")
    p.add_argument("--first-seed", type=number(int, lo=0), default=1, help="the seeds are first..first+N-1 (default 1)")
    p.add_argument("--algos", default="r2d2_vector,vtrace_vector", help="CartPole algorithm presets (conf/algo/)")
    p.add_argument("--target", type=number(float), default=195.0, help="eval_return_mean20 that counts as learned")
    p.add_argument("--no-atari", action="store_true", help="leave out the Atari smoke job")
    p.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    p.add_argument("--experiment", default="precision-learning")
    p.add_argument("--out", type=Path, default=Path("precision_learning.json"))
    return p.parse_args(argv)


def sweep(args, overrides: list[str]) -> str:
    """Run one multirun; returns its parent run id (printed by the sweep)."""
    cmd = [
        sys.executable,
        "-m",
        "rlbench",
        "-m",
        *overrides,
        f"precision={args.precision}",
        "progress=log",
        f"tracking.uri={args.tracking_uri}",
        f"tracking.experiment={args.experiment}",
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    marker = "[rlbench sweep] parent run "
    parent = next((ln.split(marker, 1)[1].split()[0] for ln in out.stdout.splitlines() if marker in ln), None)
    if parent is None:
        raise SystemExit(f"{PROG}: the sweep printed no parent run (exit {out.returncode}): {out.stderr[-2000:]}")
    return parent


def jobs(parent: str) -> list[dict]:
    from rlbench.tracking.readers import read_sweep

    rows = []
    for kid in read_sweep(parent).children:
        m = kid.metrics
        rows.append(
            {
                "run_id": kid.run_id,
                "name": kid.name,
                "status": kid.status,
                "seed": int(kid.params["seed"]),
                **{
                    k: m.get(k)
                    for k in ("eval_return_mean20", "loss", "learner_tflops", "learner_updates", "runtime_s")
                },
            }
        )
    return sorted(rows, key=lambda r: r["seed"])


def main(argv=None) -> int:
    args = parse(argv)
    from rlbench.tracking.store import use_store

    seeds = ",".join(str(s) for s in range(args.first_seed, args.first_seed + args.seeds))
    result: dict = {"precision": args.precision, "target": args.target, "algos": {}}
    for algo in [a for a in args.algos.split(",") if a]:
        parent = sweep(
            args, ["env=cartpole", f"algo={algo}", f"workload={TASKS.get(algo, 'cartpole')}", f"seed={seeds}"]
        )
        use_store(args.tracking_uri)
        rows = jobs(parent)
        learned = [r for r in rows if r["status"] == "FINISHED" and (r["eval_return_mean20"] or 0) >= args.target]
        result["algos"][algo] = {"parent": parent, "learned": len(learned), "seeds": len(rows), "jobs": rows}
        print(
            f"{algo} at {args.precision}: {len(learned)}/{len(rows)} seeds reached eval_return_mean20 >= "
            f"{args.target:g}: "
            + ", ".join(
                f"{r['eval_return_mean20']:.1f}" if r["eval_return_mean20"] is not None else "none" for r in rows
            ),
            flush=True,
        )
        args.out.write_text(json.dumps(result, indent=1))
    if not args.no_atari:
        parent = sweep(args, ["workload=smoke", "seed=1"])
        use_store(args.tracking_uri)
        (row,) = jobs(parent)
        row["loss_finite"] = row["loss"] is not None and math.isfinite(row["loss"])
        result["atari_smoke"] = row
        print(
            f"Atari smoke job at {args.precision}: {row['status']}, loss {row['loss']}, finite: {row['loss_finite']}",
            flush=True,
        )
    ok = (
        all(a["learned"] == a["seeds"] for a in result["algos"].values())
        and result.get("atari_smoke", {"loss_finite": True})["loss_finite"]
    )
    result["learning_survives"] = ok
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    print(f"learning_survives={str(ok).lower()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
