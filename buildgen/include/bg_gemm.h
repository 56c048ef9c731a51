/* bg_gemm.h — single-precision GEMM (part of bg_kernels.h; include that instead).
 *
 * BLIS/GotoBLAS structure: for each NC-wide column block of op(B) and KC-deep slice of K,
 * op(B) is packed into KC x NR micro-panels (each stays in L1 while the micro-kernel sweeps
 * down the rows); for each MC-tall row block, op(A) is packed into MR x KC micro-panels (the
 * block stays in L2). Packing resolves transposes and zero-pads the M/N edges, so the
 * micro-kernel only ever sees whole MR x NR tiles. The epilogue (alpha, beta, bias,
 * activation) is applied as a tile is written, bias/activation after the last K slice.
 *
 * Adjustments to the textbook scheme, each measured on the shapes this library serves:
 * - K and N are cut into equal slices (K = 288 is 144 + 144, not 256 + 32).
 * - With one row block (M <= MC) the B block is used once, right after packing: it is
 *   capped to stay in L2 instead of filling NC columns (which would spill to L3).
 * - With M <= 16 and B not transposed, B is read in place (packing would cost more than
 *   the few rows gain); M == 1 or N == 1 goes to the matrix-vector loops (bg_gemv.h).
 * - A constant B (weights) can be packed once ahead of time (bg_sgemm_pack_b), and so can a
 *   constant A (a convolution's filters: bg_sgemm_pack_a); the generated create does it.
 * - A B packed ahead of time is a layer's weights, read once a call and often from DRAM: each
 *   tile prefetches its share of the next micro-panel while it computes (bg__PREFETCH_STEP),
 *   so that fetching the weights overlaps the multiply-adds instead of preceding them.
 *
 * The tile is 8 x 32 at x86-64-v4 (sixteen 16-lane accumulators) and 4 x 24 elsewhere (twelve
 * 8-lane accumulators plus three B vectors and one broadcast A fill fifteen of AVX2's sixteen
 * registers; 4 divides the row counts that matter here, batch sizes 8..64 and channel counts
 * 32..128, where 6, the other common AVX2 shape, does not): bg_ukernel.h.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_gemm.h"
#endif
#ifndef BG_GEMM_H
#define BG_GEMM_H

/* The micro-kernel's tile (bg_ukernel.h): MR rows by NR columns, in accumulators of VW lanes. */
#if defined(__AVX512F__) && defined(__x86_64__)
#define BG_GEMM_MR 8
#define BG_GEMM_NR 32
#define BG_GEMM_VW 16
#else
#define BG_GEMM_MR 4
#define BG_GEMM_NR 24
#define BG_GEMM_VW 8
#endif
#define BG_GEMM_NV (BG_GEMM_NR / BG_GEMM_VW)
#define BG_GEMM_KC 256
#define BG_GEMM_MC 128
#define BG_GEMM_NC 3072
/* Budget (floats) of a packed B block when M <= MC: 192 KiB of a 512 KiB L2. */
#define BG_GEMM_SMALL_M_B_FLOATS (48 * 1024)
/* Up to this many rows, op(B) is read in place (when not transposed) instead of packed:
 * each B element is then used by so few rows that copying it costs more than it saves. */
#define BG_GEMM_DIRECT_B_MAX_M 16

#include "bg_pack.h"

#include "bg_ukernel.h"

/* Split n into the fewest blocks of at most `block`, of equal size rounded up to `unit`
 * (K = 288 becomes 144 + 144, not 256 + 32: a thin last slice costs a full pass over C). */
static inline int64_t bg__balanced_block(int64_t n, int64_t block, int64_t unit)
{
    const int64_t count = (n + block - 1) / block;
    const int64_t size = bg__round_up((n + count - 1) / count, unit);
    return size < block ? size : block;
}

/* Floats of the blocked path's A block: where its B block starts in the packing space. */
static inline int64_t bg__gemm_a_floats(int64_t M, int64_t K)
{
    const int64_t mc = bg__round_up(bg__min64(M, BG_GEMM_MC), BG_GEMM_MR);
    return bg__round_up(mc * bg__min64(K, BG_GEMM_KC), 16);
}

/* Floats of packing space the blocked path needs (A block, then B block). */
static inline int64_t bg__gemm_pack_floats(int64_t M, int64_t N, int64_t K)
{
    const int64_t nc = bg__round_up(bg__min64(N, BG_GEMM_NC), BG_GEMM_NR);
    return bg__gemm_a_floats(M, K) + nc * bg__min64(K, BG_GEMM_KC);
}

/* One GEMM C[M,N] = epilogue(alpha * op(A) @ op(B) + beta * C), M, N, K >= 1, alpha != 0:
 * what every thread working on it reads. */
typedef struct bg__gemm {
    int64_t M, N, K;
    float alpha, beta;
    int trans_a;
    const float *A;
    int64_t lda;
    const float *packed_a; /* NULL, or op(A) packed once ahead of time (bg_sgemm_pack_a) */
    const bg__bsrc *bsrc;
    float *C;
    int64_t ldc;
    const bg_epilogue *ep;
} bg__gemm;

/* One MR x NR tile of C (at row i, column j) whose B rows are read in place through
 * bsrc->rows: whole tiles straight into C with the epilogue in registers, edge tiles
 * through a scratch tile (every tile reads whole NR-wide rows of B). */
static inline void bg__tile_rows(const bg__gemm *g, int64_t kc, const float *a, const float *b,
                                 const int64_t *rows, const int64_t *vo, int64_t i, int64_t j,
                                 int64_t mr, int64_t nr, float beta, int epilogue)
{
    float *c = g->C + i * g->ldc + j;
    if (mr == BG_GEMM_MR && nr == BG_GEMM_NR) {
        bg__tile_ep te;
        if (epilogue) bg__tile_ep_init(&te, g->ep, i, j);
        bg__ukernel_rows_full(kc, a, b, rows, vo, c, g->ldc, g->alpha, beta,
                              epilogue ? &te : NULL);
        return;
    }
    float tile[BG_GEMM_MR * BG_GEMM_NR];
    bg__ukernel_rows_full(kc, a, b, rows, vo, tile, BG_GEMM_NR, g->alpha, 0.0f, NULL);
    bg__merge_tile(tile, c, g->ldc, mr, nr, beta);
    if (epilogue) bg__epilogue_block(c, g->ldc, i, j, mr, nr, g->ep);
}

/* Where the VW-wide column vectors of the tile at columns [j, j + nr) of a row-table B
 * start (bg__bsrc.row_width), into vo; a vector past nr rereads the first (its lanes are
 * discarded, and it stays inside what the first may read). */
static inline void bg__bsrc_vectors(const bg__bsrc *s, int64_t j, int64_t nr, int64_t *vo)
{
    for (int v = 0; v < BG_GEMM_NV; ++v) {
        const int64_t col = v * BG_GEMM_VW < nr ? j + v * BG_GEMM_VW : j;
        vo[v] = s->row_width ? col / s->row_width * s->row_stride + col % s->row_width : col;
    }
}

/* Whether the micro-kernel reads B in place (a few rows of A use each B panel too few
 * times to pay for packing it); only a ragged last panel is packed. */
static inline int bg__gemm_direct_b(const bg__gemm *g)
{
    return g->bsrc->matrix && !g->bsrc->trans &&
           g->M <= BG_GEMM_DIRECT_B_MAX_M;
}

/* The tiles of rows [ic, ic + mc) in the column panel at j (nr wide) of one K slice, with
 * the tile epilogue when `ep_now` (the last slice). `next`: NULL, or the next panel of B
 * packed ahead of time, which each whole tile prefetches its share of as it sweeps k
 * (BG__PREFETCH_STEP): row block r of P fetches lines [r L / P, (r + 1) L / P) of its L. */
__attribute__((always_inline)) static inline void
bg__gemm_panel_tiles(const bg__gemm *g, int64_t kc, const float *ablock, const float *b,
                     int64_t bs, int64_t ic, int64_t mc, int64_t j, int64_t nr, float beta_k,
                     int ep_now, const char *next)
{
    const int64_t MR = BG_GEMM_MR, NR = BG_GEMM_NR;
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = bg__min64(MR, mc - ir);
        const float *a = ablock + ir / MR * kc * MR;
        float *c = g->C + (ic + ir) * g->ldc + j;
        if (mr == MR && nr == NR && next != NULL) {
            const int64_t passes = (mc + MR - 1) / MR, lines = kc * NR / 16;
            const int64_t first = ir / MR * lines / passes;
            const int64_t count = (ir / MR + 1) * lines / passes - first;
            bg__tile_ep te;
            if (ep_now) bg__tile_ep_init(&te, g->ep, ic + ir, j);
            bg__ukernel_full_pf(kc, a, b, c, g->ldc, g->alpha, beta_k, ep_now ? &te : NULL,
                                next + 64 * first, count);
        } else if (mr == MR && nr == NR && ep_now) {
            bg__tile_ep te;
            bg__tile_ep_init(&te, g->ep, ic + ir, j);
            bg__ukernel_full(kc, a, b, bs, c, g->ldc, g->alpha, beta_k, &te);
        } else if (mr == MR && nr == NR) {
            bg__ukernel_full(kc, a, b, bs, c, g->ldc, g->alpha, beta_k, NULL);
        } else {
            bg__ukernel_edge(kc, a, b, bs, c, g->ldc, mr, nr, g->alpha, beta_k);
            if (ep_now) bg__epilogue_block(c, g->ldc, ic + ir, j, mr, nr, g->ep);
        }
    }
}

/* Rows [i0, i1) x columns [j0, j1) of the GEMM g, with i0 a multiple of MR and j0 of NR:
 * every tile is then the one the whole-matrix loop would compute (same MR x NR grid, same
 * K slices, same edge handling), so splitting C among threads changes no bit of it. */
static void bg__gemm_blocked(const bg__gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                             float *ws)
{
    const int64_t MR = BG_GEMM_MR, NR = BG_GEMM_NR, M = g->M, N = g->N, K = g->K;
    const bg__bsrc *bsrc = g->bsrc;
    const int direct_b = bg__gemm_direct_b(g);
    const int epilogue = bg__epilogue_active(g->ep);
    float *const pa = ws;
    float *const pb = ws + bg__gemm_a_floats(M, K);
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    /* With a single row block (M <= MC) a packed B block is used once, right after it is
     * packed: keep it small enough to stay in L2 rather than round-tripping through L3.
     * A is then re-packed per column block; blocks of at least 4*M columns keep that
     * re-packing under a quarter of B's packing. */
    int64_t nc_cap = BG_GEMM_NC;
    if (M <= BG_GEMM_MC && bsrc->pack) {
        nc_cap = BG_GEMM_SMALL_M_B_FLOATS / kc_step / NR * NR;
        if (nc_cap < bg__round_up(4 * M, NR)) nc_cap = bg__round_up(4 * M, NR);
        nc_cap = bg__min64(BG_GEMM_NC, nc_cap);
    }
    const int64_t nc_step = bg__balanced_block(j1 - j0, nc_cap, NR);
    for (int64_t jc = j0; jc < j1; jc += nc_step) {
        const int64_t nc = bg__min64(nc_step, j1 - jc);
        for (int64_t pc = 0; pc < K; pc += kc_step) {
            const int64_t kc = bg__min64(kc_step, K - pc);
            const float beta_k = pc == 0 ? g->beta : 1.0f; /* later slices accumulate */
            const int last_k = pc + kc == K;
            const int64_t n_full = nc / NR * NR;
            const float *bblock = pb;
            if (bsrc->rows) /* read in place: tiles index bsrc->data by row */
                bblock = NULL;
            else if (!bsrc->pack) /* prepacked: slice pc holds all panels, see bg_sgemm_pack_b */
                bblock = bsrc->data + pc * bg__round_up(N, NR) + jc * kc;
            else if (!direct_b)
                bsrc->pack(bsrc, pc, kc, jc, nc, pb);
            else if (n_full < nc) /* only the ragged last panel needs padding */
                bsrc->pack(bsrc, pc, kc, jc + n_full, nc - n_full, pb);
            for (int64_t ic = i0; ic < i1; ic += BG_GEMM_MC) {
                const int64_t mc = bg__min64(BG_GEMM_MC, i1 - ic);
                /* prepacked: slice pc holds all of A's panels, row block ic from panel ic/MR */
                const float *ablock = pa;
                if (g->packed_a)
                    ablock = g->packed_a + pc * bg__round_up(M, MR) + ic * kc;
                else
                    bg__pack_a(g->trans_a, g->A, g->lda, ic, mc, pc, kc, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const int64_t nr = bg__min64(NR, nc - jr);
                    if (bsrc->rows) {
                        int64_t vo[BG_GEMM_NV];
                        bg__bsrc_vectors(bsrc, jc + jr, nr, vo);
                        for (int64_t ir = 0; ir < mc; ir += MR)
                            bg__tile_rows(g, kc, ablock + ir / MR * kc * MR,
                                          bsrc->data + vo[0], bsrc->rows + pc, vo, ic + ir,
                                          jc + jr, bg__min64(MR, mc - ir), nr, beta_k,
                                          last_k && epilogue);
                        continue;
                    }
                    const float *b = bblock + jr / NR * kc * NR;
                    int64_t bs = NR;
                    if (direct_b) {
                        b = jr < n_full ? bsrc->data + pc * bsrc->ld + jc + jr : pb;
                        bs = jr < n_full ? bsrc->ld : NR;
                    }
                    /* Weights packed ahead of time stream from memory: each tile
                     * prefetches its share of the next panel. Two copies of the loop, so
                     * that every other GEMM keeps the one without (a constant NULL). */
                    if (!bsrc->pack && jr + NR < nc)
                        bg__gemm_panel_tiles(g, kc, ablock, b, bs, ic, mc, jc + jr, nr, beta_k,
                                             last_k && epilogue, (const char *)(b + kc * NR));
                    else
                        bg__gemm_panel_tiles(g, kc, ablock, b, bs, ic, mc, jc + jr, nr, beta_k,
                                             last_k && epilogue, NULL);
                }
            }
        }
    }
}

/* Below this many multiply-adds a GEMM runs on one thread: waking the pool would cost more
 * than the threads gain. */
#define BG_GEMM_PARALLEL_MIN_MACS (128 * 1024)

/* A GEMM cut into a grid of blocks of C, one block per task. */
typedef struct bg__gemm_split {
    const bg__gemm *g;
    int64_t row_step, col_step, col_tasks;
} bg__gemm_split;

static void bg__gemm_task(const void *ctx, int64_t task, void *ws)
{
    const bg__gemm_split *s = (const bg__gemm_split *)ctx;
    const int64_t i0 = task / s->col_tasks * s->row_step, j0 = task % s->col_tasks * s->col_step;
    bg__gemm_blocked(s->g, i0, bg__min64(i0 + s->row_step, s->g->M), j0,
                     bg__min64(j0 + s->col_step, s->g->N), bg__align64(ws));
}

/* Estimated time of one block of rows x cols: its multiply-adds (whole tiles) plus the
 * packing it repeats in every block, at a sixteenth of the multiply-add rate. */
static inline int64_t bg__gemm_block_cost(const bg__gemm *g, int64_t rows, int64_t cols)
{
    const int64_t K = g->K;
    int64_t cost = bg__round_up(rows, BG_GEMM_MR) * bg__round_up(cols, BG_GEMM_NR) * K;
    if (!g->packed_a) cost += 16 * rows * K;
    if (g->bsrc->pack) cost += 16 * cols * K;
    return cost + 4096; /* a task's fixed cost */
}

/* The grid (row_step x col_step blocks, on the MR x NR tile grid) that finishes soonest on
 * `threads` threads, with at most two blocks per thread. */
static bg__gemm_split bg__gemm_plan(const bg__gemm *g, int threads)
{
    const int64_t row_panels = (g->M + BG_GEMM_MR - 1) / BG_GEMM_MR;
    const int64_t col_panels = (g->N + BG_GEMM_NR - 1) / BG_GEMM_NR;
    const int64_t max_tasks = 2 * (int64_t)threads;
    bg__gemm_split best = {g, g->M, g->N, 1};
    int64_t best_time = bg__gemm_block_cost(g, g->M, g->N), best_tasks = 1;
    for (int64_t c = 1; c <= bg__min64(col_panels, max_tasks); ++c)
        for (int64_t r = 1; r <= bg__min64(row_panels, max_tasks / c); ++r) {
            const int64_t col_step = (col_panels + c - 1) / c * BG_GEMM_NR;
            const int64_t row_step = (row_panels + r - 1) / r * BG_GEMM_MR;
            const int64_t tasks = ((g->N + col_step - 1) / col_step) *
                                  ((g->M + row_step - 1) / row_step);
            const int64_t rounds = (tasks + threads - 1) / threads;
            const int64_t time = rounds * bg__gemm_block_cost(g, bg__min64(row_step, g->M),
                                                              bg__min64(col_step, g->N));
            if (time < best_time || (time == best_time && tasks < best_tasks)) {
                best = (bg__gemm_split){g, row_step, col_step, (g->N + col_step - 1) / col_step};
                best_time = time;
                best_tasks = tasks;
            }
        }
    return best;
}

static void bg__gemm_split_run(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const bg__gemm_split split = bg__gemm_plan(g, bg_threadpool_threads(pool));
    const int64_t tasks = split.col_tasks * ((g->M + split.row_step - 1) / split.row_step);
    bg_parallel(pool, tasks, bg__gemm_task, &split, ws);
}

/* B packed once for every row block: its panels shared out among the threads, into the
 * caller's packing space. */
typedef struct bg__shared_b {
    const bg__gemm *g;
    float *packed; /* K x round_up(N, NR): one K slice, in bg_sgemm_pack_b's layout */
    int64_t panels_per_task;
} bg__shared_b;

static void bg__shared_b_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__shared_b *s = (const bg__shared_b *)ctx;
    const bg__gemm *g = s->g;
    const int64_t j0 = task * s->panels_per_task * BG_GEMM_NR;
    const int64_t nc = bg__min64(s->panels_per_task * BG_GEMM_NR, g->N - j0);
    g->bsrc->pack(g->bsrc, 0, g->K, j0, nc, s->packed + j0 * g->K);
}

/* Whether g should pack B once for all threads: when the best split cuts C into row blocks
 * (N narrow against M: few output pixels, many filters, as in the 1x1 and strided
 * convolutions of a CNN's later stages), each block would pack all of B itself. Only where
 * B is one K slice, which the caller's packing space holds whole; with more slices, a
 * fork-join per slice cost more than the packing it saved (ResNet-50's 14x14 stage). */
static int bg__gemm_shares_b(const bg__gemm *g, int threads)
{
    if (!g->bsrc->pack || bg__gemm_direct_b(g) || g->K > BG_GEMM_KC || g->N > BG_GEMM_NC)
        return 0;
    return bg__gemm_plan(g, threads).row_step < g->M;
}

/* g with B packed once, then split as for a prepacked B. Every tile is computed as the
 * blocked loop computes it, so the bits are the same. */
static void bg__gemm_run_shared_b(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const int64_t NR = BG_GEMM_NR, M = g->M, N = g->N, K = g->K;
    float *const packed = ws + bg__gemm_a_floats(M, K); /* bg__gemm_blocked's B block */
    const int64_t panels = (N + NR - 1) / NR, blocks = 2 * (int64_t)bg_threadpool_threads(pool);
    const bg__shared_b job = {g, packed, (panels + blocks - 1) / blocks};
    bg_parallel(pool, (panels + job.panels_per_task - 1) / job.panels_per_task,
                bg__shared_b_task, &job, ws);
    const bg__bsrc prepacked = {NULL, packed, 0, 0, NULL, NULL, 0, 0, 0};
    bg__gemm shared = *g;
    shared.bsrc = &prepacked;
    bg__gemm_split_run(&shared, ws, pool);
}

/* The GEMM g on the pool's threads (or the caller's alone); ws is the caller's workspace.
 * An entry point (of the GEMM family, bg_kernels_linked.h) for the convolution, whose
 * B operand is a bg__bsrc of its own (implicit im2col). */
BG_API void bg__gemm_run(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const int threads = bg_threadpool_threads(pool);
    if (threads < 2 || g->M * g->N * g->K < BG_GEMM_PARALLEL_MIN_MACS)
        bg__gemm_blocked(g, 0, g->M, 0, g->N, ws);
    else if (bg__gemm_shares_b(g, threads))
        bg__gemm_run_shared_b(g, ws, pool);
    else
        bg__gemm_split_run(g, ws, pool);
}

#include "bg_gemv.h"

BG_API size_t bg_sgemm_workspace_bytes(int64_t M, int64_t N, int64_t K)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    int64_t floats = bg__gemm_pack_floats(M, N, K);
    const int64_t gemv = bg__gemv_floats(M, N, K);
    if (gemv > floats) floats = gemv;
    return (size_t)floats * sizeof(float) + 64; /* + slack to align the start */
}

/* K == 0 or alpha == 0: C = epilogue(beta * C); as in BLAS, A and B are not read. */
static inline void bg__gemm_no_product(int64_t M, int64_t N, float beta, float *C, int64_t ldc,
                                       const bg_epilogue *ep)
{
    for (int64_t i = 0; i < M; ++i) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
    if (bg__epilogue_active(ep)) bg__epilogue_block(C, ldc, 0, 0, M, N, ep);
}

/* Row-major single-precision GEMM: C[M,N] = epilogue(alpha * op(A) @ op(B) + beta * C).
 * op(A) is A[M,K] (lda >= K) or, with trans_a, A stored as [K,M] (lda >= M); likewise B.
 * beta == 0 means C is not read (may hold garbage/NaN). pool: NULL (the caller's thread
 * only) or the instance's pool, whose workers bring their own workspace. */
BG_API void bg_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     float *C, int64_t ldc, const bg_epilogue *ep, void *workspace,
                     bg_threadpool *pool)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        bg__gemm_no_product(M, N, beta, C, ldc, ep);
        return;
    }
    float *ws = bg__align64(workspace);
    if (M == 1 || N == 1) {
        bg__gemv(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, ws, pool);
        return;
    }
    const bg__bsrc bsrc = {bg__pack_b_matrix, B, ldb, trans_b, NULL, NULL, 1, 0, 0};
    const bg__gemm g = {M, N, K, alpha, beta, trans_a, A, lda, NULL, &bsrc, C, ldc, ep};
    bg__gemm_run(&g, ws, pool);
}

/* ---- Prepacked B: for a constant op(B) (weights), pack once at load time ----
 * The packed form depends on (trans_b, N, K) only: for each K slice (as bg_sgemm cuts K),
 * all NR-wide micro-panels of that slice, in order. The bytes are position-independent
 * (they may be copied, e.g. into a weights blob); the buffer needs float alignment, and
 * 64-byte alignment is fastest. */

BG_API size_t bg_sgemm_packed_b_bytes(int64_t N, int64_t K)
{
    if (N <= 0 || K <= 0) return 0;
    return (size_t)(bg__round_up(N, BG_GEMM_NR) * K) * sizeof(float);
}

BG_API void bg_sgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb,
                            void *packed)
{
    if (N <= 0 || K <= 0) return;
    const bg__bsrc src = {bg__pack_b_matrix, B, ldb, trans_b, NULL, NULL, 1, 0, 0};
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    float *dst = (float *)packed;
    for (int64_t pc = 0; pc < K; pc += kc_step)
        bg__pack_b_matrix(&src, pc, bg__min64(kc_step, K - pc), 0, N,
                          dst + pc * bg__round_up(N, BG_GEMM_NR));
}

/* bg_sgemm with op(B) from bg_sgemm_pack_b (same N, K); workspace and pool as bg_sgemm's. */
BG_API void bg_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const void *packed_b, float beta,
                               float *C, int64_t ldc, const bg_epilogue *ep, void *workspace,
                               bg_threadpool *pool)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        bg__gemm_no_product(M, N, beta, C, ldc, ep);
        return;
    }
    const bg__bsrc bsrc = {NULL, (const float *)packed_b, 0, 0, NULL, NULL, 0, 0, 0};
    const bg__gemm g = {M, N, K, alpha, beta, trans_a, A, lda, NULL, &bsrc, C, ldc, ep};
    bg__gemm_run(&g, bg__align64(workspace), pool);
}

/* ---- Prepacked A: for a constant op(A) (a convolution's filters), pack once at load time ----
 * The packed form depends on (trans_a, M, K) only: for each K slice (as bg_sgemm cuts K),
 * all MR-tall micro-panels of op(A), in order. Position-independent, like packed B. */

BG_API size_t bg_sgemm_packed_a_bytes(int64_t M, int64_t K)
{
    if (M <= 0 || K <= 0) return 0;
    return (size_t)(bg__round_up(M, BG_GEMM_MR) * K) * sizeof(float);
}

BG_API void bg_sgemm_pack_a(int trans_a, int64_t M, int64_t K, const float *A, int64_t lda,
                            void *packed)
{
    if (M <= 0 || K <= 0) return;
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    float *dst = (float *)packed;
    for (int64_t pc = 0; pc < K; pc += kc_step)
        bg__pack_a(trans_a, A, lda, 0, M, pc, bg__min64(kc_step, K - pc),
                   dst + pc * bg__round_up(M, BG_GEMM_MR));
}

#endif /* BG_GEMM_H */
