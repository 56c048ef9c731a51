/* ONNX LSTM, GRU and RNN nodes as oneDNN RNN primitives (see bg_onednn.h), for the modules
 * of the onednn backend that have one.
 *
 * The generator checked that the node is one of oneDNN's cells and wrote its gate order
 * (spec.gates) and the summed biases (a static array). At create, W and R (ONNX: [D, G*H, K])
 * are copied with their gates permuted into oneDNN's plain ldigo layout ([1, D, K, G, H]),
 * then reordered into the layout the primitive prefers. Tensors map as:
 *   X [T, N, I]            src_layer (tnc)
 *   initial_h / _c [D,N,H] src_iter / src_iter_c [1, D, N, H] (zeros when left out)
 *   Y [T, D, N, H]         dst_layer [T, N, D*H]: written in place when D = 1, else into a
 *                          temporary that a reorder step spreads over Y's directions
 *   Y_h / Y_c [D, N, H]    dst_iter / dst_iter_c [1, D, N, H] (own memory when left out)
 */
#ifndef BG_ONEDNN_RNN_H
#define BG_ONEDNN_RNN_H

#include "bg_onednn_ops.h"

enum bg_dnnl_cell { BG_DNNL_LSTM, BG_DNNL_GRU, BG_DNNL_LBR_GRU, BG_DNNL_VANILLA_RNN };

typedef struct bg_dnnl_rnn_spec {
    int cell;                /* enum bg_dnnl_cell */
    int activation;          /* vanilla RNN: dnnl_eltwise_tanh / _relu / _logistic */
    int direction;           /* dnnl_rnn_direction_t */
    long steps, batch, input, hidden, directions, gates;
    int x, y;                /* region tensors */
    int h0, c0, hn, cn;      /* initial_h, initial_c, Y_h, Y_c: region tensors, or -1 */
    long h0_offset, c0_offset; /* constant initial_h / initial_c in env->weights, or -1 */
    long weights, recurrence;  /* W and R in env->weights */
    int gate_map[4];         /* oneDNN gate g is ONNX gate gate_map[g] */
    const float *bias;       /* [D, bias_gates, H]: Wb + Rb in oneDNN's gate order */
    long bias_gates;
} bg_dnnl_rnn_spec;

/* ONNX gate weights [D, G*H, K] at `data` as a memory of layout `want` (made once now),
 * through a plain ldigo copy [1, D, K, G, H] with the gates permuted. */
static inline int bg_dnnl_gate_weights(bg_dnnl_module *m, const bg_dnnl_rnn_spec *c,
                                       const float *data, long k, const_dnnl_memory_desc_t want,
                                       dnnl_memory_t *out, const char *what)
{
    const long d_n = c->directions, g_n = c->gates, h_n = c->hidden;
    float *plain = (float *)malloc((size_t)(d_n * k * g_n * h_n) * sizeof(float));
    if (plain == NULL) return bg_dnnl_fail(m->env, what, "out of memory");
    for (long d = 0; d < d_n; ++d)
        for (long g = 0; g < g_n; ++g)
            for (long h = 0; h < h_n; ++h) {
                const float *row = data + ((d * g_n + c->gate_map[g]) * h_n + h) * k;
                for (long i = 0; i < k; ++i) plain[((d * k + i) * g_n + g) * h_n + h] = row[i];
            }
    dnnl_memory_desc_t md = NULL;
    const dnnl_dims_t dims = {1, d_n, k, g_n, h_n};
    dnnl_status_t s = bg_dnnl_plain_md(&md, 5, dims);
    int rc = s == dnnl_success ? 0 : bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
    /* A scale of 1 makes bg_dnnl_constant copy `plain` (freed below) into memory it owns. */
    static const float one = 1.0f;
    if (rc == 0) rc = bg_dnnl_constant(m, want, md, plain, &one, 1, 1, out, what);
    if (md) dnnl_memory_desc_destroy(md);
    free(plain);
    return rc;
}

/* A [1, D, N, H] state: region tensor `tensor`, the constant at `offset`, or (both -1)
 * zeros (an input) or scratch (an output) that the module owns. */
static inline int bg_dnnl_state(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_rnn_spec *c,
                                int tensor, long offset, int zero, dnnl_memory_t *out,
                                const char *what)
{
    const dnnl_dims_t dims = {1, c->directions, c->batch, c->hidden};
    if (tensor >= 0) return bg_dnnl_operand(m, r, &r->tensors[tensor], 4, dims, out);
    dnnl_memory_desc_t md;
    BG_DNNL_TRY(m, what, bg_dnnl_plain_md(&md, 4, dims));
    void *data = offset >= 0 ? (void *)(m->env->weights + offset) : DNNL_MEMORY_ALLOCATE;
    int rc = bg_dnnl_memory(m, md, data, out, what);
    dnnl_memory_desc_destroy(md);
    if (rc == 0 && offset < 0 && zero) {
        void *bytes = NULL;
        BG_DNNL_TRY(m, what, dnnl_memory_get_data_handle(*out, &bytes));
        memset(bytes, 0, (size_t)(c->directions * c->batch * c->hidden) * sizeof(float));
    }
    return rc;
}

static inline dnnl_status_t bg_dnnl_rnn_pd(bg_dnnl_module *m, const bg_dnnl_rnn_spec *c,
                                           const_dnnl_memory_desc_t *md,
                                           const_dnnl_primitive_attr_t attr,
                                           dnnl_primitive_desc_t *pd)
{
    /* md: src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer,
     * dst_iter, dst_iter_c */
    const dnnl_prop_kind_t prop = dnnl_forward_inference;
    const dnnl_rnn_direction_t dir = (dnnl_rnn_direction_t)c->direction;
    switch (c->cell) {
    case BG_DNNL_LSTM:
        return dnnl_lstm_forward_primitive_desc_create(pd, m->engine, prop, dir, md[0], md[1],
                                                       md[2], md[3], md[4], NULL, NULL, md[5],
                                                       md[6], md[7], md[8], 0, attr);
    case BG_DNNL_GRU:
        return dnnl_gru_forward_primitive_desc_create(pd, m->engine, prop, dir, md[0], md[1],
                                                      md[3], md[4], md[5], md[6], md[7], 0, attr);
    case BG_DNNL_LBR_GRU:
        return dnnl_lbr_gru_forward_primitive_desc_create(pd, m->engine, prop, dir, md[0], md[1],
                                                          md[3], md[4], md[5], md[6], md[7], 0,
                                                          attr);
    default:
        return dnnl_vanilla_rnn_forward_primitive_desc_create(
            pd, m->engine, prop, (dnnl_alg_kind_t)c->activation, dir, md[0], md[1], md[3],
            md[4], md[5], md[6], md[7], 0, 0.0f, 0.0f, attr);
    }
}

static inline int bg_dnnl_rnn(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_rnn_spec *c,
                              const char *what)
{
    const int lstm = c->cell == BG_DNNL_LSTM;
    const long d_n = c->directions, h_n = c->hidden;
    const dnnl_dims_t layer_in = {c->steps, c->batch, c->input};
    const dnnl_dims_t layer_out = {c->steps, c->batch, d_n * h_n};
    const dnnl_dims_t wl = {1, d_n, c->input, c->gates, h_n};
    const dnnl_dims_t wi = {1, d_n, h_n, c->gates, h_n};
    const dnnl_dims_t bias_dims = {1, d_n, c->bias_gates, h_n};
    dnnl_memory_t mem[9] = {NULL}; /* in the order of bg_dnnl_rnn_pd's md */
    dnnl_memory_desc_t owned[4] = {NULL}; /* weights_layer, weights_iter (any), bias, dst */
    dnnl_primitive_desc_t pd = NULL;
    bg_dnnl_extras x;
    int rc = -1;
    if (bg_dnnl_operand(m, r, &r->tensors[c->x], 3, layer_in, &mem[0]) != 0) return -1;
    if (bg_dnnl_state(m, r, c, c->h0, c->h0_offset, 1, &mem[1], what) != 0
        || (lstm && bg_dnnl_state(m, r, c, c->c0, c->c0_offset, 1, &mem[2], what) != 0)
        || bg_dnnl_state(m, r, c, c->hn, -1, 0, &mem[7], what) != 0
        || (lstm && bg_dnnl_state(m, r, c, c->cn, -1, 0, &mem[8], what) != 0))
        return -1;
    if (bg_dnnl_attr(m, r, NULL, 0, &x, what) != 0) return -1;
    dnnl_status_t s = bg_dnnl_any_md(&owned[0], 5, wl);
    if (s == dnnl_success) s = bg_dnnl_any_md(&owned[1], 5, wi);
    if (s == dnnl_success) s = bg_dnnl_plain_md(&owned[2], 4, bias_dims);
    if (s == dnnl_success) s = bg_dnnl_plain_md(&owned[3], 3, layer_out);
    const_dnnl_memory_desc_t md[9] = {NULL};
    for (int i = 0; i < 9; ++i)
        if (mem[i]) md[i] = bg_dnnl_md_of(mem[i]);
    md[3] = owned[0];
    md[4] = owned[1];
    md[5] = owned[2];
    md[6] = owned[3];
    if (s == dnnl_success) s = bg_dnnl_rnn_pd(m, c, md, x.attr, &pd);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    /* Weights in the primitive's layouts; the bias as the generator summed it. */
    if (bg_dnnl_gate_weights(m, c, bg_dnnl_const_data(m, NULL, c->weights), c->input,
                             dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                             &mem[3], what) != 0
        || bg_dnnl_gate_weights(m, c, bg_dnnl_const_data(m, NULL, c->recurrence), h_n,
                                dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1),
                                &mem[4], what) != 0
        || bg_dnnl_memory(m, owned[2], (void *)c->bias, &mem[5], what) != 0)
        goto done;
    /* Y: [T, N, H] is Y itself with one direction; with two, oneDNN's [T, N, 2H] goes to a
     * temporary whose [T, D, N, H] view a reorder copies into Y after the primitive. */
    dnnl_memory_t spread = NULL;
    if (d_n == 1) {
        if (bg_dnnl_operand(m, r, &r->tensors[c->y], 3, layer_out, &mem[6]) != 0) goto done;
    } else {
        if (bg_dnnl_memory(m, owned[3], DNNL_MEMORY_ALLOCATE, &mem[6], what) != 0) goto done;
        const dnnl_dims_t dims = {c->steps, d_n, c->batch, h_n};
        const dnnl_dims_t strides = {c->batch * d_n * h_n, h_n, d_n * h_n, 1};
        dnnl_memory_desc_t view = NULL;
        void *bytes = NULL;
        int failed = dnnl_memory_desc_create_with_strides(&view, 4, dims, dnnl_f32, strides)
                         != dnnl_success
                     || dnnl_memory_get_data_handle(mem[6], &bytes) != dnnl_success
                     || bg_dnnl_memory(m, view, bytes, &spread, what) != 0;
        if (view) dnnl_memory_desc_destroy(view);
        if (failed) {
            bg_dnnl_fail(m->env, what, "a view of Y's directions");
            goto done;
        }
    }
    static const int arg[9] = {DNNL_ARG_SRC_LAYER, DNNL_ARG_SRC_ITER, DNNL_ARG_SRC_ITER_C,
                               DNNL_ARG_WEIGHTS_LAYER, DNNL_ARG_WEIGHTS_ITER, DNNL_ARG_BIAS,
                               DNNL_ARG_DST_LAYER, DNNL_ARG_DST_ITER, DNNL_ARG_DST_ITER_C};
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS];
    int nargs = 0;
    for (int i = 0; i < 9; ++i)
        if (mem[i]) args[nargs++] = (dnnl_exec_arg_t){arg[i], mem[i]};
    dnnl_memory_t y = NULL;
    if (spread != NULL) {
        const dnnl_dims_t dims = {c->steps, d_n, c->batch, h_n};
        if (bg_dnnl_operand(m, r, &r->tensors[c->y], 4, dims, &y) != 0) goto done;
    }
    rc = bg_dnnl_finish(m, r, pd, &x, args, nargs, mem[6], NULL, what);
    pd = NULL;
    x.attr = NULL;
    if (rc == 0 && spread != NULL) rc = bg_dnnl_reorder(m, r, spread, y, what);
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (x.attr) dnnl_primitive_attr_destroy(x.attr);
    for (int i = 0; i < 4; ++i)
        if (owned[i]) dnnl_memory_desc_destroy(owned[i]);
    return rc;
}

#endif
