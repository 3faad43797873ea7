/* SPDX-License-Identifier: BSD-2-Clause */
/* The CUDA driver's calls, found as the runtime finds them: through
 * cuGetProcAddress_v2, at the API version they are written against. */
#include <dlfcn.h>

#include "hml_cuda.h"

#define CUDA_API 12000

typedef CUresult (*proc_fn)(const char *symbol, void **fn, int version,
			    cuuint64_t flags,
			    CUdriverProcAddressQueryResult *status);

static void *lookup(proc_fn proc, const char *name, int version)
{
	CUdriverProcAddressQueryResult status;
	void *fn = NULL;

	if (!proc || proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT,
			  &status))
		fn = NULL;
	return fn;
}

void *hml_cuda_proc(void *lib, const char *name, int version)
{
	return lookup((proc_fn) dlsym(lib, "cuGetProcAddress_v2"), name,
		      version);
}

const char *hml_cuda_procs(void *lib, void *table,
			   const struct hml_cuda_sym *syms, size_t n)
{
	proc_fn proc = (proc_fn) dlsym(lib, "cuGetProcAddress_v2");

	if (!proc)
		return "cuGetProcAddress_v2";
	for (size_t i = 0; i < n; i++) {
		void **fn = (void **) ((char *) table + syms[i].offset);

		*fn = lookup(proc, syms[i].name, CUDA_API);
		if (!*fn)
			return syms[i].name;
	}
	return NULL;
}
