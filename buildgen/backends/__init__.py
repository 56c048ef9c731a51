"""Backends: plug-ins that run regions of a graph (the `c` host, CPU and CUDA libraries)."""
