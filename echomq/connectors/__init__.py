"""The I/O edge: the sync and asyncio connectors, what each step sends, auto-pipelining,
the kept connection, the C command packer, replies mapped to errors, server URLs."""
