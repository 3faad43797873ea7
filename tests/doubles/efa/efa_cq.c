/* SPDX-License-Identifier: BSD-2-Clause */
/* Completion queues and counters: shm's, behind a proxy. Entries come back
 * as shm wrote them: the application's contexts, and source addresses that
 * are ours too, since our fi_addr_t values are shm's. */
#include <stdlib.h>

#include "efa.h"

/* Wait sets are objects of their own that this double does not have. */
static bool wait_ok(enum fi_wait_obj w)
{
	return w != FI_WAIT_SET;
}

/* ---- completion queues ---- */

static inline struct fid_cq *shm_cq(struct fid_cq *cq)
{
	return efa_container(cq, struct efa_cq, cq)->shm;
}

static int cq_close(struct fid *fid)
{
	struct efa_cq *c = efa_container(fid, struct efa_cq, cq.fid);

	return efa_close(&c->shm->fid, &c->magic, c);
}

static int cq_control(struct fid *fid, int command, void *arg)
{
	struct efa_cq *c = efa_container(fid, struct efa_cq, cq.fid);

	return fi_control(&c->shm->fid, command, arg);	/* FI_GETWAIT, ... */
}

static ssize_t cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	return fi_cq_read(shm_cq(cq), buf, count);
}

static ssize_t cq_readfrom(struct fid_cq *cq, void *buf, size_t count,
			   fi_addr_t *src_addr)
{
	return fi_cq_readfrom(shm_cq(cq), buf, count, src_addr);
}

static ssize_t cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	return fi_cq_readerr(shm_cq(cq), buf, flags);
}

static ssize_t cq_sread(struct fid_cq *cq, void *buf, size_t count,
			const void *cond, int timeout)
{
	return fi_cq_sread(shm_cq(cq), buf, count, cond, timeout);
}

static ssize_t cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count,
			    fi_addr_t *src_addr, const void *cond, int timeout)
{
	return fi_cq_sreadfrom(shm_cq(cq), buf, count, src_addr, cond,
			       timeout);
}

static int cq_signal(struct fid_cq *cq)
{
	return fi_cq_signal(shm_cq(cq));
}

static const char *cq_strerror(struct fid_cq *cq, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	return fi_cq_strerror(shm_cq(cq), prov_errno, err_data, buf, len);
}

EFA_FI_OPS(cq_fi_ops, cq_close, efa_no_bind, cq_control);

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

int efa_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **cq, void *context)
{
	struct efa_domain *d = efa_container(domain, struct efa_domain, domain);
	struct efa_cq *c;
	int ret;

	if (d->magic != EFA_MAGIC || !attr)
		return -FI_EINVAL;
	if (!wait_ok(attr->wait_obj) || (attr->flags & FI_PEER))
		return -FI_ENOSYS;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	ret = fi_cq_open(d->shm, attr, &c->shm, &c->cq.fid);
	if (ret) {
		free(c);
		return ret;
	}
	efa_fid_init(&c->cq.fid, &c->magic, FI_CLASS_CQ, context, &cq_fi_ops);
	c->cq.ops = &cq_ops;
	*cq = &c->cq;
	return 0;
}

/* ---- counters ---- */

static inline struct fid_cntr *shm_cntr(struct fid_cntr *cntr)
{
	return efa_container(cntr, struct efa_cntr, cntr)->shm;
}

static int cntr_close(struct fid *fid)
{
	struct efa_cntr *c = efa_container(fid, struct efa_cntr, cntr.fid);

	return efa_close(&c->shm->fid, &c->magic, c);
}

static int cntr_control(struct fid *fid, int command, void *arg)
{
	struct efa_cntr *c = efa_container(fid, struct efa_cntr, cntr.fid);

	return fi_control(&c->shm->fid, command, arg);
}

static uint64_t cntr_read(struct fid_cntr *cntr)
{
	return fi_cntr_read(shm_cntr(cntr));
}

static uint64_t cntr_readerr(struct fid_cntr *cntr)
{
	return fi_cntr_readerr(shm_cntr(cntr));
}

static int cntr_add(struct fid_cntr *cntr, uint64_t value)
{
	return fi_cntr_add(shm_cntr(cntr), value);
}

static int cntr_set(struct fid_cntr *cntr, uint64_t value)
{
	return fi_cntr_set(shm_cntr(cntr), value);
}

static int cntr_wait(struct fid_cntr *cntr, uint64_t threshold, int timeout)
{
	return fi_cntr_wait(shm_cntr(cntr), threshold, timeout);
}

static int cntr_adderr(struct fid_cntr *cntr, uint64_t value)
{
	return fi_cntr_adderr(shm_cntr(cntr), value);
}

static int cntr_seterr(struct fid_cntr *cntr, uint64_t value)
{
	return fi_cntr_seterr(shm_cntr(cntr), value);
}

EFA_FI_OPS(cntr_fi_ops, cntr_close, efa_no_bind, cntr_control);

static struct fi_ops_cntr cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = cntr_read,
	.readerr = cntr_readerr,
	.add = cntr_add,
	.set = cntr_set,
	.wait = cntr_wait,
	.adderr = cntr_adderr,
	.seterr = cntr_seterr,
};

int efa_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context)
{
	struct efa_domain *d = efa_container(domain, struct efa_domain, domain);
	struct efa_cntr *c;
	int ret;

	if (d->magic != EFA_MAGIC)
		return -FI_EINVAL;
	if (attr && (!wait_ok(attr->wait_obj) || (attr->flags & FI_PEER)))
		return -FI_ENOSYS;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	ret = fi_cntr_open(d->shm, attr, &c->shm, &c->cntr.fid);
	if (ret) {
		free(c);
		return ret;
	}
	efa_fid_init(&c->cntr.fid, &c->magic, FI_CLASS_CNTR, context,
		     &cntr_fi_ops);
	c->cntr.ops = &cntr_ops;
	*cntr = &c->cntr;
	return 0;
}
