"""The topics the brokers keep for themselves (Kafka's ``Topic.isInternal``): clients read
them but never append to them, and Metadata marks them ``is_internal``."""

OFFSETS_TOPIC = "__consumer_offsets"  # committed offsets and consumer groups
TRANSACTION_STATE_TOPIC = "__transaction_state"  # transactional ids and their transactions
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
