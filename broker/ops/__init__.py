"""Operating a broker: admin HTTP, fault injection, metrics and structured logging."""
