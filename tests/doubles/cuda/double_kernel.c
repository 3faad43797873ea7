/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: libraries and kernel launches, for the one kernel
 * it knows, hmemloop's copy kernel (shim/data/kernel.c).
 *
 * The double runs no device code. A library is accepted when its image is
 * PTX text; its kernel hml_copy is found when the text has that entry.
 * A launch of it is what the kernel does: copy gridDim.y of its parameter's
 * 16 destinations, 16 sources and 16 lengths, in no order, on the stream.
 */
#include "double.h"

#include <stdlib.h>
#include <string.h>

#define LIBRARY_MAGIC	0x4c696221u
#define COPIES		16

/* Libraries stay loaded until unloaded, as a driver's do: kept in a
 * list, they are not leaks. */
struct CUlib_st {
	uint32_t magic;
	bool has_copy;
	struct CUlib_st *next;
};

static struct CUlib_st *libs;

/* The kernel's one parameter. */
struct copy_param {
	CUdeviceptr dst[COPIES];
	CUdeviceptr src[COPIES];
	uint64_t len[COPIES];
};

static struct CUkern_st {
	int unused;
} copy_kernel;

static CUresult load(CUlibrary *lib, const void *code)
{
	const char *text = code;
	struct CUlib_st *l;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!lib || !code)
		return CUDA_ERROR_INVALID_VALUE;
	if (strncmp(text, ".version", 8) || !strstr(text, ".target"))
		return CUDA_ERROR_INVALID_IMAGE;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->magic = LIBRARY_MAGIC;
	l->has_copy = strstr(text, ".entry hml_copy(");
	lock();
	l->next = libs;
	libs = l;
	unlock();
	*lib = l;
	return CUDA_SUCCESS;
}

API CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
			       CUjit_option *jitOptions, void **jitOptionsValues,
			       unsigned int numJitOptions,
			       CUlibraryOption *libraryOptions,
			       void **libraryOptionValues,
			       unsigned int numLibraryOptions)
{
	(void) jitOptions, (void) jitOptionsValues, (void) numJitOptions;
	(void) libraryOptions, (void) libraryOptionValues;
	(void) numLibraryOptions;
	return traced(__func__, load(library, code));
}

static CUresult unload(CUlibrary lib)
{
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	struct CUlib_st **p;

	lock();
	for (p = &libs; *p; p = &(*p)->next)
		if (*p == lib) {
			*p = lib->next;
			lib->magic = 0;
			free(lib);
			r = CUDA_SUCCESS;
			break;
		}
	unlock();
	return r;
}

ENTRY(cuLibraryUnload, (CUlibrary library), unload(library))

static CUresult get_kernel(CUkernel *k, CUlibrary lib, const char *name)
{
	if (!k || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!lib || lib->magic != LIBRARY_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!lib->has_copy || strcmp(name, "hml_copy"))
		return CUDA_ERROR_NOT_FOUND;
	*k = &copy_kernel;
	return CUDA_SUCCESS;
}

ENTRY(cuLibraryGetKernel,
      (CUkernel *pKernel, CUlibrary library, const char *name),
      get_kernel(pKernel, library, name))

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		       unsigned bx, unsigned by, unsigned bz, unsigned shared,
		       CUstream h, void **params, void **extra)
{
	struct CUctx_st *c;
	struct copy_param p;
	size_t len[COPIES];
	CUresult r;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((void *) f != (void *) &copy_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!gx || !gy || gy > COPIES || gz != 1 || !bx || bx > 1024 ||
	    by != 1 || bz != 1 || shared || extra || !params || !params[0])
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	r = ctx_current(&c);
	unlock();
	if (r)
		return r;
	/* The driver takes the parameter's bytes at the launch. */
	memcpy(&p, params[0], sizeof(p));
	for (unsigned i = 0; i < gy; i++)
		len[i] = p.len[i];
	return copies_async(p.dst, p.src, len, gy, h, true);
}

ENTRY(cuLaunchKernel,
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
       void **kernelParams, void **extra),
      launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
	     sharedMemBytes, hStream, kernelParams, extra))
