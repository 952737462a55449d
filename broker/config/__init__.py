"""Broker configuration: the definitions (names, defaults, checks) and how a broker's
values are resolved. The names below are the package's public surface."""
