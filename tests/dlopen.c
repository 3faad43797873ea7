/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Runs tests/tables.c from a plugin opened RTLD_LOCAL, as NCCL opens its
 * network plugins: libfabric is then not in the global scope, and hmemloop
 * must still find it. This program links neither libfabric nor libcuda.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const char *dir = getenv("HML_BUILDDIR");
	int (*tables_main)(int, char **);
	char path[4096];
	void *plugin;

	snprintf(path, sizeof(path), "%s/tests/.libs/libtables.so",
		 dir ? dir : ".");
	plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!plugin) {
		printf("FAIL: %s\n", dlerror());
		return 1;
	}
	tables_main = (int (*)(int, char **)) dlsym(plugin, "tables_main");
	if (!tables_main) {
		printf("FAIL: %s\n", dlerror());
		return 1;
	}
	return tables_main(argc, argv);
}
