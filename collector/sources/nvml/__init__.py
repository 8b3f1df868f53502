"""NVML node agent: read this node's GPUs, map them to jobs via cgroups, spool and land."""
