/* profile: true in a onednn module (the generated source defines BG_DNNL_PROFILE): every
 * step a run executes is timed. A step is one oneDNN primitive: a group's own, or a reorder
 * into or out of the layout it wants. Its label names the region, the group as messages do
 * ("k3 Conv 'c1'") and what oneDNN runs ("convolution jit_1x1:avx2"), which is known only
 * once the primitive is created, so the labels are made at create. The module exports
 * M__onednn_kernel_times (buildgen_abi.h) over them. Without profile none of this is
 * compiled and a run reads no clock.
 */
#ifndef BG_ONEDNN_PROFILE_H
#define BG_ONEDNN_PROFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h> /* dnnl_prim_kind2str */

#include "buildgen_abi.h"

#define BG_DNNL_LABEL_BYTES 200

/* The module's timed steps, in run order: regions in order, each region's steps in order. */
typedef struct bg_dnnl_timers {
    char **labels;
    uint64_t *ns; /* summed over the runs since create; the executor reads and clears them */
    int count, capacity;
} bg_dnnl_timers;

static inline uint64_t bg_dnnl_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A timer for a step of region `region` running `primitive` for `what`: its index, or -1
 * when out of memory. */
static inline int bg_dnnl_timer_add(bg_dnnl_timers *t, const char *region, const char *what,
                                    const_dnnl_primitive_t primitive)
{
    if (t->count == t->capacity) {
        int capacity = t->capacity ? 2 * t->capacity : 32;
        char **labels = (char **)realloc(t->labels, (size_t)capacity * sizeof *labels);
        if (labels == NULL) return -1;
        t->labels = labels;
        uint64_t *ns = (uint64_t *)realloc(t->ns, (size_t)capacity * sizeof *ns);
        if (ns == NULL) return -1;
        t->ns = ns;
        t->capacity = capacity;
    }
    const_dnnl_primitive_desc_t pd = NULL;
    const char *impl = "?";
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (dnnl_primitive_get_primitive_desc(primitive, &pd) == dnnl_success) {
        impl = bg_dnnl_impl_name(pd);
        dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
    }
    char *label = (char *)malloc(BG_DNNL_LABEL_BYTES);
    if (label == NULL) return -1;
    snprintf(label, BG_DNNL_LABEL_BYTES, "%s %s: %s %s", region, what, dnnl_prim_kind2str(kind),
             impl);
    for (unsigned char *c = (unsigned char *)label; *c; ++c) /* printable ASCII (the ABI's) */
        if (*c < 0x20 || *c > 0x7e) *c = '?';
    t->labels[t->count] = label;
    t->ns[t->count] = 0;
    return t->count++;
}

static inline void bg_dnnl_timers_free(bg_dnnl_timers *t)
{
    for (int i = 0; i < t->count; ++i) free(t->labels[i]);
    free(t->labels);
    free(t->ns);
}

static inline bg_kernel_times bg_dnnl_kernel_times(const bg_dnnl_timers *t)
{
    const bg_kernel_times times = {t->count, (const char *const *)t->labels, t->ns};
    return times;
}

#endif
