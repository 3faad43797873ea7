/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The exported entry points. Every libfabric object descends from a fabric,
 * and fi_fabric/fi_fabric2 are the only exported calls that make one, so
 * they are the only symbols hmemloop interposes; everything below the fabric
 * is reached through op tables. Each symbol version libfabric exports gets a
 * definition of its own, so an old binary's fi_fabric@FABRIC_1.0, which
 * passes an older attribute layout, reaches libfabric's compat entry.
 */
#include <string.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_stats.h"
#include "hml_log.h"

__thread int hml_depth;

typedef int (*fabric_fn)(void *attr, struct fid_fabric **fabric,
			 void *context);
typedef int (*fabric2_fn)(struct fi_info *info, struct fid_fabric **fabric,
			  uint64_t flags, void *context);

#define REAL(var, name, version) ({					\
		if (!__atomic_load_n(&var, __ATOMIC_ACQUIRE))		\
			__atomic_store_n(&var, hml_resolve(name, version),	\
					 __ATOMIC_RELEASE);		\
		var; })

/* Wrap what the application opened; libfabric's own fabrics pass. */
static int opened(int ret, struct fid_fabric **fabric)
{
	if (!ret && hml_config.enable && !hml_depth)
		hml_fabric_wrap(*fabric);
	return ret;
}

HML_EXPORT int hml_fi_fabric_1_0(void *attr, struct fid_fabric **fabric,
				 void *context);
HML_EXPORT int hml_fi_fabric(struct fi_fabric_attr *attr,
			     struct fid_fabric **fabric, void *context);
HML_EXPORT int hml_fi_fabric2(struct fi_info *info,
			      struct fid_fabric **fabric, uint64_t flags,
			      void *context);
__asm__(".symver hml_fi_fabric_1_0, fi_fabric@FABRIC_1.0");
__asm__(".symver hml_fi_fabric, fi_fabric@@FABRIC_1.1");
__asm__(".symver hml_fi_fabric2, fi_fabric2@@FABRIC_1.8");

/* libfabric's entry points, once found. */
static fabric_fn real_fabric_1_0, real_fabric;
static fabric2_fn real_fabric2;

int hml_fi_fabric_1_0(void *attr, struct fid_fabric **fabric, void *context)
{
	if (!REAL(real_fabric_1_0, "fi_fabric", "FABRIC_1.0"))
		return -FI_ENOSYS;
	return opened(HML_FORWARD(real_fabric_1_0(attr, fabric, context)),
		      fabric);
}

int hml_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		  void *context)
{
	if (!REAL(real_fabric, "fi_fabric", "FABRIC_1.1"))
		return -FI_ENOSYS;
	return opened(HML_FORWARD(real_fabric(attr, fabric, context)), fabric);
}

/* libfabric 2.x; on 1.x nothing calls it. */
int hml_fi_fabric2(struct fi_info *info, struct fid_fabric **fabric,
		   uint64_t flags, void *context)
{
	if (!REAL(real_fabric2, "fi_fabric2", "FABRIC_1.8"))
		return -FI_ENOSYS;
	return opened(HML_FORWARD(real_fabric2(info, fabric, flags, context)),
		      fabric);
}

/* dlsym() in a handle found sym for name: the entry point above in place
 * of libfabric's own. dlsym answers with a symbol's default version. */
void *hml_entry_point(const char *name, void *sym)
{
	if (!strcmp(name, "fi_fabric") &&
	    sym == (void *) REAL(real_fabric, "fi_fabric", "FABRIC_1.1"))
		return (void *) hml_fi_fabric;
	if (!strcmp(name, "fi_fabric2") &&
	    sym == (void *) REAL(real_fabric2, "fi_fabric2", "FABRIC_1.8"))
		return (void *) hml_fi_fabric2;
	return sym;
}

/* What hmemloop --check reads to name the library's version. */
HML_EXPORT const char hmemloop_version[] = PACKAGE_VERSION;

__attribute__((constructor)) static void hml_init(void)
{
	hml_config_load();
	hml_config_log();
	hml_stats_start();
	hml_info("%s", hml_config.enable ? "enabled" : "loaded, not enabled");
}
