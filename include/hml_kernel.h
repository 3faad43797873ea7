/* SPDX-License-Identifier: BSD-2-Clause */
/* kernel.c, for copy.c: a batch of copies between device memory and device
 * or pinned host memory as one launch of hmemloop's own kernel. */
#ifndef HML_KERNEL_H
#define HML_KERNEL_H
#include "hml_cuda.h"

#define HML_KERNEL_BATCH 16

/* The kernel is loaded (once, on the first call), and was not refused. */
bool hml_kernel_ready(void);
extern bool hml_kernel_on;

/* May a copy of n bytes from src (in sm) to dst (in dm) be the kernel's,
 * in a batch on where's context? */
bool hml_kernel_fits(CUdeviceptr dst, const struct hml_mem *dm,
		     CUdeviceptr src, const struct hml_mem *sm, size_t n,
		     const struct hml_mem *where);
/* Queue n (at most HML_KERNEL_BATCH) such copies on stream, whose context
 * is current; they run in no order among themselves. */
CUresult hml_kernel_copy(const CUdeviceptr *dst, const CUdeviceptr *src,
			 const size_t *len, int n, CUstream stream);
#endif
