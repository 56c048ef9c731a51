/* The C API part of the CPU stand-in (see cuda_runtime.h). */
#include "cuda_runtime.h"
