"""kwiki_sanitize_grid.py: the module `kwiki verify --sanitize` gives kwiki's harness in place of a Python artifact's.

This folder holds nothing else: the harness puts the folder of the module it loads first on the import path, and
a name here would shadow a module of the standard library or of the artifact.
"""
