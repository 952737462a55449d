"""Latency experiments: scenarios that run brokers, inject faults and drive load
(`purgatory experiment run`), the Spark analysis of what they record (`... analyze`) and
their figures (`... plot`). docs/experiments.md describes each scenario."""
