"""Share groups (KIP-932) on the partition leaders: Kafka's kafka.server.share."""
