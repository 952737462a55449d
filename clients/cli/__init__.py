"""The client-side commands of `purgatory` (topics, produce, consume, consumer-groups,
admin, perf declarations): argument declarations in `commands`, the code in the others.
The client library itself is `clients` (Connection, Producer, Consumer, AdminClient)."""
