"""The API layer: turns decoded requests into calls on the broker and their answers
(Kafka's KafkaApis)."""
