"""The metadata quorum: a Raft log replicated by the controller voters (Kafka's KRaft)."""
