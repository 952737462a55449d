"""The transaction coordinator (Kafka's coordinator/transaction): transactional ids, their
producer epochs and transactions, kept in ``__transaction_state`` and ended by markers."""
