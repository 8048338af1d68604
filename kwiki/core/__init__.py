"""Used by everything, uses nothing of kwiki: errors, architectures, processes, atomic writes."""
