/* The kernels object of a toolchain (and ISA level), GEMM part: bg_kernels.h's entry points
 * listed in BG_KERNELS_GEMM, compiled once and exported under their link names for every
 * library built with that toolchain, whose modules are compiled with -DBG_KERNELS_LINKED
 * (bg_kernels_linked.h). */
#undef BG_KERNELS_LINKED
#define BG_KERNELS_LIBRARY BG_KERNELS_GEMM
#include "bg_kernels.h"
