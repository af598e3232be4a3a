"""`python -m rlbench.stage SPEC.json`: the door to a GPU study stage, rlbench/cli/stage.py
(docs/architecture.md, "Commands")."""

import sys

from rlbench.cli.stage import main

if __name__ == "__main__":
    sys.exit(main())
