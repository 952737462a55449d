"""The broker's network layer: listeners that accept connections, frame requests and write
responses in order (Kafka's SocketServer)."""
