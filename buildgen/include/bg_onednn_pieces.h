/* Concat and Split for the onednn backend's modules (part of bg_onednn_ops.h, whose helpers
 * they use: include that instead): each input or output piece keeps the layout its
 * neighbours want, and oneDNN's concat primitive or a reorder per piece moves the data.
 */
#ifndef BG_ONEDNN_OPS_H
#error "include bg_onednn_ops.h, not bg_onednn_pieces.h"
#endif
#ifndef BG_ONEDNN_PIECES_H
#define BG_ONEDNN_PIECES_H

/* Concat: oneDNN's concat primitive reads each input in the layout it has and writes the
 * one it derives from them (a flexible dst: a blocked layout carries on to the Conv or
 * pooling after it), or plain. */
typedef struct bg_dnnl_concat_spec {
    int n, axis;
    const int *srcs; /* the inputs' tensors, in order */
    int dst;
} bg_dnnl_concat_spec;

static inline int bg_dnnl_concat(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_concat_spec *c,
                                 const char *what)
{
    const_dnnl_memory_desc_t mds[BG_DNNL_MAX_ARGS];
    dnnl_exec_arg_t args[BG_DNNL_MAX_ARGS];
    if (c->n + 8 > BG_DNNL_MAX_ARGS) return bg_dnnl_fail(m->env, what, "too many inputs");
    for (int i = 0; i < c->n; ++i) {
        const bg_dnnl_tensor *src = &r->tensors[c->srcs[i]];
        if (src->memory == NULL) return bg_dnnl_fail(m->env, src->spec->name, "read before written");
        mds[i] = bg_dnnl_md_of(src->memory);
        args[i] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + i, src->memory};
    }
    bg_dnnl_tensor *dst = &r->tensors[c->dst];
    dnnl_memory_desc_t dst_md = NULL; /* NULL: the layout oneDNN derives from the inputs */
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t dst_mem, then = NULL;
    bg_dnnl_extras x;
    if (bg_dnnl_attr(m, r, NULL, 0, &x, what) != 0) return -1;
    int rc = -1;
    dnnl_status_t s = dnnl_success;
    if (!dst->spec->flexible) s = bg_dnnl_plain_md(&dst_md, dst->spec->ndims, dst->spec->dims);
    if (s == dnnl_success)
        s = dnnl_concat_primitive_desc_create(&pd, m->engine, dst_md, c->n, c->axis, mds, x.attr);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (bg_dnnl_write(m, r, dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &dst_mem,
                      &then, what) != 0)
        goto done;
    args[c->n] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst_mem};
    rc = bg_dnnl_finish(m, r, pd, &x, args, c->n + 1, dst_mem, then, what);
    pd = NULL;
    x.attr = NULL;
done:
    return bg_dnnl_release(pd, x.attr, dst_md, rc);
}

/* A dense md of dims (ndims, dims) laid out in the order of `like`'s (outer) strides, outermost
 * first: a slice of a channels-last tensor is channels-last, of a plain one plain. */
static inline dnnl_status_t bg_dnnl_same_order_md(dnnl_memory_desc_t *md, const_dnnl_memory_desc_t like,
                                                  int ndims, const dnnl_dim_t *dims)
{
    const dnnl_dims_t *strides = NULL;
    dnnl_status_t s = dnnl_memory_desc_query(like, dnnl_query_strides, &strides);
    if (s != dnnl_success) return s;
    int order[DNNL_MAX_NDIMS];
    for (int d = 0; d < ndims; ++d) {
        int at = d; /* insertion sort, widest stride first; ties keep the dims' order */
        while (at > 0 && (*strides)[order[at - 1]] < (*strides)[d]) {
            order[at] = order[at - 1];
            --at;
        }
        order[at] = d;
    }
    dnnl_dims_t shape, dense;
    dnnl_dim_t step = 1;
    for (int k = ndims - 1; k >= 0; --k) {
        dense[order[k]] = step;
        step *= dims[order[k]];
    }
    memcpy(shape, dims, (size_t)ndims * sizeof *dims);
    return dnnl_memory_desc_create_with_strides(md, ndims, shape, dnnl_f32, dense);
}

/* Split along `axis`: each output is its slice of the input, copied by a reorder from a view
 * (a submemory) of it, so a C2f block's halves (YOLOv8) stay in the layout the Conv before
 * wrote. A flexible output keeps the input's order of dims; a plain one is plain. A blocked
 * input, which a slice may cut mid-block, is first copied whole into its outer order. */
typedef struct bg_dnnl_split_spec {
    int src, axis, n;
    const int *dsts; /* the outputs' tensors, in order */
} bg_dnnl_split_spec;

static inline int bg_dnnl_split_one(bg_dnnl_module *m, bg_dnnl_region *r, bg_dnnl_tensor *src,
                                    dnnl_memory_t from, const dnnl_dim_t *offsets,
                                    bg_dnnl_tensor *dst, const char *what)
{
    dnnl_memory_desc_t view_md = NULL, dst_md = NULL;
    dnnl_memory_t view, out, then = NULL;
    void *data = NULL;
    int rc = -1;
    dnnl_status_t s = dnnl_memory_desc_create_submemory(&view_md, bg_dnnl_md_of(from),
                                                        dst->spec->dims, offsets);
    if (s == dnnl_success)
        s = dst->spec->flexible
                ? bg_dnnl_same_order_md(&dst_md, bg_dnnl_md_of(from), dst->spec->ndims, dst->spec->dims)
                : bg_dnnl_plain_md(&dst_md, dst->spec->ndims, dst->spec->dims);
    if (s != dnnl_success) {
        bg_dnnl_fail(m->env, what, bg_dnnl_status_name(s));
        goto done;
    }
    if (from == src->memory && src->spec->role != BG_DNNL_INTERNAL) {
        if (bg_dnnl_view(m, r, src, view_md, &view) != 0) goto done; /* bound at each run */
    } else {
        dnnl_memory_get_data_handle(from, &data);
        if (bg_dnnl_memory(m, view_md, data, &view, what) != 0) goto done;
    }
    if (bg_dnnl_write(m, r, dst, dst_md, &out, &then, what) != 0
        || bg_dnnl_reorder(m, r, view, out, what) != 0
        || (then != NULL && bg_dnnl_reorder(m, r, out, then, what) != 0))
        goto done;
    rc = 0;
done:
    dnnl_memory_desc_destroy(view_md);
    dnnl_memory_desc_destroy(dst_md);
    return rc;
}

static inline int bg_dnnl_split(bg_dnnl_module *m, bg_dnnl_region *r, const bg_dnnl_split_spec *s,
                                const char *what)
{
    bg_dnnl_tensor *src = &r->tensors[s->src];
    if (src->memory == NULL) return bg_dnnl_fail(m->env, src->spec->name, "read before it is written");
    dnnl_memory_t from = src->memory;
    if (bg_dnnl_is_blocked(bg_dnnl_md_of(from))) {
        dnnl_memory_desc_t flat;
        BG_DNNL_TRY(m, what, bg_dnnl_same_order_md(&flat, bg_dnnl_md_of(from), src->spec->ndims,
                                                   src->spec->dims));
        int rc = bg_dnnl_reordered(m, r, src->memory, flat, &from, what);
        dnnl_memory_desc_destroy(flat);
        if (rc != 0) return -1;
    }
    dnnl_dims_t offsets = {0};
    for (int i = 0; i < s->n; ++i) {
        bg_dnnl_tensor *dst = &r->tensors[s->dsts[i]];
        if (bg_dnnl_split_one(m, r, src, from, offsets, dst, what) != 0) return -1;
        offsets[s->axis] += dst->spec->dims[s->axis];
    }
    return 0;
}

#endif /* BG_ONEDNN_PIECES_H */
