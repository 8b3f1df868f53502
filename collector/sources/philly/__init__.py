"""The Microsoft Philly trace importer (job log and per-minute GPU utilisation)."""
