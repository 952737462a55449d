"""Partition logs: record batches in segments, retention, and the remote tier (tiered/)."""
