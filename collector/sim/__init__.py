"""A deterministic simulated GPU cluster with ground truth (`gpuledger simulate`).

It lands the same tables a real cluster's collectors land (`gpu_samples`, `jobs`, `job_gpus`,
`gpu_events`, `gpus`) through the same writer, plus `sim_truth`: every injected behaviour with
its span, which detectors are scored against.
"""

from collector.sim.runner import SimConfig, SimResult, simulate

__all__ = ["SimConfig", "SimResult", "simulate"]
