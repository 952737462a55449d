"""Latency experiments: scenario runner, sample writers, the PySpark analysis job, plots.

Empty for now: the scenario runner and the Spark pipeline arrive with their own issue.
Experiments drive real broker processes through clients/ and protocol/, never broker
internals.
"""
