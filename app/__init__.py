"""gpuledger's app layer."""
