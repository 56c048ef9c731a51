"""`buildgen run`: run a built model library on inputs from a file (or random ones) through a
small generated C driver, write its outputs, and optionally check them against onnxruntime.

    cli.py       the subcommand: build, pick inputs, run, summarize, compare
    driver.py    the driver's C source, and its compile (skipped when up to date)
    execute.py   running the driver, directly or under the target's emulator
    tensors.py   inputs from an .npz or a seed, raw bytes in and out, summaries
    compare.py   outputs against onnxruntime's, within a tolerance

The driver is plain C over the library's C API, not Python, so the same path runs a library
built for the machine buildgen runs on and one cross-compiled for another, under an emulator.
"""
