"""CLI command groups: one module per group, each with ``register(subparsers)``."""
