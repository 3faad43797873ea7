/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUDA driver, opened with dlopen and resolved through
 * cuGetProcAddress_v2, so that the bench links no libcuda and runs the
 * same on a GPU and on the driver double from tests/doubles/cuda.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The driver API version the calls are written against. */
#define CUDA_API 12000

struct b_cu cu;

/* The devices a mode uses: mode 1 device 0, --cross devices 0 and 1. */
#define NAMED 2

static char device_name[NAMED][128];
static int driver_version;
static int device_count = -1;

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
	SYM("cuDeviceGetCount", device_count),
	SYM("cuDeviceCanAccessPeer", can_access_peer),
	SYM("cuDevicePrimaryCtxRetain", primary_retain),
	SYM("cuCtxSetCurrent", ctx_set_current),
	SYM("cuCtxSynchronize", ctx_sync),
	SYM("cuCtxEnablePeerAccess", ctx_enable_peer),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
	SYM("cuMemHostAlloc", host_alloc),
	SYM("cuMemFreeHost", host_free),
	SYM("cuMemsetD8", memset_d8),
	SYM("cuMemcpy", memcpy),
	SYM("cuMemcpyAsync", memcpy_async),
	SYM("cuMemcpyPeerAsync", memcpy_peer_async),
	SYM("cuStreamCreate", stream_create),
	SYM("cuStreamDestroy", stream_destroy),
	SYM("cuStreamSynchronize", stream_sync),
	SYM("cuIpcGetMemHandle", ipc_get),
	SYM("cuIpcOpenMemHandle", ipc_open),
	SYM("cuIpcCloseMemHandle", ipc_close),
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

/* Names of the devices there are, for the header. */
static void name_devices(void)
{
	CUdevice dev;

	for (int i = 0; i < NAMED && i < device_count; i++)
		if (cu.device_get(&dev, i) ||
		    cu.device_name(device_name[i], sizeof(device_name[i]), dev))
			snprintf(device_name[i], sizeof(device_name[i]),
				 "device %d", i);
}

int b_cuda_open(char *why, size_t len)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult r;
	CUcontext ctx;

	if (!lib) {
		snprintf(why, len, "%s", dlerror());
		return -1;
	}
	if (resolve(lib, why, len))
		return -1;
	r = cu.init(0);
	/* No device is an answer to --cross, not only an error. */
	if (r == CUDA_ERROR_NO_DEVICE)
		device_count = 0;
	if (b_cu_ok(r, "cuInit") ||
	    b_cu_ok(cu.device_count(&device_count), "cuDeviceGetCount") ||
	    b_cuda_context(0, &ctx) ||
	    b_cu_ok(cu.ctx_set_current(ctx), "cuCtxSetCurrent")) {
		snprintf(why, len, "%s", b_errmsg);
		return -1;
	}
	name_devices();
	cu.driver_version(&driver_version);
	return 0;
}

int b_cuda_count(void)
{
	return device_count;
}

int b_cuda_context(int ordinal, CUcontext *ctx)
{
	CUdevice dev;

	return b_cu_ok(cu.device_get(&dev, ordinal), "cuDeviceGet") ||
	       b_cu_ok(cu.primary_retain(ctx, dev),
		       "cuDevicePrimaryCtxRetain") ? -1 : 0;
}

const char *b_cuda_device(int ordinal)
{
	return ordinal >= 0 && ordinal < NAMED ? device_name[ordinal] : "?";
}

int b_cuda_version(void)
{
	return driver_version;
}
