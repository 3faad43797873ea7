/* SPDX-License-Identifier: BSD-2-Clause */
/* Fabrics: the root of every object the application opens. */
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"

static struct hml_fabric *fabric_of(struct fid_fabric *fabric)
{
	return hml_container_of(fabric->ops, struct hml_fabric, ops.ops);
}

/* Where the provider refuses the domain with FI_HMEM (hmem.c), the
 * application's own info is opened. */
static int hml_domain_open(struct fid_fabric *fabric, struct fi_info *info,
			   struct fid_domain **domain, void *context)
{
	struct hml_fabric *f = fabric_of(fabric);
	struct hml_twin t;
	struct fi_info *pi = hml_hmem_domain_info(info, &t);
	int ret;

	do
		ret = HML_FORWARD(f->prov->domain(fabric, pi, domain,
						  context));
	while (hml_hmem_refused(&pi, info, ret, "fi_domain"));
	if (!ret)
		hml_domain_wrap(f, *domain, info, pi != info ? &t : NULL);
	hml_hmem_put(pi, info);
	return ret;
}

static int hml_domain_open2(struct fid_fabric *fabric, struct fi_info *info,
			    struct fid_domain **domain, uint64_t flags,
			    void *context)
{
	struct hml_fabric *f = fabric_of(fabric);
	struct hml_twin t;
	struct fi_info *pi = flags & FI_PEER ? info :
			     hml_hmem_domain_info(info, &t);
	int ret;

	do
		ret = HML_FORWARD(f->prov->domain2(fabric, pi, domain, flags,
						   context));
	while (hml_hmem_refused(&pi, info, ret, "fi_domain2"));
	/* A peer domain belongs to the provider that imports it. */
	if (!ret && !(flags & FI_PEER))
		hml_domain_wrap(f, *domain, info, pi != info ? &t : NULL);
	hml_hmem_put(pi, info);
	return ret;
}

/* The copies in flight are waited for, so that their entries and counts
 * are made (a count signals the counter's wait object itself). Not safe
 * to block on a CQ whose shim entries the application has not read: they
 * do not show in the provider's wait object. */
static int hml_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	hml_hold_flush_every();
	hml_inflight_drain();
	for (int i = 0; i < count; i++)
		if (hml_cq_busy(fids[i]))
			return -FI_EAGAIN;
	return fabric_of(fabric)->prov->trywait(fabric, fids, count);
}

/* EQ reads are not wrapped, and may drive a provider: the domains of a
 * fabric that opened one hold no receive from then on (hold.c). */
static int hml_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		       struct fid_eq **eq, void *context)
{
	struct hml_fabric *f = fabric_of(fabric);

	hml_hold_flush_every();
	__atomic_add_fetch(&f->neqs, 1, __ATOMIC_SEQ_CST);
	return HML_FORWARD(f->prov->eq_open(fabric, attr, eq, context));
}

static void release(struct hml_fid *h)
{
	free(hml_container_of(h, struct hml_fabric, h));
}

void hml_fabric_wrap(struct fid_fabric *fabric)
{
	struct hml_fabric *f = calloc(1, sizeof(*f));

	if (!f) {
		hml_warn("out of memory: fabric %p passes through", fabric);
		return;
	}
	f->api_version = fabric->api_version;
	if (hml_table_take(&fabric->ops, &f->ops, f->prov)) {
		hml_table_set(&f->ops.ops, domain, hml_domain_open);
		hml_table_set(&f->ops.ops, domain2, hml_domain_open2);
		hml_table_set(&f->ops.ops, trywait, hml_trywait);
		hml_table_set(&f->ops.ops, eq_open, hml_eq_open);
		fabric->ops = &f->ops.ops;
	}
	hml_fid_wrap(&f->h, &fabric->fid, release);
	hml_debug("fabric %p wrapped, api %u.%u", fabric,
		  FI_MAJOR(f->api_version), FI_MINOR(f->api_version));
}
