"""Replication: the partitions a broker holds, leader and follower state, the follower
fetchers, and the delayed produce and fetch operations that wait in the purgatories."""
