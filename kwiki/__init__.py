"""KernelWiki: a wiki of GPU kernel techniques whose numbers are re-measured by a machine."""

__version__ = "0.1.0"
SCHEMA_VERSION = 2
