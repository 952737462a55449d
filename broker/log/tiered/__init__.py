"""Tiered storage (KIP-405): the simulated remote store, the manager that copies segments
to it, and the bounded pool that reads them back."""
