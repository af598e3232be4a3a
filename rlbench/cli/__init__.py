"""The commands, one module each (`python -m rlbench` is run.py), and the one wrapper that maps
the typed errors of rlbench/core/errors.py to a line on stderr and an exit code (command.py).
docs/architecture.md, "Commands"."""
