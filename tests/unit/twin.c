/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_HMEM twins (shim/obj/twin.c, hmem.c): what the provider is given at
 * fi_domain for each entry of the application's answer. shm built with
 * CUDA answers hints without FI_HMEM with two entries that share one
 * FI_HMEM twin: its own (inject_size 4096, FI_MR_VIRT_ADDR) and its
 * FI_HMEM entry without the capability (inject_size 0, FI_MR_VIRT_ADDR |
 * FI_MR_HMEM). Each must be opened with the twin's FI_MR_HMEM, whichever
 * was kept last. The provider's registration probe answers yes here: it
 * is probe.c's, replaced below.
 */
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_probe.h"
#include "unit.h"

bool hml_registers_cuda(hml_fabric_fn fabric_open, const struct fi_info *info)
{
	(void) fabric_open;
	(void) info;
	return true;
}

/* An shm entry, as 2.6 with CUDA answers: caps, mr_mode, inject_size. */
static struct fi_info *entry(const char *domain, uint64_t caps, int mr_mode,
			     size_t inject)
{
	struct fi_info *fi = fi_allocinfo();

	fi->caps = caps;
	fi->tx_attr->caps = caps;
	fi->rx_attr->caps = caps;
	fi->tx_attr->inject_size = inject;
	fi->domain_attr->mr_mode = mr_mode;
	fi->domain_attr->name = strdup(domain);
	fi->fabric_attr->name = strdup("shm");
	fi->fabric_attr->prov_name = strdup("shm");
	fi->ep_attr->type = FI_EP_RDM;
	fi->addr_format = FI_ADDR_STR;
	return fi;
}

#define CAPS (FI_MSG | FI_RMA | FI_TAGGED)

/* What the provider is given at fi_domain for e. */
static void given(const char *rule, struct fi_info *e, bool hmem)
{
	struct hml_twin t;
	struct fi_info *p = hml_hmem_domain_info(e, &t);

	if (!hmem) {
		u_check(p == e, "%s: the entry is given as it is", rule);
		return;
	}
	u_check(p != e, "%s: FI_HMEM is asked for", rule);
	if (p == e)
		return;
	u_check((p->caps & FI_HMEM) && (p->tx_attr->caps & FI_HMEM) &&
		(p->rx_attr->caps & FI_HMEM), "%s: FI_HMEM in caps", rule);
	u_check(p->domain_attr->mr_mode ==
		(e->domain_attr->mr_mode | FI_MR_HMEM),
		"%s: mr_mode %#x, not the entry's %#x with FI_MR_HMEM", rule,
		p->domain_attr->mr_mode, e->domain_attr->mr_mode);
	u_check(p->tx_attr->inject_size == 0,
		"%s: inject_size %zu, not the twin's 0", rule,
		p->tx_attr->inject_size);
	hml_info_free(p);
}

int main(void)
{
	struct fi_info *own = entry("a", CAPS, FI_MR_VIRT_ADDR, 4096);
	struct fi_info *hent = entry("a", CAPS, FI_MR_VIRT_ADDR | FI_MR_HMEM,
				     0);
	struct fi_info *twin = entry("a", CAPS | FI_HMEM,
				     FI_MR_VIRT_ADDR | FI_MR_HMEM, 0);
	struct fi_info *own2 = entry("b", CAPS, FI_MR_VIRT_ADDR, 4096);
	struct fi_info *hent2 = entry("b", CAPS, FI_MR_VIRT_ADDR | FI_MR_HMEM,
				      0);
	struct fi_info *twin2 = entry("b", CAPS | FI_HMEM,
				      FI_MR_VIRT_ADDR | FI_MR_HMEM, 0);
	struct fi_info *bare = entry("c", CAPS, 0, 4096);
	struct fi_info *twin3 = entry("c", CAPS | FI_HMEM,
				      FI_MR_PROV_KEY | FI_MR_HMEM, 0);

	hml_config.hmem = HML_HMEM_AUTO;
	u_check(hml_twin_keep(own, twin) && hml_twin_keep(hent, twin),
		"both entries keep their twin");
	given("the provider's own entry, its twin kept by a later entry too",
	      own, true);
	given("the FI_HMEM entry without the capability", hent, true);

	u_check(hml_twin_keep(hent2, twin2) && hml_twin_keep(own2, twin2),
		"both entries keep their twin, the other way round");
	given("the provider's own entry, kept last", own2, true);
	given("the FI_HMEM entry, its twin kept by a later entry too", hent2,
	      true);

	u_check(!hml_twin_keep(bare, twin3),
		"a twin that needs a registration mode the entry lacks is "
		"not kept");
	given("an entry whose twin needs FI_MR_PROV_KEY", bare, false);
	return u_done("twin");
}
