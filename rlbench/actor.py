"""`python -m rlbench.actor` (rlbench-actor): the door to an actor process, rlbench/cli/actor.py
(docs/architecture.md, "Commands")."""

import sys

from rlbench.cli.actor import main

if __name__ == "__main__":
    sys.exit(main())
