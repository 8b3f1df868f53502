"""`gpuledger bench`: scenarios, baselines run in the same process, and their lakes."""
