"""EIO while writing outputs and cache entries, injected into the build's real processes.

How the error is made: this kernel has no device-mapper (no `error` target, no dmsetup
table), no fault injection (CONFIG_FAULT_INJECTION is off: no fail_make_request) and a
tmpfs never fails a write, so a real disk error cannot be had on demand; apt is out of
reach in CI. What works here and in CI (root, Debian, gcc): an LD_PRELOAD shim, compiled
by the test, that makes writes to files under a chosen folder fail with EIO. It covers
what the build's programs write with: write/pwrite/writev (Python: every stage, the cache
wrapper, the worker's children), the stdio calls (fwrite, fputs, fputc, putc, fprintf,
fflush: ninja's build and deps logs, gas's objects, ld's libraries, ar's archives, gcc's
depfiles) and close/fclose of a written file (the deferred error NFS or a failing disk
reports at close: the file is closed, the close says EIO). From the K-th such call on, counted
across all the build's processes in a shared file, every one fails: a disk that dies
part-way. K is drawn log-uniformly (stratified) between 0 (gen's first file) and the number
of such calls a whole build makes, so trials stop in gen, stages, compiles, links and ninja.

LD_PRELOAD reaches every process: ninja, the cache wrapper, the compiler, and the stage
worker, which is started by the first build of the module with the shim in its environment
(a private worker folder), so a Python stage run in one of its forks fails like one run in
its own interpreter; the shim reads its settings at each call, and a worker's child takes
the action's environment, so builds without BGFAULT_DIR see no fault.

The checks are test_disk_full's: a build on a failing disk fails with exit status 1 and an
error naming the action or file, never a traceback; the next build without the fault
succeeds with the reference bytes and the one after runs nothing. EIO in the cache folder
must not fail the build, and what the cache kept must restore the reference bytes.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from disk_helpers import (
    Builder,
    Reference,
    Trials,
    built_beside_faulty_cache,
    check_cache_restores,
    check_rebuild,
    judge_failure,
    stop_workers_after,
    trial_count,
    write_project,
)

pytestmark = pytest.mark.slow

EIO = "Input/output error"
NINJA_LOGS = "/.ninja_"  # .ninja_log, .ninja_deps
SEED = 20261127
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* A file open for writing under $BGFAULT_DIR, its path there not holding $BGFAULT_SKIP. */
static int targeted(int fd) {
    const char *dir = getenv("BGFAULT_DIR");
    if (!dir || fd < 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return 0;
    size_t len = strlen(dir);
    const char *skip = getenv("BGFAULT_SKIP");
    if (skip && *skip && strstr(path + len, skip)) return 0;
    return strncmp(path, dir, len) == 0 && path[len] == '/';
}

/* 1 (errno EIO) when this call must fail: the count in $BGFAULT_COUNTER, shared by all
   processes, has reached $BGFAULT_AFTER. Failures are logged to $BGFAULT_LOG. */
static int fault(int fd, const char *op) {
    if (!targeted(fd)) return 0;
    const char *counter = getenv("BGFAULT_COUNTER"), *after = getenv("BGFAULT_AFTER");
    if (!counter || !after) return 0;
    int c = (int)syscall(SYS_openat, AT_FDCWD, counter, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c < 0) return 0;
    flock(c, LOCK_EX);
    long long seen = 0;
    syscall(SYS_pread64, c, &seen, sizeof seen, 0);
    int fail = seen >= atoll(after);
    seen++;
    syscall(SYS_pwrite64, c, &seen, sizeof seen, 0);
    syscall(SYS_close, c);
    if (fail) {
        const char *log = getenv("BGFAULT_LOG");
        if (log) {
            char line[512], exe[256] = "?";
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) exe[n] = 0;
            int len = snprintf(line, sizeof line, "%s %s\n", exe, op);
            int l = (int)syscall(SYS_openat, AT_FDCWD, log,
                                 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            if (l >= 0) { syscall(SYS_write, l, line, len); syscall(SYS_close, l); }
        }
        errno = EIO;
    }
    return fail;
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    if (fault(fd, "write")) return -1;
    return real(fd, buf, n);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    if (fault(fd, "pwrite")) return -1;
    return real(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite64);
    if (fault(fd, "pwrite")) return -1;
    return real(fd, buf, n, off);
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    REAL(writev);
    if (fault(fd, "writev")) return -1;
    return real(fd, iov, count);
}
int close(int fd) {
    REAL(close);
    int fail = fault(fd, "close");
    int done = real(fd);
    if (fail) { errno = EIO; return -1; }
    return done;
}
/* stdio writes through glibc's internal write, which LD_PRELOAD cannot reach: fail its
   entry points instead, setting the stream's error flag as a failed write would. */
static int stream_fault(FILE *f, const char *op) {
    if (!f || !fault(fileno(f), op)) return 0;
    f->_flags |= _IO_ERR_SEEN;
    errno = EIO;
    return 1;
}
size_t fwrite(const void *p, size_t size, size_t n, FILE *f) {
    REAL(fwrite);
    if (stream_fault(f, "fwrite")) return 0;
    return real(p, size, n, f);
}
int fputs(const char *s, FILE *f) {
    REAL(fputs);
    if (stream_fault(f, "fputs")) return EOF;
    return real(s, f);
}
int fputc(int c, FILE *f) {
    REAL(fputc);
    if (stream_fault(f, "fputc")) return EOF;
    return real(c, f);
}
int putc(int c, FILE *f) {
    REAL(putc);
    if (stream_fault(f, "putc")) return EOF;
    return real(c, f);
}
int vfprintf(FILE *f, const char *format, va_list args) {
    REAL(vfprintf);
    if (stream_fault(f, "fprintf")) return -1;
    return real(f, format, args);
}
int fprintf(FILE *f, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int done = vfprintf(f, format, args);
    va_end(args);
    return done;
}
int __vfprintf_chk(FILE *f, int flag, const char *format, va_list args) {
    REAL(__vfprintf_chk);
    if (stream_fault(f, "fprintf")) return -1;
    return real(f, flag, format, args);
}
int __fprintf_chk(FILE *f, int flag, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int done = __vfprintf_chk(f, flag, format, args);
    va_end(args);
    return done;
}
int fflush(FILE *f) {
    REAL(fflush);
    if (f && stream_fault(f, "fflush")) return EOF;
    return real(f);
}
int fclose(FILE *f) {
    REAL(fclose);
    int fail = f && fault(fileno(f), "fclose");
    int done = real(f);
    if (fail) { errno = EIO; return EOF; }
    return done;
}
"""


def compile_shim(folder: Path) -> Path:
    """The shim built with the system's gcc; skips (saying why) where that cannot work."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the EIO shim")
    folder.mkdir(parents=True, exist_ok=True)
    source, shim = folder / "eio_shim.c", folder / "eio_shim.so"
    source.write_text(SHIM)
    done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(shim), str(source),
                           "-ldl"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"the EIO shim does not compile here: {done.stderr.strip()[-500:]}")
    # Does it take? (a static Python or a libc without these symbols would escape it)
    probe = folder / "probe"
    probe.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(shim), "BGFAULT_DIR": str(probe),
           "BGFAULT_COUNTER": str(folder / "probe.count"), "BGFAULT_AFTER": "0"}
    code = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes(b'x')"
    done = subprocess.run([sys.executable, "-c", code, str(probe / "file")], env=env,
                          capture_output=True, text=True, check=False)
    if "Errno 5" not in done.stderr:
        pytest.skip(f"LD_PRELOAD does not reach Python's writes here: {done.stderr[-300:]}")
    return shim


class Shimmed:
    def __init__(self, root: Path):
        self.root = root
        shim = compile_shim(root / "shim")
        # Every build carries the shim, so the worker it starts has it too (see above).
        self.builder = Builder(root / "workers", LD_PRELOAD=str(shim))
        self.runs = 0
        self.writes = 0  # what a whole build writes under its build folder (the reference)

    def faults(self, folder: Path, after: int, skip: str = "") -> tuple[dict[str, str], Path]:
        """The environment of a build whose writes under `folder` (but to no path holding
        `skip`) fail from the `after`-th on, and the log of the failures."""
        self.runs += 1
        log = self.root / f"faults-{self.runs}.log"
        return {
            "BGFAULT_DIR": str(folder.resolve()), "BGFAULT_AFTER": str(after),
            "BGFAULT_LOG": str(log), "BGFAULT_COUNTER": str(self.root / f"count-{self.runs}"),
            "BGFAULT_SKIP": skip,
        }, log  # fmt: skip

    def count(self) -> int:
        return int.from_bytes((self.root / f"count-{self.runs}").read_bytes()[:8], "little")


@pytest.fixture(scope="module")
def shimmed(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("disk-eio")
    setup = Shimmed(root)
    with stop_workers_after(setup.builder):
        # The reference counts the writes a whole build makes in its build folder, but for
        # ninja's logs: ninja writes them after every action, so from any K on, it would
        # nearly always be ninja that meets the error first. Every other trial spares them.
        env, _ = setup.faults(root / "reference" / "build", 1 << 62, NINJA_LOGS)
        ref = Reference(root, setup.builder, **env)
        setup.writes = setup.count()
        assert setup.writes > 0, "the shim saw no write of the reference build"
        yield setup, ref


def faulted_programs(log: Path) -> Counter[str]:
    if not log.exists():
        return Counter()
    return Counter(Path(line.split()[0]).name for line in log.read_text().splitlines())


def test_a_failing_build_folder_fails_clearly_and_the_next_build_is_right(shimmed, tmp_path):
    setup, ref = shimmed
    rng = random.Random(SEED)
    trials = Trials(f"EIO in the build folder ({setup.writes} writes in a build)")
    programs: Counter[str] = Counter()
    count = trial_count(6)
    strata = list(range(count))  # log-uniform, one draw per stratum, in a seeded order
    rng.shuffle(strata)
    for index, stratum in enumerate(strata):
        after = int(setup.writes ** ((stratum + rng.random()) / count)) - 1
        warm = index % 2 == 1
        cache = ref.cache if warm else tmp_path / f"cold-cache-{index}"
        skip = NINJA_LOGS if index % 4 < 2 else ""
        trial = (f"trial {index}: EIO from write {after} on{' but ninja logs' if skip else ''}"
                 f", {'warm' if warm else 'empty'} cache")
        project = write_project(tmp_path / f"project-{index}", ref.model)
        trials.counts["trials"] += 1
        env, log = setup.faults(project / "build", after, skip)
        first = setup.builder.build(project, cache, **env)
        programs.update(faulted_programs(log))
        judge_failure(trials, trial, first, ref, project, EIO)
        check_rebuild(trials, trial, ref, project, cache)
    print("programs that got EIO (calls):", dict(programs))
    trials.check()


def test_a_failing_cache_folder_costs_only_hits(shimmed, tmp_path):
    setup, ref = shimmed
    rng = random.Random(SEED + 1)
    trials = Trials("EIO in the cache folder")
    for index in range(trial_count(2)):
        cache = tmp_path / f"cache-{index}"
        cache.mkdir()
        after = rng.randint(0, 60)
        trial = f"trial {index}: EIO in the cache from write {after} on"
        project = write_project(tmp_path / f"first-{index}", ref.model)
        trials.counts["trials"] += 1
        env, _ = setup.faults(cache, after)
        first = setup.builder.build(project, cache, **env)
        if built_beside_faulty_cache(trials, trial, first, ref, project, "failing"):
            again = write_project(tmp_path / f"second-{index}", ref.model)
            check_cache_restores(trials, trial, ref, cache, again)
    trials.check()
