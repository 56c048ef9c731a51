/* buildgen module ABI: how a model's executor calls the backend modules it links.
 *
 * Each backend module (one translation unit per backend per model) exports, for a model
 * named M and a backend named B:
 *
 *   const size_t M__B_scratch_bytes;            scratch it needs inside the model's arena
 *   int  M__B_create(bg_env *env);              once per model instance (may set env->state)
 *   void M__B_destroy(bg_env *env);
 *   int  M__B_<region>(bg_env *env, const void *const *in, void *const *out);
 *
 * A region function reads its inputs (tensors produced outside the region, in the
 * region's input order) and writes its outputs (tensors used outside it). Weights are
 * not passed: the module addresses them as env->weights + offset. Every function returns
 * 0 on success, or non-zero after writing a message to env->error.
 */
#ifndef BUILDGEN_ABI_H
#define BUILDGEN_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct bg_env {
    const unsigned char *weights; /* the model's weights blob, 64-byte aligned */
    unsigned char *scratch;       /* this backend's scratch, 64-byte aligned */
    void *state;                  /* backend-owned, set by create */
    char *error;                  /* the model's last_error buffer */
    size_t error_size;
    int num_threads;              /* from the backend's target attributes; 0 = library default */
} bg_env;

#endif
