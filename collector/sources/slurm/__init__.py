"""Slurm: sacct/scontrol/sacctmgr output parsers and the incremental collector."""
