"""CLI subcommands: each module has ``register(subparsers)`` that sets ``func`` on its parser."""
