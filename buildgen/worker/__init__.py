"""Persistent stage workers: actions at the price of the tools they run.

Every cached action used to start an interpreter for the cache wrapper and, for a Python
stage, another for the stage, each paying ~0.2 s of imports. Now build.ninja starts a tiny
client (client.py: `python -S`, stdlib only) that hands the action to a warm worker.

Why a fork server: the worker (server.py) imports everything once, then forks a child per
action. The child inherits the warm imports for free, runs the unchanged wrapper
(buildgen.cache.exec) and, for a Python stage, forks once more instead of exec'ing a new
interpreter (stages.py). Each action thus runs in a fresh copy of a pristine process: no
state leaks from one action into the next, a crash takes down one action (which the client
then runs cold), and parallel ninja jobs get parallel processes, with no pool to size.

Who may use a worker: its socket lives in a folder only its user can enter, it checks its
peer's uid, and its name is the identity (identity.py) of the interpreter and of buildgen's
files, so an upgraded or edited buildgen gets a new worker. BUILDGEN_WORKERS=off runs every
action in its own interpreter, as before; the outputs are the same bytes either way.
"""
