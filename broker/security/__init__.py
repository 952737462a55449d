"""Authentication of clients and brokers: TLS, SASL, principals (Kafka's security)."""
