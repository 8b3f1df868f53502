"""The policy lab's replay of Kueue admission on Kubernetes clusters.

`workload.load_kueue_workload` reads a cluster's workloads (its GPU pods grouped as Kueue admits
them) and `recorded_kueue_settings` its ClusterQueues out of the lake, `policy` holds the
ClusterQueues' quotas, cohorts and preemption and applies `KEY=VALUE` changes, and
`engine.replay_kueue` runs the event-driven model of Kueue's scheduler. The outcome is the Slurm
replay's `Outcome`, so `detectors.replay.metrics` calibrates and compares both alike.
"""
