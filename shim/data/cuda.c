/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUDA driver, opened with dlopen on the first same-process operation,
 * so that one build runs where there is no GPU and processes that never
 * copy locally never load it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_config.h"
#include "hml_cudadrv.h"
#include "hml_log.h"

struct hml_cudrv hml_cu;

static const struct hml_cuda_sym symbols[] = {
#define SYM(name, field) HML_CUDA_SYM(hml_cu, name, field)
	SYM("cuInit", init),
	SYM("cuGetErrorName", error_name),
	SYM("cuPointerGetAttributes", pointer_attrs),
	SYM("cuDeviceGet", device_get),
	SYM("cuDeviceGetAttribute", device_attr),
	SYM("cuDevicePrimaryCtxRetain", primary_retain),
	SYM("cuDevicePrimaryCtxRelease", primary_release),
	SYM("cuCtxGetCurrent", ctx_get_current),
	SYM("cuCtxGetId", ctx_get_id),
	SYM("cuCtxPushCurrent", ctx_push),
	SYM("cuCtxPopCurrent", ctx_pop),
	SYM("cuStreamCreate", stream_create),
	SYM("cuStreamDestroy", stream_destroy),
	SYM("cuStreamSynchronize", stream_sync),
	SYM("cuStreamQuery", stream_query),
	SYM("cuEventCreate", event_create),
	SYM("cuEventRecord", event_record),
	SYM("cuEventQuery", event_query),
	SYM("cuEventDestroy", event_destroy),
	SYM("cuMemcpyAsync", memcpy_async),
	SYM("cuLibraryLoadData", library_load),
	SYM("cuLibraryGetKernel", library_get_kernel),
	SYM("cuLaunchKernel", launch),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
#undef SYM
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool usable;
bool hml_cuda_batching;

static void load(void)
{
	const char *path = hml_config.cuda_library;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const char *missing;
	CUresult r;

	/* Said at the default level: device memory then goes to the
	 * provider, which cannot copy it. */
	if (!lib) {
		hml_warn("cannot open the CUDA driver %s: %s: device memory "
			 "is not recognised", path, dlerror());
		return;
	}
	missing = hml_cuda_procs(lib, &hml_cu, symbols,
				 sizeof(symbols) / sizeof(symbols[0]));
	if (missing && !strcmp(missing, "cuGetProcAddress_v2")) {
		hml_warn("%s lacks cuGetProcAddress_v2: hmemloop needs a CUDA 12 "
			 "driver or newer, and copies nothing", path);
		return;
	}
	if (missing) {
		hml_warn("%s has no %s: hmemloop copies nothing", path, missing);
		return;
	}
	r = hml_cu.init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		hml_info("no CUDA device: no device memory here");
		return;
	}
	if (r) {
		hml_warn("cuInit: error %d: hmemloop copies nothing", r);
		return;
	}
	usable = true;
	if (hml_config.batch)
		hml_cu.memcpy_batch = hml_cuda_proc(lib, "cuMemcpyBatchAsync",
						13000);
	hml_cuda_batching = hml_cu.memcpy_batch;
	hml_info("%s loaded%s", path,
		 hml_cuda_batching ? ", copies batched" : "");
}

static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

/* A failure is logged once per call and error, not once per operation. */
int hml_cuda_failed(const char *call, CUresult r)
{
	static struct { const char *call; CUresult r; } seen[32];
	const char *name = "?";
	size_t i;

	pthread_mutex_lock(&failed_lock);
	for (i = 0; i < sizeof(seen) / sizeof(seen[0]) && seen[i].call; i++)
		if (seen[i].call == call && seen[i].r == r)
			break;
	if (i < sizeof(seen) / sizeof(seen[0]) && !seen[i].call) {
		seen[i].call = call;
		seen[i].r = r;
		hml_cu.error_name(r, &name);
		hml_warn("%s: %s: the operation completes with an error", call,
			 name);
	}
	pthread_mutex_unlock(&failed_lock);
	return -FI_EIO;
}

int hml_cuda_classify(const void *ptr, struct hml_mem *m)
{
	CUpointer_attribute attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
	};
	unsigned int type = 0, managed = 0, access = 0;
	CUcontext ctx = NULL;
	CUdeviceptr start = 0;
	size_t size = 0;
	int dev = -1;
	void *data[] = { &type, &managed, &dev, &ctx, &start, &size, &access };
	bool device;
	CUresult r;

	pthread_once(&load_once, load);
	*m = (struct hml_mem) { .type = HML_MEM_HOST };
	if (!usable)
		return 0;
	r = hml_cu.pointer_attrs(7, attrs, data, (CUdeviceptr) (uintptr_t) ptr);
	if (r)
		return hml_cuda_failed("cuPointerGetAttributes", r);
	/* Managed memory counts as device memory: it may live there. Host
	 * memory the driver pinned has an allocation, pageable memory none
	 * (an H200, driver 580). */
	device = type == CU_MEMORYTYPE_DEVICE || managed;
	if (device || start)
		*m = (struct hml_mem) { device ? HML_MEM_DEVICE : HML_MEM_HOST,
					dev, ctx, start, start + size, access };
	return 0;
}

/* What the driver answers for a handle that a reset of the device
 * (cuDevicePrimaryCtxReset, cudaDeviceReset) destroyed. */
static bool destroyed(CUresult r)
{
	return r == CUDA_ERROR_INVALID_HANDLE ||
	       r == CUDA_ERROR_INVALID_CONTEXT ||
	       r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* VMM memory has no context of its own: use its device's primary context,
 * retained once and kept, since the process has memory on that device. */
static CUcontext primaries[64];

static CUresult primary(int ordinal, CUcontext *ctx)
{
	CUdevice dev;
	CUresult r;

	if (ordinal < 0 || ordinal >= 64)
		return CUDA_ERROR_INVALID_DEVICE;
	*ctx = __atomic_load_n(&primaries[ordinal], __ATOMIC_ACQUIRE);
	if (*ctx)
		return CUDA_SUCCESS;
	r = hml_cu.device_get(&dev, ordinal);
	if (!r)
		r = hml_cu.primary_retain(ctx, dev);
	if (!r)
		__atomic_store_n(&primaries[ordinal], *ctx, __ATOMIC_RELEASE);
	return r;
}

/* The primary context kept was reset: give back its reference, which the
 * reset kept, and retain it anew (one thread gives it back). */
static CUresult reprimary(int ordinal, CUcontext dead, CUcontext *ctx)
{
	CUdevice dev;

	if (__atomic_compare_exchange_n(&primaries[ordinal], &dead, NULL,
					false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE) &&
	    !hml_cu.device_get(&dev, ordinal))
		hml_cu.primary_release(dev);
	return primary(ordinal, ctx);
}

/* The child of a fork() is a new process: the parent's retained contexts
 * are not its own, and the lock may have been held by a thread it does
 * not have. Where the parent had initialised the driver, the child cannot
 * use it (every call answers CUDA_ERROR_NOT_INITIALIZED): its memory is
 * host memory to hmemloop, as where there is no driver. */
static void forked(void)
{
	usable = false;
	memset(primaries, 0, sizeof(primaries));
	pthread_mutex_init(&failed_lock, NULL);
}

__attribute__((constructor)) static void cuda_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

void hml_cuda_leave(bool pushed)
{
	CUcontext popped;
	CUresult r;

	if (pushed && (r = hml_cu.ctx_pop(&popped)))
		hml_cuda_failed("cuCtxPopCurrent", r);
}

CUresult hml_cuda_current(CUcontext ctx, bool *pushed)
{
	CUcontext cur = NULL;
	CUresult r;

	*pushed = false;
	r = hml_cu.ctx_get_current(&cur);
	if (r || cur == ctx)
		return r;
	r = hml_cu.ctx_push(ctx);
	*pushed = !r;
	return r;
}

/*
 * Make a context of where's device current, unless one is, and tell its
 * ID: *pushed says whether hml_cuda_leave() must pop it, so the caller's
 * is as it was. The primary context kept for VMM memory may have been
 * reset since: its handle still pushes, but the driver takes it back to
 * life only when it is retained again.
 */
int hml_cuda_enter(const struct hml_mem *where, CUcontext *ctx, bool *pushed,
		   unsigned long long *id)
{
	CUresult r;

	*ctx = where->ctx;
	*pushed = false;
	if (!*ctx && (r = primary(where->dev, ctx)))
		return hml_cuda_failed("cuDevicePrimaryCtxRetain", r);
	r = hml_cuda_current(*ctx, pushed);
	if (r)
		return hml_cuda_failed("cuCtxPushCurrent", r);
	r = hml_cu.ctx_get_id(NULL, id);
	if (r && destroyed(r) && !where->ctx) {
		hml_cuda_leave(*pushed);
		r = reprimary(where->dev, *ctx, ctx);
		if (!r && !(r = hml_cuda_current(*ctx, pushed)))
			r = hml_cu.ctx_get_id(NULL, id);
	}
	if (r) {
		hml_cuda_leave(*pushed);
		*pushed = false;
		return hml_cuda_failed("cuCtxGetId", r);
	}
	return 0;
}

int hml_cuda_alloc(const struct hml_mem *where, size_t n, void **ptr)
{
	unsigned long long id;
	CUdeviceptr p = 0;
	CUcontext ctx;
	bool pushed;
	CUresult r;
	int err;

	err = hml_cuda_enter(where, &ctx, &pushed, &id);
	if (!err && (r = hml_cu.mem_alloc(&p, n)))
		err = hml_cuda_failed("cuMemAlloc", r);
	hml_cuda_leave(pushed);
	*ptr = (void *) (uintptr_t) p;
	return err;
}

void hml_cuda_free(const struct hml_mem *where, void *ptr)
{
	unsigned long long id;
	CUcontext ctx;
	bool pushed;
	CUresult r;

	if (!hml_cuda_enter(where, &ctx, &pushed, &id) &&
	    (r = hml_cu.mem_free((CUdeviceptr) (uintptr_t) ptr)))
		hml_cuda_failed("cuMemFree", r);
	hml_cuda_leave(pushed);
}
