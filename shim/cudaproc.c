/* SPDX-License-Identifier: BSD-2-Clause */
/* The CUDA driver's calls, found as the runtime finds them: through
 * cuGetProcAddress_v2, at the API version they are written against. */
#include <dlfcn.h>

#include "hml_cuda.h"

#define CUDA_API 12000

typedef CUresult (*proc_fn)(const char *symbol, void **fn, int version,
			    cuuint64_t flags,
			    CUdriverProcAddressQueryResult *status);

void *hml_cuda_proc(void *lib, const char *name, int version)
{
	proc_fn proc = (proc_fn) dlsym(lib, "cuGetProcAddress_v2");
	CUdriverProcAddressQueryResult status;
	void *fn = NULL;

	if (proc && proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT,
			 &status))
		fn = NULL;
	return fn;
}

const char *hml_cuda_procs(void *lib, void *table,
			   const struct hml_cuda_sym *syms, size_t n)
{
	if (!dlsym(lib, "cuGetProcAddress_v2"))
		return "cuGetProcAddress_v2";
	for (size_t i = 0; i < n; i++) {
		void **fn = (void **) ((char *) table + syms[i].offset);

		*fn = hml_cuda_proc(lib, syms[i].name, CUDA_API);
		if (!*fn)
			return syms[i].name;
	}
	return NULL;
}
