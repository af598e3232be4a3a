"""`python -m rlbench.predict`: see rlbench/predict/cli.py and docs/predict.md."""

import sys

from rlbench.predict.cli import main

sys.exit(main())
