"""Kubernetes: GPU pods, Kueue/Volcano queues and their collector."""
