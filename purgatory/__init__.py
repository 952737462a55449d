"""The `purgatory` command: assembles the subcommands each package defines."""

__version__ = "0.1.0"
