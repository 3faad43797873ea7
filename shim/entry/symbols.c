/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libfabric's own symbols, by name and version: what the entry points
 * (interpose.c) forward to, and what getinfo.c calls.
 */
#include <dlfcn.h>

#include "hml.h"
#include "hml_log.h"

void *hml_lookup(const char *name, const char *version)
{
	void *fn = dlvsym(RTLD_NEXT, name, version);
	void *lib;

	/* libfabric loaded only by a plugin opened RTLD_LOCAL is not in the
	 * global scope that RTLD_NEXT searches. */
	if (!fn && (lib = dlopen("libfabric.so.1", RTLD_NOLOAD | RTLD_LAZY))) {
		fn = dlvsym(lib, name, version);
		dlclose(lib);
	}
	return fn;
}

void *hml_resolve(const char *name, const char *version)
{
	void *fn = hml_lookup(name, version);

	if (!fn)
		hml_warn("libfabric's %s@%s not found", name, version);
	return fn;
}
