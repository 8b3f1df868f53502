"""Retention: how long the lake keeps raw samples (`[retention]`), and `gpuledger prune`."""
