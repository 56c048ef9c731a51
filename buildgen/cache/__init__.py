"""The action cache: every action's outputs, addressed by the hash of what determines them.

    keys.py      what a key covers, paths named independently of the checkout's location
    tools.py     tool identities (`cc --version`, this Python and buildgen), memoized
    links.py     the libraries a link reads
    action.py    the wrapper's view of one action, its key parts
    depfile.py   Makefile-syntax depfiles, read and written as ninja does
    depsets.py   hidden inputs (depfile prerequisites), ccache direct-mode style
    model.py     OutputFile / ActionResult, shared by the local and the remote store
    store.py     the local store: blobs by sha256, action entries by key
    evict.py     least-recently-used eviction under a size limit
    stats.py     hit/miss counters and the store's size
    restore.py   writing a hit's outputs into the build dir
    exec.py      `python -m buildgen.cache exec ... -- <command>`: the wrapper itself
    command.py   running an action's command as ninja would (a miss, or no cache)
    journal.py   one line per action; summary.py turns them into the end-of-build summary
    remote.py    the Bazel HTTP remote-cache client (protocol.py: its wire format;
                 http_client.py: one request under a deadline, and its credentials)
    settings.py  where the cache is and how it behaves: manifest, then environment
    cli.py       `buildgen cache stats|clean`

Every action imports this package, so it imports nothing heavy (no numpy, no onnx).
"""
