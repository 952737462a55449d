"""Cluster metadata: the controller that owns topics, assignments and ISRs, and each
broker's cache of the picture it pushes."""
