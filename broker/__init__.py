"""The Purgatory broker: one asyncio (uvloop) process per broker id."""
