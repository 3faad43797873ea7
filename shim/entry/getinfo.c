/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_getinfo, interposed to ask for FI_HMEM on the application's behalf
 * (HMEMLOOP_HMEM). Without FI_HMEM, shm copies device memory between
 * processes with a host memcpy (libfabric issue 12328); with it, the
 * provider makes device-aware copies on every path.
 *
 * The application's answer keeps its entries and their order: an entry is
 * replaced by the provider's answer to the same hints plus FI_HMEM only
 * where that answer has every capability the entry had and a probe shows
 * that the provider really registers CUDA memory. The FI_HMEM bits are
 * taken out of the replaced entry again, so that the application sees the
 * capabilities it asked for; hmem.c puts them back where the info goes
 * back into the provider.
 *
 * Each symbol version of fi_getinfo is interposed: the compat ones read
 * older layouts of the hints, and the lists they return are freed by the
 * fi_freeinfo of the same version.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_log.h"
#include "hml_probe.h"

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

/* ---- does the provider really register CUDA memory? ---- */

#define VERDICTS 32

static struct verdict {
	char key[160];
	bool works;
} verdicts[VERDICTS];
static int nverdicts;
static pthread_mutex_t verdict_lock = PTHREAD_MUTEX_INITIALIZER;

static void verdict_key(const struct fi_info *info, char *key, size_t n)
{
	snprintf(key, n, "%s/%s/%s", info->fabric_attr->prov_name,
		 info->fabric_attr->name, info->domain_attr->name);
}

static struct verdict *verdict_find(const char *key)
{
	for (int i = 0; i < nverdicts; i++)
		if (!strcmp(verdicts[i].key, key))
			return &verdicts[i];
	return NULL;
}

/* probe.c, through libfabric's own fi_fabric, with hml_depth raised so
 * that nothing of the probe is wrapped. */
static bool probe(const struct fi_info *info)
{
	static hml_fabric_fn fabric_open;

	if (!fabric_open)
		fabric_open = hml_resolve("fi_fabric", "FABRIC_1.1");
	return fabric_open &&
	       HML_FORWARD(hml_registers_cuda(fabric_open, info));
}

static bool works(const struct fi_info *info)
{
	char key[sizeof(verdicts[0].key)];
	struct verdict *v;
	bool ok;

	verdict_key(info, key, sizeof(key));
	pthread_mutex_lock(&verdict_lock);
	v = verdict_find(key);
	if (v) {
		ok = v->works;
		goto out;
	}
	ok = probe(info);
	if (ok)
		hml_info("%s: FI_HMEM asked for on the application's behalf",
			 key);
	else
		hml_info("%s: FI_HMEM not asked for: the provider cannot "
			 "register CUDA memory (libfabric's CUDA support did "
			 "not start)", key);
	if (nverdicts < VERDICTS) {
		v = &verdicts[nverdicts++];
		strcpy(v->key, key);
		v->works = ok;
	}
out:
	pthread_mutex_unlock(&verdict_lock);
	return ok;
}

bool hml_hmem_verified(const struct fi_info *info)
{
	char key[sizeof(verdicts[0].key)];
	struct verdict *v;
	bool ok;

	if (!info->fabric_attr || !info->domain_attr)
		return false;
	verdict_key(info, key, sizeof(key));
	pthread_mutex_lock(&verdict_lock);
	v = verdict_find(key);
	ok = v && v->works;
	pthread_mutex_unlock(&verdict_lock);
	return ok;
}

/* ---- the rewrite ---- */

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

void hml_hmem_caps(struct fi_info *info, bool on)
{
	uint64_t *caps[] = {
		&info->caps,
		info->tx_attr ? &info->tx_attr->caps : NULL,
		info->rx_attr ? &info->rx_attr->caps : NULL,
	};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (!caps[i])
			continue;
		if (on)
			*caps[i] |= FI_HMEM;
		else
			*caps[i] &= ~(uint64_t) FI_HMEM;
	}
}

/* Put each entry of *list that has a working FI_HMEM twin in granted in
 * its place; true if any was. */
static bool merge(const struct abi *a, struct fi_info **list,
		  struct fi_info **granted)
{
	bool any = false;

	for (struct fi_info **pa = list; *pa; pa = &(*pa)->next) {
		struct fi_info **pb = granted, *old = *pa, *b;

		while (*pb && !same(old, *pb))
			pb = &(*pb)->next;
		if (!*pb || !works(*pb))
			continue;
		b = *pb;
		*pb = b->next;
		b->next = old->next;
		*pa = b;
		old->next = NULL;
		a->freeinfo(old);
		hml_hmem_caps(b, false);
		any = true;
	}
	return any;
}

static int getinfo(struct abi *a, uint32_t version, const char *node,
		   const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	static bool told;
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
	if (ret && !__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
		hml_info("FI_HMEM not asked for: no provider grants it to "
			 "the application's hints (%d)", ret);
	else if (!merge(a, info, &granted))
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
