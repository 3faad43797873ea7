/*
 * The CUDA driver, opened with dlopen and resolved through
 * cuGetProcAddress_v2, so that the bench links no libcuda and runs the
 * same on a GPU and on the driver double from tests/cuda.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The driver API version the calls are written against. */
#define CUDA_API 12000

struct b_cu cu;

static char device_name[128];
static int driver_version;

static const struct {
	const char *name;
	size_t offset;
} symbols[] = {
#define SYM(name, field) { name, offsetof(struct b_cu, field) }
	SYM("cuInit", init),
	SYM("cuGetErrorName", error_name),
	SYM("cuDriverGetVersion", driver_version),
	SYM("cuDeviceGet", device_get),
	SYM("cuDeviceGetName", device_name),
	SYM("cuDevicePrimaryCtxRetain", primary_retain),
	SYM("cuCtxSetCurrent", ctx_set_current),
	SYM("cuCtxSynchronize", ctx_sync),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
	SYM("cuMemHostAlloc", host_alloc),
	SYM("cuMemFreeHost", host_free),
	SYM("cuMemsetD8", memset_d8),
	SYM("cuMemcpy", memcpy),
	SYM("cuMemcpyAsync", memcpy_async),
	SYM("cuStreamCreate", stream_create),
	SYM("cuStreamDestroy", stream_destroy),
	SYM("cuStreamSynchronize", stream_sync),
#undef SYM
};

typedef CUresult (*proc_fn)(const char *symbol, void **fn, int version,
			    cuuint64_t flags,
			    CUdriverProcAddressQueryResult *status);

static int resolve(void *lib, char *why, size_t len)
{
	CUdriverProcAddressQueryResult status;
	proc_fn proc;

	/* POSIX's way to a function pointer from dlsym. */
	*(void **) &proc = dlsym(lib, "cuGetProcAddress_v2");
	if (!proc) {
		snprintf(why, len, "libcuda.so.1 lacks cuGetProcAddress_v2 "
			 "(a CUDA 12 driver or newer is needed)");
		return -1;
	}
	/* Default flags: cuMemcpy and stream 0 are the legacy stream's. */
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		void **fn = (void **) ((char *) &cu + symbols[i].offset);

		if (proc(symbols[i].name, fn, CUDA_API,
			 CU_GET_PROC_ADDRESS_DEFAULT, &status) || !*fn) {
			snprintf(why, len, "libcuda.so.1 has no %s",
				 symbols[i].name);
			return -1;
		}
	}
	return 0;
}

int b_cu_ok(CUresult r, const char *call)
{
	const char *name = "?";

	if (r == CUDA_SUCCESS)
		return 0;
	cu.error_name(r, &name);
	snprintf(b_errmsg, sizeof(b_errmsg), "%s: %s", call, name);
	return -1;
}

int b_cuda_open(char *why, size_t len)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUcontext ctx;
	CUdevice dev;

	if (!lib) {
		snprintf(why, len, "%s", dlerror());
		return -1;
	}
	if (resolve(lib, why, len))
		return -1;
	if (b_cu_ok(cu.init(0), "cuInit") ||
	    b_cu_ok(cu.device_get(&dev, 0), "cuDeviceGet") ||
	    b_cu_ok(cu.primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
	    b_cu_ok(cu.ctx_set_current(ctx), "cuCtxSetCurrent")) {
		snprintf(why, len, "%s", b_errmsg);
		return -1;
	}
	if (cu.device_name(device_name, sizeof(device_name), dev))
		snprintf(device_name, sizeof(device_name), "device 0");
	cu.driver_version(&driver_version);
	return 0;
}

const char *b_cuda_device(void)
{
	return device_name;
}

int b_cuda_version(void)
{
	return driver_version;
}
