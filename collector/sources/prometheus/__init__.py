"""Prometheus: pull dcgm-exporter (and throughput) series out of Prometheus' HTTP API."""
