/* The kernels object of a toolchain (and ISA level), convolution part: bg_kernels.h's entry
 * points listed in BG_KERNELS_CONV, compiled once and exported under their link names for
 * every library built with that toolchain, whose modules are compiled with -DBG_KERNELS_LINKED
 * (bg_kernels_linked.h). The convolution runs on the GEMM family's blocked kernels, which
 * this object calls by their link names: a library linking it links bg_kernels_gemm.c's too
 * (buildgen/targets/shared_kernels.py reads the line below). */
#undef BG_KERNELS_LINKED
#define BG_KERNELS_LIBRARY BG_KERNELS_CONV
#define BG_KERNELS_LINKS_GEMM
#include "bg_kernels.h"
