"""`python -m rlbench.predict` (rlbench-predict): the door to the predict command,
rlbench/cli/predict.py (docs/architecture.md, "Commands")."""

import sys

from rlbench.cli.predict import main

if __name__ == "__main__":
    sys.exit(main())
