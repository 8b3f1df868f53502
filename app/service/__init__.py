"""`gpuledger run`: the supervised service loop, its self-monitoring metrics and status."""
