"""The library version (recorded in every checkpoint and run record)."""

__version__ = "0.1.0"
