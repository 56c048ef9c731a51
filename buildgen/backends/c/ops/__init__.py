"""The `c` backend's op families; registry.op_table() collects their ENTRIES."""
