/* SPDX-License-Identifier: BSD-2-Clause */
/* Fabric and domain: each opens its shm counterpart through the public
 * calls (fi_getinfo, fi_fabric, fi_domain), as real EFA does. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "efa.h"

/* ---- domain ---- */

static int domain_close(struct fid *fid)
{
	struct efa_domain *d = efa_container(fid, struct efa_domain, domain.fid);

	return efa_close(&d->shm->fid, &d->magic, d);
}

static int no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			  struct fid_ep **sep, void *context)
{
	(void) domain; (void) info; (void) sep; (void) context;
	return -FI_ENOSYS;
}

static int no_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			struct fid_poll **pollset)
{
	(void) domain; (void) attr; (void) pollset;
	return -FI_ENOSYS;
}

static int no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
		      struct fid_stx **stx, void *context)
{
	(void) domain; (void) attr; (void) stx; (void) context;
	return -FI_ENOSYS;
}

static int no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
		      struct fid_ep **rx_ep, void *context)
{
	(void) domain; (void) attr; (void) rx_ep; (void) context;
	return -FI_ENOSYS;
}

static int no_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
			   enum fi_op op, struct fi_atomic_attr *attr,
			   uint64_t flags)
{
	(void) domain; (void) datatype; (void) op; (void) attr; (void) flags;
	return -FI_ENOSYS;
}

static int no_query_collective(struct fid_domain *domain,
			       enum fi_collective_op coll,
			       struct fi_collective_attr *attr, uint64_t flags)
{
	(void) domain; (void) coll; (void) attr; (void) flags;
	return -FI_ENOSYS;
}

/* Nothing binds to it: no EQs in this double. */
EFA_FI_OPS(domain_fi_ops, domain_close, efa_no_bind, efa_no_control);

static struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = efa_av_open,
	.cq_open = efa_cq_open,
	.endpoint = efa_ep_open,
	.scalable_ep = no_scalable_ep,
	.cntr_open = efa_cntr_open,
	.poll_open = no_poll_open,
	.stx_ctx = no_stx_ctx,
	.srx_ctx = no_srx_ctx,
	.query_atomic = no_query_atomic,
	.query_collective = no_query_collective,
};

static int domain_open(struct fid_fabric *fabric, struct fi_info *info,
		       struct fid_domain **domain, void *context)
{
	struct efa_fabric *f = efa_container(fabric, struct efa_fabric, fabric);
	struct fi_info *shm_info;
	struct efa_domain *d;
	uint32_t key = 0;
	int ret;

	if (f->magic != EFA_MAGIC || !info || !info->domain_attr)
		return -FI_EINVAL;
	if (info->domain_attr->name &&
	    strcmp(info->domain_attr->name, EFA_DOMAIN_NAME))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	ret = efa_shm_info(fabric->api_version, info, &shm_info);
	if (ret) {
		FI_WARN(&efa_prov, FI_LOG_DOMAIN, "no shm info for this "
			"domain: %s\n", fi_strerror(-ret));
		free(d);
		return ret;
	}
	ret = fi_domain(f->shm, shm_info, &d->shm, &d->domain.fid);
	fi_freeinfo(shm_info);
	if (ret) {
		free(d);
		return ret;
	}
	d->fabric = f;
	d->caps = info->caps | info->domain_attr->caps;
	if (d->caps & FI_HMEM)
		FI_INFO(&efa_prov, FI_LOG_DOMAIN, "efa double: domain with "
			"FI_HMEM\n");
	d->mr_mode = (uint64_t) info->domain_attr->mr_mode;
	d->av_type = info->domain_attr->av_type;
	d->api_version = fabric->api_version;
	/* Keys as a device hands them out: 32 bits, nothing to do with the
	 * key the application asked for. */
	if (getrandom(&key, sizeof(key), 0) != sizeof(key))
		key = 0x5a5a;
	d->next_key = (key & 0x00ffff00u) | 0x01000000u;
	efa_fid_init(&d->domain.fid, &d->magic, FI_CLASS_DOMAIN, context,
		     &domain_fi_ops);
	d->domain.ops = &domain_ops;
	d->domain.mr = &efa_mr_ops;
	*domain = &d->domain;
	return 0;
}

/* ---- fabric ---- */

static int fabric_close(struct fid *fid)
{
	struct efa_fabric *f = efa_container(fid, struct efa_fabric, fabric.fid);

	return efa_close(&f->shm->fid, &f->magic, f);
}

static int no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			 struct fid_pep **pep, void *context)
{
	(void) fabric; (void) info; (void) pep; (void) context;
	return -FI_ENOSYS;
}

static int no_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		      struct fid_eq **eq, void *context)
{
	(void) fabric; (void) attr; (void) eq; (void) context;
	return -FI_ENOSYS;
}

static int no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
			struct fid_wait **waitset)
{
	(void) fabric; (void) attr; (void) waitset;
	return -FI_ENOSYS;
}

/* fi_trywait on our CQs and counters is fi_trywait on shm's. */
static int fabric_trywait(struct fid_fabric *fabric, struct fid **fids,
			  int count)
{
	struct efa_fabric *f = efa_container(fabric, struct efa_fabric, fabric);
	struct fid *inner[64];

	if (count < 0 || count > 64)
		return -FI_EINVAL;
	for (int i = 0; i < count; i++) {
		inner[i] = efa_inner(fids[i]);
		if (!inner[i])
			return -FI_EINVAL;
	}
	return fi_trywait(f->shm, inner, count);
}

EFA_FI_OPS(fabric_fi_ops, fabric_close, efa_no_bind, efa_no_control);

static struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = domain_open,
	.passive_ep = no_passive_ep,
	.eq_open = no_eq_open,
	.wait_open = no_wait_open,
	.trywait = fabric_trywait,
};

int efa_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context)
{
	struct fi_info *hints, *shm_info;
	uint32_t version = attr->api_version ? attr->api_version :
			   FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	struct efa_fabric *f;
	int ret;

	if (attr->name && strcmp(attr->name, EFA_FABRIC_NAME))
		return -FI_ENODATA;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -FI_ENOMEM;
	hints = efa_shm_hints(version, NULL);
	if (!hints) {
		free(f);
		return -FI_ENOMEM;
	}
	ret = fi_getinfo(version, NULL, NULL, 0, hints, &shm_info);
	fi_freeinfo(hints);
	if (ret) {
		FI_WARN(&efa_prov, FI_LOG_FABRIC, "shm is not available: %s\n",
			fi_strerror(-ret));
		free(f);
		return ret;
	}
	/* A public fi_fabric: the call an interposer of fi_fabric must tell
	 * from the application's. */
	ret = fi_fabric(shm_info->fabric_attr, &f->shm, &f->fabric.fid);
	fi_freeinfo(shm_info);
	if (ret) {
		free(f);
		return ret;
	}
	efa_fid_init(&f->fabric.fid, &f->magic, FI_CLASS_FABRIC, context,
		     &fabric_fi_ops);
	f->fabric.ops = &fabric_ops;
	f->fabric.api_version = version;
	*fabric = &f->fabric;
	return 0;
}
