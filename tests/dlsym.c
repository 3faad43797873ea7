/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that opens libfabric itself, as ctypes-style bindings do, and
 * looks fi_fabric up in its handle: through hmemloop the fabric it opens
 * is wrapped. And dlsym keeps glibc's meaning where it depends on the
 * caller: RTLD_NEXT from this program finds the next definition after
 * it, not after hmemloop. This program links neither libfabric nor
 * libcuda.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

static void fail(const char *what)
{
	printf("FAIL: %s\n", what);
	exit(1);
}

/* The object an address lies in; "" for none (the heap). */
static const char *object_of(const void *p)
{
	Dl_info info;

	return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "";
}

static bool from_hmemloop(const void *p)
{
	return strstr(object_of(p), "libhmemloop") != NULL;
}

int main(int argc, char **argv)
{
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
		       const struct fi_info *, struct fi_info **);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	struct fi_info *(*dupinfo)(struct fi_info *);
	void (*freeinfo)(struct fi_info *);
	const char *prov = "tcp;ofi_rxm";
	struct fi_info *hints, *info;
	struct fid_fabric *fab;
	void *lib, *next;
	int c;

	while ((c = getopt(argc, argv, "p:")) != -1)
		if (c == 'p')
			prov = optarg;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Without hmemloop both are libc's; with it, both hmemloop's. */
	next = dlsym(RTLD_NEXT, "dlsym");
	if (!next || next != dlsym(RTLD_DEFAULT, "dlsym"))
		fail("dlsym(RTLD_NEXT, \"dlsym\") from the program is not the "
		     "first definition after it");
	printf("ok: RTLD_NEXT searches after the caller (%s)\n",
	       object_of(next));

	lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fail(dlerror());
	getinfo = (__typeof__(getinfo)) dlsym(lib, "fi_getinfo");
	fabric = (__typeof__(fabric)) dlsym(lib, "fi_fabric");
	dupinfo = (__typeof__(dupinfo)) dlsym(lib, "fi_dupinfo");
	freeinfo = (__typeof__(freeinfo)) dlsym(lib, "fi_freeinfo");
	if (!getinfo || !fabric || !dupinfo || !freeinfo)
		fail(dlerror());
	if (!from_hmemloop(fabric))
		fail("dlsym(libfabric, \"fi_fabric\") is libfabric's own");
	if (from_hmemloop(getinfo))
		fail("dlsym(libfabric, \"fi_getinfo\") is not libfabric's");
	printf("ok: dlsym(libfabric, \"fi_fabric\") is hmemloop's\n");

	hints = dupinfo(NULL);
	hints->caps = FI_MSG | FI_RMA;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup(prov);
	c = getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	freeinfo(hints);
	if (c == -FI_ENODATA) {
		printf("SKIP: provider %s is not available here\n", prov);
		return 77;
	}
	if (c || fabric(info->fabric_attr, &fab, NULL))
		fail("fi_getinfo or fi_fabric failed");
	/* Wrapped: its fid ops are a copy of the provider's, on the heap. */
	if (*object_of(fab->fid.ops))
		fail("the fabric opened through dlsym is not wrapped");
	printf("ok: the fabric opened through dlsym is wrapped\n");
	fi_close(&fab->fid);
	freeinfo(info);
	return 0;
}
