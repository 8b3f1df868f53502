"""The policy lab's replay: the recorded workload run again under a proposed scheduler policy.

`workload.load_workload` reads a cluster's jobs and nodes out of the lake, `policy` holds the
settings (Slurm's names) and applies `KEY=VALUE` changes, `engine.replay` runs the event-driven
scheduler model, `draws.replay_draws` the mean of several with the run times moved by a second
(Slurm's wobble), and `metrics` calibrates a replay against the record and compares two.
"""
