"""Optuna search for the CPU/GPU balance: `python -m rlbench -m search=ratio`. run.py: the
sweeper's entry (`run_search`) and a study's trials in its parent run's life (`run_study`);
space.py, study.py, trials.py, warm_start.py, parent.py. docs/scale-out.md, section 5."""
