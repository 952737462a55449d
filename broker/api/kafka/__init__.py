"""The Kafka listener's API layer: Kafka's request bodies (kio's schemas) to the broker's
domain and back, one module per family of APIs."""
