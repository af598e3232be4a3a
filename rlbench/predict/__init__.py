"""Predict before you buy: a model of the actor-inference-learner pipeline from cost curves
measured on a host (`model.py`: pure math; `measure.py`: the profile's measurements;
`curves.py`: a profile read at a job's point; `cli.py`: `python -m rlbench.predict`).
docs/predict.md."""
