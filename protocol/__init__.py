"""The Purgatory wire protocol, sans-I/O: frames, message structs, error codes, record batches.

Nothing here touches a socket, an event loop or a clock; the broker, the clients, fuzzers
and notebooks all use the same functions. docs/protocol.md is the contract.
"""
