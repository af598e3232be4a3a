"""`python -m rlbench [overrides]` / `python -m rlbench -m actors=4,40,256`: the door to the run
command, rlbench/cli/run.py (docs/architecture.md, "Commands")."""

from rlbench.cli.run import main

if __name__ == "__main__":
    main()
