/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Between cuda.c, which opens the CUDA driver and makes contexts current,
 * and copy.c, which queues copies on streams and follows them: the
 * driver's calls and the context helpers.
 */
#ifndef HML_CUDADRV_H
#define HML_CUDADRV_H
#include "hml_cuda.h"

struct hml_cudrv {
	CUresult (*init)(unsigned int flags);
	CUresult (*error_name)(CUresult r, const char **name);
	CUresult (*pointer_attrs)(unsigned int n, CUpointer_attribute *attrs,
				  void **data, CUdeviceptr ptr);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*device_attr)(int *v, CUdevice_attribute attr, CUdevice dev);
	CUresult (*primary_retain)(CUcontext *ctx, CUdevice dev);
	CUresult (*primary_release)(CUdevice dev);
	CUresult (*ctx_get_current)(CUcontext *ctx);
	CUresult (*ctx_get_id)(CUcontext ctx, unsigned long long *id);
	CUresult (*ctx_push)(CUcontext ctx);
	CUresult (*ctx_pop)(CUcontext *ctx);
	CUresult (*stream_create)(CUstream *stream, unsigned int flags);
	CUresult (*stream_destroy)(CUstream stream);
	CUresult (*stream_sync)(CUstream stream);
	CUresult (*stream_query)(CUstream stream);
	CUresult (*event_create)(CUevent *event, unsigned int flags);
	CUresult (*event_record)(CUevent event, CUstream stream);
	CUresult (*event_query)(CUevent event);
	CUresult (*event_destroy)(CUevent event);
	CUresult (*memcpy_async)(CUdeviceptr dst, CUdeviceptr src, size_t n,
				 CUstream stream);
	CUresult (*library_load)(CUlibrary *lib, const void *code,
				 CUjit_option *jit_opts, void **jit_vals,
				 unsigned int njit, CUlibraryOption *opts,
				 void **vals, unsigned int nopts);
	CUresult (*library_get_kernel)(CUkernel *k, CUlibrary lib,
				       const char *name);
	CUresult (*launch)(CUfunction f, unsigned int gx, unsigned int gy,
			   unsigned int gz, unsigned int bx, unsigned int by,
			   unsigned int bz, unsigned int shared,
			   CUstream stream, void **params, void **extra);
	/* optional: NULL before the 13.0 API */
	CUresult (*memcpy_batch)(CUdeviceptr *dsts, CUdeviceptr *srcs,
				 size_t *sizes, size_t count,
				 CUmemcpyAttributes *attrs, size_t *attr_idxs,
				 size_t nattrs, CUstream stream);
	CUresult (*mem_alloc)(CUdeviceptr *ptr, size_t n);
	CUresult (*mem_free)(CUdeviceptr ptr);
};

extern struct hml_cudrv hml_cu;

/* cuMemcpyBatchAsync was found, and the driver has not refused a batch. */
extern bool hml_cuda_batching;

/* Log a failed call once per call and error; -FI_EIO. */
int hml_cuda_failed(const char *call, CUresult r);
/* Make ctx current unless it is; *pushed says whether to leave it. */
CUresult hml_cuda_current(CUcontext ctx, bool *pushed);
/* Make a context of where's device current, and tell its ID. */
int hml_cuda_enter(const struct hml_mem *where, CUcontext *ctx, bool *pushed,
		   unsigned long long *id);
/* Give back what enter or current pushed. */
void hml_cuda_leave(bool pushed);
#endif
