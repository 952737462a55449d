"""Issue 46's exactly-once proof: a consume-transform-produce worker (confluent-kafka,
offsets in the transaction) SIGKILLed and restarted many times, brokers killed under it,
and the output topic read read_committed holding every input record exactly once."""
