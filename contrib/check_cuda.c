/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-check: the CUDA driver as the library opens it
 * (HMEMLOOP_CUDA_LIBRARY, shim/data/cudaproc.c), its GPUs,
 * and one allocation and copy on the first of them.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "check.h"
#include "hml_cuda.h"
#include "hml_config.h"

/* The driver's calls, typed by cuda.h's declarations. */
static struct {
	__typeof__(cuInit) *init;
	__typeof__(cuDriverGetVersion) *driver_version;
	__typeof__(cuDeviceGetCount) *device_count;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDeviceGetName) *device_name;
	__typeof__(cuDeviceTotalMem) *device_mem;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_release;
	__typeof__(cuCtxSetCurrent) *ctx_set;
	__typeof__(cuMemAlloc) *mem_alloc;
	__typeof__(cuMemFree) *mem_free;
	__typeof__(cuMemcpyHtoD) *htod;
	__typeof__(cuMemcpyDtoD) *dtod;
	__typeof__(cuMemcpyDtoH) *dtoh;
} cu;

static const struct hml_cuda_sym symbols[] = {
#define SYM(name, field) HML_CUDA_SYM(cu, name, field)
	SYM("cuInit", init),
	SYM("cuDriverGetVersion", driver_version),
	SYM("cuDeviceGetCount", device_count),
	SYM("cuDeviceGet", device_get),
	SYM("cuDeviceGetName", device_name),
	SYM("cuDeviceTotalMem", device_mem),
	SYM("cuDevicePrimaryCtxRetain", primary_retain),
	SYM("cuDevicePrimaryCtxRelease", primary_release),
	SYM("cuCtxSetCurrent", ctx_set),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
	SYM("cuMemcpyHtoD", htod),
	SYM("cuMemcpyDtoD", dtod),
	SYM("cuMemcpyDtoH", dtoh),
#undef SYM
};

static bool load(struct check *c)
{
	void *h = check_open(c->cuda.library, RTLD_LOCAL, c->cuda.path,
			     c->cuda.error);
	const char *missing;

	if (!h)
		return false;
	missing = hml_cuda_procs(h, &cu, symbols,
				 sizeof(symbols) / sizeof(symbols[0]));
	if (missing && !strcmp(missing, "cuGetProcAddress_v2"))
		snprintf(c->cuda.error, sizeof(c->cuda.error), "it lacks "
			 "cuGetProcAddress_v2: hmemloop needs a CUDA 12 driver "
			 "or newer");
	else if (missing)
		snprintf(c->cuda.error, sizeof(c->cuda.error), "it has no %s",
			 missing);
	return !missing;
}

static bool failed(struct check *c, const char *call, CUresult r)
{
	if (r)
		snprintf(c->cuda.error, sizeof(c->cuda.error), "%s: error %d",
			 call, (int) r);
	return r;
}

/* Host to device, device to device, device to host, and compare. */
static void copy(struct check *c)
{
	enum { N = 1 << 16 };
	static unsigned char in[N], out[N];
	CUdeviceptr a = 0, b = 0;
	CUcontext ctx;
	CUdevice dev;

	if (failed(c, "cuDeviceGet", cu.device_get(&dev, 0)) ||
	    failed(c, "cuDevicePrimaryCtxRetain", cu.primary_retain(&ctx, dev)))
		return;
	for (int i = 0; i < N; i++)
		in[i] = i * 7 + 1;
	if (!failed(c, "cuCtxSetCurrent", cu.ctx_set(ctx)) &&
	    !failed(c, "cuMemAlloc", cu.mem_alloc(&a, N)) &&
	    !failed(c, "cuMemAlloc", cu.mem_alloc(&b, N)) &&
	    !failed(c, "cuMemcpyHtoD", cu.htod(a, in, N)) &&
	    !failed(c, "cuMemcpyDtoD", cu.dtod(b, a, N)) &&
	    !failed(c, "cuMemcpyDtoH", cu.dtoh(out, b, N))) {
		c->cuda.copies = !memcmp(in, out, N);
		if (!c->cuda.copies)
			snprintf(c->cuda.error, sizeof(c->cuda.error),
				 "the bytes copied back differ");
	}
	if (b)
		cu.mem_free(b);
	if (a)
		cu.mem_free(a);
	cu.ctx_set(NULL);
	cu.primary_release(dev);
}

void check_cuda(struct check *c)
{
	CUresult r;

	c->cuda.library = hml_config.cuda_library;
	c->cuda.loaded = load(c);
	if (!c->cuda.loaded)
		return;
	r = cu.init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		snprintf(c->cuda.error, sizeof(c->cuda.error), "no CUDA device");
		return;
	}
	if (failed(c, "cuInit", r) ||
	    failed(c, "cuDriverGetVersion", cu.driver_version(&c->cuda.version)) ||
	    failed(c, "cuDeviceGetCount", cu.device_count(&c->cuda.ngpus)))
		return;
	for (int i = 0; i < c->cuda.ngpus && i < CHECK_GPUS; i++) {
		CUdevice dev;

		if (cu.device_get(&dev, i))
			continue;
		cu.device_name(c->cuda.gpus[i].name, sizeof(c->cuda.gpus[i].name),
			       dev);
		cu.device_mem(&c->cuda.gpus[i].mem, dev);
	}
	if (!c->cuda.ngpus)
		snprintf(c->cuda.error, sizeof(c->cuda.error), "no CUDA device");
	else
		copy(c);
}
