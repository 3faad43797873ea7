/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_getinfo, interposed to ask for FI_HMEM on the application's behalf
 * (HMEMLOOP_HMEM). Without FI_HMEM, shm copies device memory between
 * processes with a host memcpy (libfabric issue 12328); with it, the
 * provider makes device-aware copies on every path.
 *
 * The application's answer is libfabric's, untouched. The provider is
 * also asked the same hints plus FI_HMEM, and for each entry of the
 * answer its FI_HMEM twin in that second answer (every capability the
 * entry had, and more) is kept inside the library (twin.c), where the
 * provider really registers CUDA memory; hmem.c gives FI_HMEM to the
 * domains and endpoints opened from such entries.
 *
 * Each symbol version of fi_getinfo is interposed: the compat ones read
 * older layouts of the hints, and the lists they return are freed by the
 * fi_freeinfo of the same version.
 */
#include <dlfcn.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_log.h"

typedef int (*getinfo_fn)(uint32_t version, const char *node,
			  const char *service, uint64_t flags,
			  const struct fi_info *hints, struct fi_info **info);
typedef void (*freeinfo_fn)(struct fi_info *info);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *info);

/* One symbol version's calls. */
struct abi {
	const char *version;
	bool newest;			/* also what an unversioned dlsym finds */
	getinfo_fn getinfo;
	freeinfo_fn freeinfo;
	dupinfo_fn dupinfo;
};

static void *load(const struct abi *a, const char *name)
{
	void *fn = hml_lookup(name, a->version);

	/* Our fi_getinfo@@FABRIC_1.9 is the default an unversioned dlsym
	 * finds, on a libfabric that may predate that version. */
	if (!fn && a->newest)
		fn = dlsym(RTLD_NEXT, name);
	if (!fn)
		hml_warn("libfabric's %s@%s not found", name, a->version);
	return fn;
}

static bool abi_load(struct abi *a)
{
	if (__atomic_load_n(&a->dupinfo, __ATOMIC_ACQUIRE))
		return true;
	a->getinfo = load(a, "fi_getinfo");
	a->freeinfo = load(a, "fi_freeinfo");
	__atomic_store_n(&a->dupinfo, (dupinfo_fn) load(a, "fi_dupinfo"),
			 __ATOMIC_RELEASE);
	return a->getinfo && a->freeinfo && a->dupinfo;
}

static struct abi abi_1_0 = { .version = "FABRIC_1.0" },
		  abi_1_1 = { .version = "FABRIC_1.1" },
		  abi_1_2 = { .version = "FABRIC_1.2" },
		  abi_1_3 = { .version = "FABRIC_1.3" },
		  abi_1_7 = { .version = "FABRIC_1.7" },
		  abi_1_8 = { .version = "FABRIC_1.8" },
		  newest = { .version = "FABRIC_1.9", .newest = true };

struct fi_info *hml_info_dup(const struct fi_info *info)
{
	return abi_load(&newest) ? newest.dupinfo(info) : NULL;
}

void hml_info_free(struct fi_info *info)
{
	if (info && abi_load(&newest))
		newest.freeinfo(info);
}

/* ---- the twins ---- */

static bool wanted(const struct fi_info *hints)
{
	if (!hml_config.enable || hml_config.hmem == HML_HMEM_OFF ||
	    hml_depth || !hints || (hints->caps & FI_HMEM))
		return false;
	return hml_config.hmem == HML_HMEM_ON ||
	       (hints->domain_attr &&
		(hints->domain_attr->mr_mode & FI_MR_HMEM));
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* b is the FI_HMEM answer for the entry a, with everything a had. */
static bool same(const struct fi_info *a, const struct fi_info *b)
{
	return a->fabric_attr && b->fabric_attr && a->domain_attr &&
	       b->domain_attr && a->ep_attr && b->ep_attr &&
	       same_str(a->fabric_attr->prov_name, b->fabric_attr->prov_name) &&
	       same_str(a->fabric_attr->name, b->fabric_attr->name) &&
	       same_str(a->domain_attr->name, b->domain_attr->name) &&
	       a->ep_attr->type == b->ep_attr->type &&
	       a->ep_attr->protocol == b->ep_attr->protocol &&
	       a->addr_format == b->addr_format &&
	       !(a->caps & ~b->caps) && (b->caps & FI_HMEM);
}

/* Keep the FI_HMEM twin, in granted, of each entry of list that has
 * one; true if any was kept. */
static bool keep(const struct fi_info *list, const struct fi_info *granted)
{
	bool any = false;

	for (; list; list = list->next) {
		const struct fi_info *b = granted;

		while (b && !same(list, b))
			b = b->next;
		if (b && hml_twin_keep(list, b))
			any = true;
	}
	return any;
}

static int getinfo(struct abi *a, uint32_t version, const char *node,
		   const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *h, *granted = NULL;
	int ret;

	if (!abi_load(a))
		return -FI_ENOSYS;
	ret = HML_FORWARD(a->getinfo(version, node, service, flags, hints,
				     info));
	if (ret || !wanted(hints))
		return ret;

	h = a->dupinfo(hints);
	if (!h)
		return 0;
	h->caps |= FI_HMEM;
	ret = HML_FORWARD(a->getinfo(version, node, service, flags, h,
				     &granted));
	a->freeinfo(h);
	if (ret)
		hml_info_once("FI_HMEM not asked for: no provider grants it "
			      "to the application's hints (%d)", ret);
	else if (!keep(*info, granted))
		hml_debug("FI_HMEM not asked for: no entry keeps its "
			  "capabilities with it, or none works");
	a->freeinfo(granted);
	return 0;
}

#define GETINFO(name, abi, at)						\
	HML_EXPORT int name(uint32_t version, const char *node,		\
			    const char *service, uint64_t flags,	\
			    const struct fi_info *hints,		\
			    struct fi_info **info);			\
	__asm__(".symver " #name ", fi_getinfo" at);			\
	int name(uint32_t version, const char *node, const char *service, \
		 uint64_t flags, const struct fi_info *hints,		\
		 struct fi_info **info)					\
	{								\
		return getinfo(&abi, version, node, service, flags,	\
			       hints, info);				\
	}

GETINFO(hml_fi_getinfo_1_0, abi_1_0, "@FABRIC_1.0")
GETINFO(hml_fi_getinfo_1_1, abi_1_1, "@FABRIC_1.1")
GETINFO(hml_fi_getinfo_1_2, abi_1_2, "@FABRIC_1.2")
GETINFO(hml_fi_getinfo_1_3, abi_1_3, "@FABRIC_1.3")
GETINFO(hml_fi_getinfo_1_7, abi_1_7, "@FABRIC_1.7")
GETINFO(hml_fi_getinfo_1_8, abi_1_8, "@FABRIC_1.8")
GETINFO(hml_fi_getinfo_1_9, newest, "@@FABRIC_1.9")
