"""gpuledger's detectors layer."""
