"""buildgen: compile ONNX models ahead of time into native libraries through Ninja."""

__version__ = "0.1.0"
