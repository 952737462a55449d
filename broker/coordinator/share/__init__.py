"""KIP-932's share coordinator: the share groups' partition state in ``__share_group_state``
(Kafka's ``share-coordinator`` module)."""
