"""Coordinators: committed offsets today (consumer groups will live here too)."""
