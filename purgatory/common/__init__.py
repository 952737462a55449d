"""Infrastructure the broker, the clients and the command line share: lock-free
histograms, the delayed delivery of received bytes (latency faults), the lazy command
loader. It imports nothing else of ours, so every package may import it."""
