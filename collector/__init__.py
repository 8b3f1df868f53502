"""gpuledger's collector layer."""
