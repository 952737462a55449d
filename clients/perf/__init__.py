"""Socket-level benchmarks: produce/consume load against brokers and the framed echo ceiling."""
