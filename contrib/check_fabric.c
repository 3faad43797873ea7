/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-check: the libfabric a program would load (libfabric.so.1 as
 * the loader finds it), its providers, and which of them move CUDA memory
 * when asked for FI_HMEM, by the library's own probe (shim/obj/probe.c):
 * Debian 12's shm grants FI_HMEM without any CUDA support.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "check.h"
#include "hml_probe.h"

/* The symbol versions a program built against these headers binds. */
#if FI_MAJOR_VERSION >= 2
#define INFO_ABI "FABRIC_1.8"
#else
#define INFO_ABI "FABRIC_1.3"
#endif

static struct {
	uint32_t (*version)(void);
	int (*getinfo)(uint32_t version, const char *node, const char *service,
		       uint64_t flags, const struct fi_info *hints,
		       struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	hml_fabric_fn fabric;
} fi;

static bool load(struct check *c)
{
	void *h = check_open("libfabric.so.1", RTLD_GLOBAL, c->fabric.path,
			     c->fabric.error);

	if (!h)
		return false;
	*(void **) &fi.version = dlvsym(h, "fi_version", "FABRIC_1.0");
	*(void **) &fi.getinfo = dlvsym(h, "fi_getinfo", INFO_ABI);
	*(void **) &fi.freeinfo = dlvsym(h, "fi_freeinfo", INFO_ABI);
	*(void **) &fi.dupinfo = dlvsym(h, "fi_dupinfo", INFO_ABI);
	*(void **) &fi.fabric = dlvsym(h, "fi_fabric", "FABRIC_1.1");
	if (!fi.version || !fi.getinfo || !fi.freeinfo || !fi.dupinfo ||
	    !fi.fabric) {
		snprintf(c->fabric.error, sizeof(c->fabric.error),
			 "it lacks fi_getinfo@%s: older than the libfabric "
			 "hmemloop was built for (%d.%d)", INFO_ABI,
			 FI_MAJOR_VERSION, FI_MINOR_VERSION);
		return false;
	}
	return true;
}

/* The API version to ask for: the headers', or the library's if older. */
static uint32_t api(void)
{
	uint32_t v = fi.version();

	return v < FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) ? v :
	       FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

static struct prov *prov_of(struct check *c, const struct fi_info *e)
{
	struct prov *p;
	int i;

	for (i = 0; i < c->fabric.nprovs; i++)
		if (!strcmp(c->fabric.provs[i].name, e->fabric_attr->prov_name))
			return &c->fabric.provs[i];
	if (i == CHECK_PROVS)
		return NULL;
	p = &c->fabric.provs[c->fabric.nprovs++];
	snprintf(p->name, sizeof(p->name), "%s", e->fabric_attr->prov_name);
	snprintf(p->version, sizeof(p->version), "%u.%u",
		 FI_MAJOR(e->fabric_attr->prov_version),
		 FI_MINOR(e->fabric_attr->prov_version));
	return p;
}

static enum prov_hmem hmem(const struct prov *p)
{
	struct fi_info *hints = fi.dupinfo(NULL), *info = NULL;
	enum prov_hmem h = HMEM_NOT_GRANTED;

	if (!hints)
		return h;
	hints->caps = FI_HMEM;
	hints->mode = ~0ULL;
	hints->ep_attr->type = p->rdm ? FI_EP_RDM : FI_EP_UNSPEC;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
		FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM | FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(p->name);
	if (!fi.getinfo(api(), NULL, NULL, 0, hints, &info) &&
	    (info->caps & FI_HMEM))
		h = hml_registers_cuda(fi.fabric, info) ? HMEM_CUDA : HMEM_NO_CUDA;
	fi.freeinfo(info);
	fi.freeinfo(hints);
	return h;
}

void check_fabric(struct check *c)
{
	struct fi_info *list = NULL;
	uint32_t v;
	int ret;

	c->fabric.loaded = load(c);
	if (!c->fabric.loaded)
		return;
	v = fi.version();
	snprintf(c->fabric.version, sizeof(c->fabric.version), "%u.%u",
		 FI_MAJOR(v), FI_MINOR(v));
	ret = fi.getinfo(api(), NULL, NULL, 0, NULL, &list);
	if (ret) {
		snprintf(c->fabric.error, sizeof(c->fabric.error),
			 "fi_getinfo: no provider (%d)", ret);
		return;
	}
	for (struct fi_info *e = list; e; e = e->next) {
		struct prov *p = prov_of(c, e);

		if (p && e->ep_attr->type == FI_EP_RDM)
			p->rdm = true;
	}
	fi.freeinfo(list);
	for (int i = 0; i < c->fabric.nprovs; i++)
		c->fabric.provs[i].hmem = hmem(&c->fabric.provs[i]);
}
