"""Persistent stage workers: actions at the price of the tools they run.

Every cached action used to start an interpreter for the cache wrapper and, for a Python
stage, another for the stage, each paying ~0.2 s of imports. Now build.ninja starts a tiny
client (client.py: `python -S`, stdlib only) that hands the action to a warm worker.

Why a fork server: the worker (server.py) imports everything once, then forks runners
(runner.py) that inherit the warm imports for free. A runner serves one action after
another: it runs the unchanged wrapper (buildgen.cache.exec) and, for a Python stage, forks
once more instead of exec'ing a new interpreter (stages.py), so a stage always runs in a
fresh copy of a process that has run no stage. What an action sets in the runner (its
folder, environment, umask, streams, signals) is put back after it; a runner that was
interrupted or left anything running retires, and a crash takes down one action (which the
client then runs cold). Parallel ninja jobs get parallel runners: the worker forks another
whenever a connection waits and all are busy, with no pool to size. Reusing a runner,
rather than forking a child per action, is what makes a cache hit cost a few milliseconds
(runner.py says why).

Who may use a worker: its socket lives in a folder only its user can enter, it checks its
peer's uid, and its name is the identity (identity.py) of the interpreter and of buildgen's
files, so an upgraded or edited buildgen gets a new worker. BUILDGEN_WORKERS=off runs every
action in its own interpreter, as before; the outputs are the same bytes either way.
"""
