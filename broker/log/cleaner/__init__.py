"""The log cleaner: compaction of logs whose cleanup.policy has compact (Kafka's LogCleaner)."""
