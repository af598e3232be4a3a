"""Predict before you buy (issue "a measured performance model"): a model of the
actor-inference-learner pipeline from cost curves measured on a host (`model.py`: pure math).
The profile, predict and validate commands are still to come."""
