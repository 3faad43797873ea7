/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A binary built against libfabric 1.0 calls fi_fabric@FABRIC_1.0 with the
 * 1.0 attribute layout, which has no api_version. Through hmemloop the call
 * must still reach libfabric's compat entry (which records API 1.0 in the
 * fabric), and the fabric must still be wrapped when hmemloop is enabled.
 */
#include <stdio.h>

#include "hmltest.h"

struct fi_fabric_attr_1_0 {
	struct fid_fabric *fabric;
	char *name;
	char *prov_name;
	uint32_t prov_version;
};

int fi_fabric_1_0(struct fi_fabric_attr_1_0 *attr, struct fid_fabric **fabric,
		  void *context);
__asm__(".symver fi_fabric_1_0, fi_fabric@FABRIC_1.0");

/* Its fabrics opened by hand: the 1.0 entry and fi_fabric are the
 * subject. */
static void fabric_1_0(void)
{
	struct fid_fabric *old, *cur;
	struct fi_fabric_attr_1_0 attr;
	struct t_fabric f;
	bool wrapped;

	t_open(&f, NULL);
	attr = (struct fi_fabric_attr_1_0) {
		.name = f.info->fabric_attr->name,
		.prov_name = f.info->fabric_attr->prov_name,
		.prov_version = f.info->fabric_attr->prov_version,
	};
	t_fi(fi_fabric_1_0(&attr, &old, NULL));
	t_assert(old->api_version == FI_VERSION(1, 0),
		 "the 1.0 entry opened a fabric of API %u.%u",
		 FI_MAJOR(old->api_version), FI_MINOR(old->api_version));
	t_fi(fi_fabric(f.info->fabric_attr, &cur, NULL));
	t_assert(cur->api_version == f.fabric->api_version,
		 "the current entry opened a fabric of another API");

	/* Wrapped fabrics have op tables of their own. */
	wrapped = old->ops != cur->ops && cur->ops != f.fabric->ops;
	t_assert(wrapped == t_shim_enabled(),
		 "fabrics %s wrapped", wrapped ? "are" : "are not");
	t_fi(fi_close(&old->fid));
	t_fi(fi_close(&cur->fid));
	t_close(&f);
	t_ok("fi_fabric@FABRIC_1.0 opened an API 1.0 fabric, %s",
	     wrapped ? "wrapped" : "not wrapped");
}

static const struct t_case cases[] = {
	T_CASE("fabric_1_0", fabric_1_0),
};

T_MAIN(cases);
