/* bg_cpu.h — which instruction-set level this CPU runs, for an executor (model.c) whose host
 * module was compiled once per level (rules/c.yaml `isa_variants`).
 *
 * Why per-level objects and not GCC/Clang `target_clones`: the kernels choose their
 * instructions with the preprocessor (BG_FMA8 tests __FMA__, the shuffles test builtins),
 * and most of a model's code is generated loops and inlined helpers, not a few named hot
 * functions. A clone attribute changes neither the macros nor the code it does not annotate;
 * compiling the whole module with -march=<level> changes both. The cost is one compile per
 * level, run in parallel by the build.
 *
 * Levels are the x86-64 psABI's microarchitecture levels, and on aarch64 NEON or 256-bit
 * SVE (below). The choice is made once per model
 * instance, at create: the best compiled level the CPU runs, capped by BUILDGEN_MAX_ISA=<level>
 * in the environment (to compare levels, or to reproduce a report from an older machine).
 * Include once, from model.c only.
 */
#ifndef BG_CPU_H
#define BG_CPU_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every level buildgen knows for this architecture, in rank order: a level runs where its
 * rank's test passes. They match rules/c.yaml's isa_variants `known`. */
#if defined(__aarch64__)
#if defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif
/* armv8-a: NEON, in every AArch64 CPU. armv8.2-a+sve256: SVE whose vector length is 256 bits
 * (Graviton3, Neoverse V1), compiled with -msve-vector-bits=256 so the kernels' 8-lane
 * vectors are one register: such code is wrong at any other length, hence the check. */
static const char *const bg_isa_known[] = {"armv8-a", "armv8.2-a+sve256"};
#else
static const char *const bg_isa_known[] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
#endif
#define BG_ISA_KNOWN ((int)(sizeof bg_isa_known / sizeof bg_isa_known[0]))

static inline int bg_isa_rank(const char *level)
{
    for (int i = 0; i < BG_ISA_KNOWN; ++i)
        if (strcmp(level, bg_isa_known[i]) == 0) return i;
    return -1;
}

/* Whether the CPU (and the OS: AVX state saved on context switch) runs level `rank`. */
static inline int bg_cpu_runs(int rank)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
    /* GCC 12+ knows the psABI levels, with every feature of each (movbe, lzcnt, f16c, ...). */
    switch (rank) {
    case 0: return 1;
    case 1: return __builtin_cpu_supports("x86-64-v2");
    case 2: return __builtin_cpu_supports("x86-64-v3");
    case 3: return __builtin_cpu_supports("x86-64-v4");
    default: return 0;
    }
#else
    /* Older GCC and Clang: the features that distinguish the levels in practice. */
    switch (rank) {
    case 0: return 1;
    case 1:
        return __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("ssse3") &&
               __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("sse4.2");
    case 2:
        return bg_cpu_runs(1) && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
    case 3:
        return bg_cpu_runs(2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    default: return 0;
    }
#endif
#elif defined(__aarch64__) && defined(__linux__)
/* The kernel's names (<asm/hwcap.h>, <linux/prctl.h>), for C libraries that lack them. */
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif
    switch (rank) {
    case 0: return 1;
    case 1: /* the thread's vector length in bytes; every thread of the process starts with it */
        return (getauxval(AT_HWCAP) & HWCAP_SVE) != 0 &&
               (prctl(PR_SVE_GET_VL) & PR_SVE_VL_LEN_MASK) == 32;
    default: return 0;
    }
#else
    return rank == 0;
#endif
}

/* Write `message` to `error` on a CPU that lacks the level the module was compiled for (a
 * library pinned by march): byte by byte through a volatile pointer, so that no compiler
 * turns the copy into the level's wide vector moves, and never inlined into code that may. */
__attribute__((noinline, unused)) static void bg_cpu_refuse(char *error, size_t size,
                                                     const char *message)
{
    volatile char *out = error;
    size_t i = 0;
    for (; i + 1 < size && message[i] != '\0'; ++i) out[i] = message[i];
    if (size > 0) out[i] = '\0';
}

/* The index of the first of `levels` (best first) that this CPU runs and BUILDGEN_MAX_ISA
 * allows; -1 after writing why to `error` when there is none. */
static inline int bg_isa_pick(const char *const *levels, int count, char *error, size_t size)
{
    const char *cap = getenv("BUILDGEN_MAX_ISA");
    int max_rank = BG_ISA_KNOWN;
    if (cap != NULL && cap[0] != '\0') {
        max_rank = bg_isa_rank(cap);
        if (max_rank < 0) {
            char known[160] = "";
            for (int i = 0; i < BG_ISA_KNOWN; ++i) {
                const size_t used = strlen(known);
                snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                         bg_isa_known[i]);
            }
            snprintf(error, size, "BUILDGEN_MAX_ISA=%.64s is not a level (%s)", cap, known);
            return -1;
        }
    }
    for (int i = 0; i < count; ++i) {
        const int rank = bg_isa_rank(levels[i]);
        if (rank >= 0 && rank <= max_rank && bg_cpu_runs(rank)) return i;
    }
    /* Say what the library holds and what this CPU runs, so the fix (a lower level in
     * isa_levels, or no cap) can be read off the message. */
    char held[96] = "";
    for (int i = count - 1; i >= 0; --i) {
        const size_t used = strlen(held);
        snprintf(held + used, sizeof held - used, "%s%s", used ? ", " : "", levels[i]);
    }
    int best = -1;
    for (int rank = 0; rank < BG_ISA_KNOWN; ++rank)
        if (bg_cpu_runs(rank)) best = rank;
    snprintf(error, size,
             "no variant of this library runs on this CPU%s%.64s: the library holds %s; "
             "this CPU runs %s%s",
             max_rank < BG_ISA_KNOWN ? " under BUILDGEN_MAX_ISA=" : "",
             max_rank < BG_ISA_KNOWN ? cap : "", held,
             best >= 0 ? "up to " : "none of the levels buildgen knows",
             best >= 0 ? bg_isa_known[best] : "");
    return -1;
}

#endif /* BG_CPU_H */
