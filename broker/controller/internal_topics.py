"""The topics the brokers keep for themselves (Kafka's ``Topic.isInternal``): clients read
them but never append to them, and Metadata marks them ``is_internal``."""

OFFSETS_TOPIC = "__consumer_offsets"  # committed offsets and consumer groups
TRANSACTION_STATE_TOPIC = "__transaction_state"  # transactional ids and their transactions
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # share groups' partition state (KIP-932)
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
