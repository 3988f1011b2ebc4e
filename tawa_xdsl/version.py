"""The version of tawa-xdsl (part of every cache key), importable from any layer."""

__version__ = "0.1.0"
