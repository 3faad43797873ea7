/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: cuGetProcAddress and the error strings.
 *
 * The table holds every variant the double exports, with the CUDA version
 * that introduced it (cudaTypedefs.h names them PFN_<name>_v<version>).
 * A lookup returns the newest variant not newer than the caller's version,
 * and its per-thread-stream twin where the caller asks for that.
 */
#include "double.h"

#include <stdlib.h>
#include <string.h>

typedef void (*proc_fn)(void);

struct proc {
	const char *name;
	int since;
	proc_fn fn;
	proc_fn ptds;
};

#define P(name, since, fn)	{ name, since, (proc_fn)fn, NULL }
#define PT(name, since, fn, pt)	{ name, since, (proc_fn)fn, (proc_fn)pt }

static const struct proc procs[] = {
	P("cuInit", 2000, cuInit),
	P("cuDriverGetVersion", 2020, cuDriverGetVersion),
	P("cuDeviceGet", 2000, cuDeviceGet),
	P("cuDeviceGetCount", 2000, cuDeviceGetCount),
	P("cuDeviceGetName", 2000, cuDeviceGetName),
	P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
	P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
	P("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
	P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
	P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
	P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
	P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
	P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
	P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
	P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
	P("cuDevicePrimaryCtxSetFlags", 7000, cuDevicePrimaryCtxSetFlags),
	P("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
	P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
	P("cuCtxCreate", 2000, cuCtxCreate),
	P("cuCtxCreate", 3020, cuCtxCreate_v2),
	P("cuCtxCreate", 11040, cuCtxCreate_v3),
	P("cuCtxCreate", 12050, cuCtxCreate_v4),
	P("cuCtxDestroy", 2000, cuCtxDestroy),
	P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
	P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	P("cuCtxGetId", 12000, cuCtxGetId),
	P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	P("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
	P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
	P("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
	P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
	P("cuCtxGetDevice", 2000, cuCtxGetDevice),
	P("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
	P("cuCtxSynchronize", 2000, cuCtxSynchronize),
	P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
	P("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
	P("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
	P("cuCtxGetApiVersion", 3020, cuCtxGetApiVersion),
	P("cuCtxGetFlags", 7000, cuCtxGetFlags),
	P("cuCtxSetFlags", 12010, cuCtxSetFlags),
	P("cuCtxGetStreamPriorityRange", 5050, cuCtxGetStreamPriorityRange),
	P("cuMemAlloc", 3020, cuMemAlloc_v2),
	P("cuMemFree", 3020, cuMemFree_v2),
	P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
	P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
	P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
	P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
	P("cuMemHostAlloc", 2020, cuMemHostAlloc),
	P("cuMemFreeHost", 2000, cuMemFreeHost),
	P("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
	P("cuMemHostRegister", 4000, cuMemHostRegister),
	P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
	P("cuMemHostUnregister", 4000, cuMemHostUnregister),
	P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
	P("cuMemAllocManaged", 6000, cuMemAllocManaged),
	P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
	P("cuMemCreate", 10020, cuMemCreate),
	P("cuMemRelease", 10020, cuMemRelease),
	P("cuMemAddressReserve", 10020, cuMemAddressReserve),
	P("cuMemAddressFree", 10020, cuMemAddressFree),
	P("cuMemMap", 10020, cuMemMap),
	P("cuMemUnmap", 10020, cuMemUnmap),
	P("cuMemSetAccess", 10020, cuMemSetAccess),
	P("cuMemGetAccess", 10020, cuMemGetAccess),
	P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
	P("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
	P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
	P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
	PT("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
	PT("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
	PT("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
	PT("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
	PT("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
	PT("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
	PT("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
	PT("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
	PT("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
	PT("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
	PT("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
	PT("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2,
	   cuMemcpyHtoDAsync_v2_ptsz),
	PT("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2,
	   cuMemcpyDtoHAsync_v2_ptsz),
	PT("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2,
	   cuMemcpyDtoDAsync_v2_ptsz),
	PT("cuMemcpyPeer", 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
	PT("cuMemcpyPeerAsync", 4000, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz),
	P("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2),
	P("cuStreamCreate", 2000, cuStreamCreate),
	P("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
	PT("cuStreamGetPriority", 5050, cuStreamGetPriority,
	   cuStreamGetPriority_ptsz),
	PT("cuStreamGetFlags", 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
	P("cuStreamDestroy", 2000, cuStreamDestroy),
	P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
	PT("cuStreamSynchronize", 2000, cuStreamSynchronize,
	   cuStreamSynchronize_ptsz),
	PT("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
	PT("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
	PT("cuStreamGetCtx", 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
	PT("cuStreamGetCtx", 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz),
	P("cuEventCreate", 2000, cuEventCreate),
	PT("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
	P("cuEventSynchronize", 2000, cuEventSynchronize),
	P("cuEventQuery", 2000, cuEventQuery),
	P("cuEventDestroy", 2000, cuEventDestroy),
	P("cuEventDestroy", 4000, cuEventDestroy_v2),
	P("cuEventElapsedTime", 2000, cuEventElapsedTime),
	P("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
	P("cuLibraryLoadData", 12000, cuLibraryLoadData),
	P("cuLibraryUnload", 12000, cuLibraryUnload),
	P("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
	P("cuLaunchKernel", 4000, cuLaunchKernel),
	P("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
	P("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
	P("cuPointerSetAttribute", 6000, cuPointerSetAttribute),
	P("cuGetProcAddress", 11030, cuGetProcAddress),
	P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
	P("cuGetErrorString", 6000, cuGetErrorString),
	P("cuGetErrorName", 6000, cuGetErrorName),
};

/* Works before cuInit: the runtime looks up cuInit itself this way. */
static CUresult proc_address(const char *symbol, void **pfn, int version,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const struct proc *best = NULL;
	bool named = false;
	size_t i;

	if (!symbol || !pfn || (flags & ~known) || version > driver_version())
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, symbol))
			continue;
		named = true;
		if (procs[i].since <= version &&
		    (!best || procs[i].since > best->since))
			best = &procs[i];
	}
	*pfn = NULL;
	if (!best) {
		if (status)
			*status = named ?
				  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
				  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
	    best->ptds)
		*pfn = (void *)best->ptds;
	else
		*pfn = (void *)best->fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

ENTRY(cuGetProcAddress,
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),
      proc_address(symbol, pfn, cudaVersion, flags, NULL))

ENTRY(cuGetProcAddress_v2,
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
       CUdriverProcAddressQueryResult *symbolStatus),
      proc_address(symbol, pfn, cudaVersion, flags, symbolStatus))

struct error {
	CUresult code;
	const char *name;
	const char *text;
};

#define E(code, text)	{ code, #code, text }

/* Every code the double returns, and a few more that callers print. */
static const struct error errors[] = {
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
	E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
	E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
	E(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
	  "the provided execution affinity is not supported"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
	E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
	E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
	E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
	E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	  "part or all of the requested memory range is already mapped"),
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	  "pointer does not correspond to a registered memory region"),
	E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
};

static const struct error *error_find(CUresult r)
{
	size_t i;

	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == r)
			return &errors[i];
	return NULL;
}

const char *error_name(CUresult r)
{
	const struct error *e = error_find(r);

	return e ? e->name : "CUDA_ERROR_?";
}

/* Unknown codes: CUDA_ERROR_INVALID_VALUE and a NULL string. */
static CUresult error_string(CUresult r, const char **p, bool name)
{
	const struct error *e = error_find(r);

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	*p = e ? (name ? e->name : e->text) : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

ENTRY(cuGetErrorString, (CUresult error, const char **pStr),
      error_string(error, pStr, false))

ENTRY(cuGetErrorName, (CUresult error, const char **pStr),
      error_string(error, pStr, true))
