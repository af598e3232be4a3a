"""`python -m rlbench.report` (rlbench-report): the door to the report command,
rlbench/cli/report.py (docs/architecture.md, "Commands")."""

import sys

from rlbench.cli.report import main

if __name__ == "__main__":
    sys.exit(main())
