"""What the CPU library backends (openblas, onednn) share: reading a region as groups of
"anchor op + fused epilogue", the epilogue steps themselves, window geometry, constants and
the scratch plan. Nothing here emits code; each backend renders groups its own way.
"""
