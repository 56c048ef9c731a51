"""Code generation shared by backends and the host executor (memory planning, C naming)."""
