"""Hypothesis keeps caches (and, unless told otherwise, an example database) in
./.hypothesis; the fuzz tests run with database=None and send the rest to a temporary
folder, so a run leaves nothing in the repository. $HYPOTHESIS_STORAGE_DIRECTORY still wins."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _home = tempfile.mkdtemp(prefix="buildgen-fuzz-hypothesis-")
    set_hypothesis_home_dir(_home)
    atexit.register(shutil.rmtree, _home, ignore_errors=True)
