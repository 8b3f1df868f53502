"""`gpuledger evaluate`: score detectors on a labelled simulated lake."""
