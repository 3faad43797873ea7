/* SPDX-License-Identifier: BSD-2-Clause */
/* Domains: where endpoints, completion queues, counters, poll sets,
 * address vectors and memory regions are made. */
#include <stdlib.h>
#include <string.h>

#include "hml_log.h"
#include "hml_msg.h"

/* The domain, before its provider is called: the receives it holds go
 * to the provider first (hold.c). */
static struct hml_domain *domain_of(struct fid_domain *domain)
{
	struct hml_domain *d = hml_container_of(domain->ops,
						struct hml_domain, ops.ops);

	hml_hold_flush(d);
	return d;
}

static int hml_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		       struct fid_av **av, void *context)
{
	struct hml_domain *d = domain_of(domain);
	int ret;

	ret = HML_FORWARD(d->prov->av_open(domain, attr, av, context));
	if (!ret)
		hml_av_wrap(d, *av, attr);
	return ret;
}

static int hml_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		       struct fid_cq **cq, void *context)
{
	struct hml_domain *d = domain_of(domain);
	int ret;

	ret = HML_FORWARD(d->prov->cq_open(domain, attr, cq, context));
	/* A peer CQ's context is the owner's, not the application's. */
	if (!ret && !(attr->flags & FI_PEER))
		hml_cq_wrap(d, *cq, attr);
	return ret;
}

static int hml_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
			 struct fid_cntr **cntr, void *context)
{
	struct hml_domain *d = domain_of(domain);
	int ret;

	ret = HML_FORWARD(d->prov->cntr_open(domain, attr, cntr, context));
	if (!ret && !(attr && (attr->flags & FI_PEER)))
		hml_cntr_wrap(d, *cntr, attr);
	return ret;
}

static int hml_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			 struct fid_poll **pollset)
{
	struct hml_domain *d = domain_of(domain);
	int ret;

	ret = HML_FORWARD(d->prov->poll_open(domain, attr, pollset));
	if (!ret)
		hml_poll_wrap(*pollset);
	return ret;
}

static int hml_endpoint(struct fid_domain *domain, struct fi_info *info,
			struct fid_ep **ep, void *context)
{
	struct hml_domain *d = domain_of(domain);
	struct fi_info *pi = hml_hmem_ep_info(d, info);
	int ret;

	do
		ret = HML_FORWARD(d->prov->endpoint(domain, pi, ep, context));
	while (hml_hmem_refused(&pi, info, ret, "fi_endpoint"));
	hml_hmem_put(pi, info);
	if (!ret)
		hml_ep_wrap(d, *ep, info);
	return ret;
}

static int hml_endpoint2(struct fid_domain *domain, struct fi_info *info,
			 struct fid_ep **ep, uint64_t flags, void *context)
{
	struct hml_domain *d = domain_of(domain);
	struct fi_info *pi = flags & FI_PEER ? info : hml_hmem_ep_info(d, info);
	int ret;

	do
		ret = HML_FORWARD(d->prov->endpoint2(domain, pi, ep, flags,
						     context));
	while (hml_hmem_refused(&pi, info, ret, "fi_endpoint2"));
	hml_hmem_put(pi, info);
	if (!ret && !(flags & FI_PEER))
		hml_ep_wrap(d, *ep, info);
	return ret;
}

static int hml_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			   struct fid_ep **sep, void *context)
{
	struct hml_domain *d = domain_of(domain);
	struct fi_info *pi = hml_hmem_ep_info(d, info);
	int ret;

	do
		ret = HML_FORWARD(d->prov->scalable_ep(domain, pi, sep,
						       context));
	while (hml_hmem_refused(&pi, info, ret, "fi_scalable_ep"));
	hml_hmem_put(pi, info);
	if (!ret)
		hml_ep_wrap(d, *sep, info);
	return ret;
}

static int hml_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
		       struct fid_ep **srx, void *context)
{
	struct hml_domain *d = domain_of(domain);
	struct hml_ep *e;
	int ret;

	ret = HML_FORWARD(d->prov->srx_ctx(domain, attr, srx, context));
	if (!ret && !(attr && (attr->op_flags & FI_PEER)) &&
	    (e = hml_ep_wrap(d, *srx, NULL)) && attr)
		e->rx_size = attr->size;
	return ret;
}

static struct hml_domain *mr_domain_of(struct fid *fid)
{
	struct fid_domain *domain = hml_container_of(fid, struct fid_domain,
						     fid);

	struct hml_domain *d = hml_container_of(domain->mr, struct hml_domain,
						mr.ops);

	hml_hold_flush(d);
	return d;
}

static int hml_mr_reg(struct fid *fid, const void *buf, size_t len,
		      uint64_t access, uint64_t offset, uint64_t requested_key,
		      uint64_t flags, struct fid_mr **mr, void *context)
{
	struct hml_domain *d = mr_domain_of(fid);
	struct iovec iov = { (void *) buf, len };
	struct fi_mr_attr attr = {
		.mr_iov = &iov, .iov_count = 1, .access = access,
		.offset = offset, .requested_key = requested_key,
		.context = context,
	};
	int ret;

	if (hml_hmem_reg(d, &attr, false, flags, mr))
		return 0;
	ret = HML_FORWARD(d->prov_mr->reg(fid, buf, len, access, offset,
					  requested_key, flags, mr, context));
	if (!ret)
		hml_mr_wrap(d, *mr, &attr, flags);
	return ret;
}

static int hml_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		       uint64_t access, uint64_t offset, uint64_t requested_key,
		       uint64_t flags, struct fid_mr **mr, void *context)
{
	struct hml_domain *d = mr_domain_of(fid);
	struct fi_mr_attr attr = {
		.mr_iov = iov, .iov_count = count, .access = access,
		.offset = offset, .requested_key = requested_key,
		.context = context,
	};
	int ret;

	if (hml_hmem_reg(d, &attr, false, flags, mr))
		return 0;
	ret = HML_FORWARD(d->prov_mr->regv(fid, iov, count, access, offset,
					   requested_key, flags, mr, context));
	if (!ret)
		hml_mr_wrap(d, *mr, &attr, flags);
	return ret;
}

static int hml_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
			  uint64_t flags, struct fid_mr **mr)
{
	struct hml_domain *d = mr_domain_of(fid);
	int ret;

	if (hml_hmem_reg(d, attr, true, flags, mr))
		return 0;
	ret = HML_FORWARD(d->prov_mr->regattr(fid, attr, flags, mr));
	if (!ret)
		hml_mr_wrap(d, *mr, attr, flags);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_domain *d = hml_container_of(h, struct hml_domain, h);

	hml_hold_domain_fini(d);
	hml_mrmap_fini(&d->mrs);
	free(d);
}

/* The mr_mode of API 1.0 names a whole set of bits: FI_MR_BASIC and
 * FI_MR_SCALABLE, which libfabric 2.x headers deprecate. */
#define MR_BASIC	(1 << 0)
#define MR_SCALABLE	(1 << 1)

static uint64_t mr_mode_bits(uint64_t mode)
{
	if (mode == MR_BASIC)
		return FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	if (mode == MR_SCALABLE)
		return 0;
	return mode;
}

/*
 * tcp 2.x serves FI_THREAD_COMPLETION RDM endpoints from a multiplexed
 * domain, which it knows later by the address of its op table
 * (xnet_domain_multiplexed): with the shim's copy installed it takes the
 * domain for a plain one and crashes in fi_enable. Such a domain cannot
 * be wrapped in place, so it passes through.
 */
static bool known_by_its_ops(const struct fi_info *info)
{
	return info->ep_attr && info->ep_attr->type == FI_EP_RDM &&
	       info->domain_attr->threading == FI_THREAD_COMPLETION &&
	       info->fabric_attr->prov_name &&
	       !strcmp(info->fabric_attr->prov_name, "tcp");
}

void hml_domain_wrap(struct hml_fabric *f, struct fid_domain *domain,
		     const struct fi_info *info, const struct hml_twin *twin)
{
	struct hml_domain *d;

	if (known_by_its_ops(info)) {
		hml_info("domain %p passes through: tcp's multiplexed domain "
			 "(FI_THREAD_COMPLETION) is known by its op table",
			 domain);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d || hml_mrmap_init(&d->mrs)) {
		free(d);
		hml_warn("out of memory: domain %p passes through", domain);
		return;
	}
	d->domain = domain;
	d->fabric = f;
	d->caps = info->caps | info->domain_attr->caps;
	d->mr_mode = mr_mode_bits(info->domain_attr->mr_mode);
	d->addr_format = info->addr_format;
	d->threading = info->domain_attr->threading;
	hml_hold_domain(d, info);
	if (twin) {
		d->hmem = true;
		d->twin = *twin;
	}

	if (hml_table_take(&domain->ops, &d->ops, d->prov)) {
		hml_table_set(&d->ops.ops, av_open, hml_av_open);
		hml_table_set(&d->ops.ops, cq_open, hml_cq_open);
		hml_table_set(&d->ops.ops, endpoint, hml_endpoint);
		hml_table_set(&d->ops.ops, scalable_ep, hml_scalable_ep);
		hml_table_set(&d->ops.ops, cntr_open, hml_cntr_open);
		hml_table_set(&d->ops.ops, poll_open, hml_poll_open);
		hml_table_set(&d->ops.ops, srx_ctx, hml_srx_ctx);
		hml_table_set(&d->ops.ops, endpoint2, hml_endpoint2);
		domain->ops = &d->ops.ops;
	}
	if (hml_table_take(&domain->mr, &d->mr, d->prov_mr)) {
		hml_table_set(&d->mr.ops, reg, hml_mr_reg);
		hml_table_set(&d->mr.ops, regv, hml_mr_regv);
		hml_table_set(&d->mr.ops, regattr, hml_mr_regattr);
		domain->mr = &d->mr.ops;
	}

	hml_fid_wrap(&d->h, &domain->fid, release);
	hml_debug("domain %p wrapped: %s, mr_mode %#lx", domain,
		  info->fabric_attr->prov_name, (unsigned long) d->mr_mode);
}
