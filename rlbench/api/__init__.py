"""The Python API: sweeps, searches, reports and the study run in the calling process and
return objects (rlbench/api/sweep.py, report.py, study.py); docs/usage.md, "The Python API"."""
