"""`python -m rlbench.profile` (rlbench-profile): the door to the profile, rlbench/cli/profile.py
(docs/architecture.md, "Commands")."""

import sys

from rlbench.cli.profile import main

if __name__ == "__main__":
    sys.exit(main())
