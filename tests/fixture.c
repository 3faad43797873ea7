/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fixture every test program opens its objects with: hints from a
 * struct t_opts, a fabric and domain, endpoints with their CQ, AV (or EQ)
 * and counters, counters and shared receive contexts of their own,
 * registrations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

static const struct t_opts no_opts;

struct fi_info *t_hints(const struct t_opts *o)
{
	struct fi_info *h = fi_allocinfo();
	uint32_t v;

	t_assert(h, "out of memory");
	if (!o)
		o = &no_opts;
	v = o->version ? o->version : FI_VERSION(1, 17);
	h->caps = o->caps ? o->caps : FI_MSG | FI_TAGGED | FI_RMA;
	h->mode = o->mode;
	h->ep_attr->type = o->type ? o->type : FI_EP_RDM;
	if (o->shared_rx)
		h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	/* Before 1.5, mr_mode is the old enum. */
	h->domain_attr->mr_mode = o->mr_mode ? o->mr_mode :
		FI_VERSION_LT(v, FI_VERSION(1, 5)) ? T_MR_BASIC :
		FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		FI_MR_PROV_KEY;
	h->domain_attr->threading = o->threading ? o->threading :
				    FI_THREAD_SAFE;
	if (o->progress)
		h->domain_attr->data_progress = o->progress;
	h->fabric_attr->prov_name = strdup(o->prov ? o->prov : t_prov);
	h->tx_attr->op_flags = o->tx_op_flags;
	h->tx_attr->msg_order = h->rx_attr->msg_order = o->msg_order;
	return h;
}

static uint32_t version_of(const struct t_opts *o)
{
	return o && o->version ? o->version : FI_VERSION(1, 17);
}

bool t_offers(const struct t_opts *o)
{
	struct fi_info *h = t_hints(o), *i = NULL;
	int ret = fi_getinfo(version_of(o), NULL, NULL, 0, h, &i);

	fi_freeinfo(h);
	fi_freeinfo(i);
	if (ret != -FI_ENODATA)
		t_fi(ret);
	return !ret;
}

int t_try_open(struct t_fabric *f, const struct t_opts *o)
{
	struct fi_info *h = t_hints(o);
	int ret;

	memset(f, 0, sizeof(*f));
	ret = fi_getinfo(version_of(o), NULL, NULL, 0, h, &f->info);
	fi_freeinfo(h);
	if (ret == -FI_ENODATA)
		return ret;
	t_fi(ret);
	t_fi(fi_fabric(f->info->fabric_attr, &f->fabric, NULL));
	t_fi(fi_domain(f->fabric, f->info, &f->domain, NULL));
	return 0;
}

void t_open(struct t_fabric *f, const struct t_opts *o)
{
	if (t_try_open(f, o) == -FI_ENODATA)
		t_skip("provider %s is not available here with what the test "
		       "needs", o && o->prov ? o->prov : t_prov);
}

void t_close(struct t_fabric *f)
{
	t_fi(fi_close(&f->domain->fid));
	t_fi(fi_close(&f->fabric->fid));
	fi_freeinfo(f->info);
}

int t_cntr_try_open(struct t_fabric *f, enum fi_wait_obj wait,
		    struct fid_wait *set, void *ctx, struct fid_cntr **c)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = wait,
		.wait_set = set,
	};

	return fi_cntr_open(f->domain, &attr, c, ctx);
}

struct fid_cntr *t_cntr_open(struct t_fabric *f, enum fi_wait_obj wait)
{
	struct fid_cntr *c;

	t_fi(t_cntr_try_open(f, wait, NULL, NULL, &c));
	return c;
}

int t_srx_try_open(struct t_fabric *f, struct fid_ep **srx)
{
	return fi_srx_context(f->domain, f->info->rx_attr, srx, NULL);
}

/* Set min_multi where the provider takes it: shm 1.17 crashes on it before
 * fi_enable; 2.x's shm and rxm take it only before, when they make their
 * receive queues (util_srx). */
static int min_multi(struct t_ep *e, const struct t_opts *o, bool enabled)
{
	size_t n = o->min_multi;

	if (!n || enabled != (FI_MAJOR(fi_version()) < 2))
		return 0;
	return fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			 &n, sizeof(n));
}

static int bind_all(struct t_ep *e, const struct t_opts *o, const char **what)
{
	int ret;

#define TRY(call) do {							\
		*what = #call;						\
		if ((ret = (call)))					\
			return ret;					\
	} while (0)
	TRY(fi_ep_bind(e->ep, &e->cq->fid, (o->cq_bind ? o->cq_bind :
				FI_TRANSMIT | FI_RECV) | o->cq_flags));
	if (e->eq)
		TRY(fi_ep_bind(e->ep, &e->eq->fid, 0));
	else
		TRY(fi_ep_bind(e->ep, &e->av->fid, 0));
	for (int i = 0; i < 2; i++) {
		if (!o->own_cntr[i])
			continue;
		e->cntr[i] = t_cntr_open(e->f, FI_WAIT_NONE);
		TRY(fi_ep_bind(e->ep, &e->cntr[i]->fid, o->own_cntr[i]));
	}
	if (o->cntr)
		TRY(fi_ep_bind(e->ep, &o->cntr->fid, o->cntr_flags));
	if (o->srx)
		TRY(fi_ep_bind(e->ep, &o->srx->fid, 0));
	TRY(min_multi(e, o, false));
	TRY(fi_enable(e->ep));
	TRY(min_multi(e, o, true));
#undef TRY
	return 0;
}

/* The CQ, endpoint and AV (an EQ for a connected endpoint), unbound. */
static int open_objects(struct t_ep *e, struct t_fabric *f,
			const struct t_opts *o)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = {
		.format = o->cq_format ? o->cq_format : FI_CQ_FORMAT_TAGGED,
		.size = o->cq_size,
		.wait_obj = o->cq_wait,
		.wait_cond = o->cq_cond,
		.wait_set = o->wait_set,
	};
	int ret;

	memset(e, 0, sizeof(*e));
	e->f = f;
	e->format = cq_attr.format;
	e->shared_cq = o->cq != NULL;
	e->shared_av = o->av != NULL;
	e->cq = o->cq;
	if (!e->cq) {
		ret = fi_cq_open(f->domain, &cq_attr, &e->cq, o->cq_context);
		if (ret)
			return ret;
	}
	t_fi(fi_endpoint(f->domain, f->info, &e->ep, NULL));
	if (f->info->ep_attr->type == FI_EP_MSG)
		t_fi(fi_eq_open(f->fabric, &eq_attr, &e->eq, NULL));
	else if (o->av)
		e->av = o->av;
	else
		t_fi(fi_av_open(f->domain, &av_attr, &e->av, NULL));
	return 0;
}

int t_ep_enable(struct t_ep *e, const struct t_opts *o, const char **what)
{
	const char *call;
	int ret;

	if (!o)
		o = &no_opts;
	if (!what)
		what = &call;
	ret = bind_all(e, o, what);
	if (ret)
		return ret;
	/* A connected endpoint has no name before it connects. */
	if (!e->eq) {
		e->namelen = sizeof(e->name);
		t_fi(fi_getname(&e->ep->fid, e->name, &e->namelen));
	}
	t_progress(e->cq);
	t_name_ep(e);
	return 0;
}

int t_ep_try_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o,
		  const char **what)
{
	int ret;

	if (!o)
		o = &no_opts;
	ret = open_objects(e, f, o);
	if (ret && what)
		*what = "fi_cq_open";
	if (ret || o->open_only)
		return ret;
	ret = t_ep_enable(e, o, what);
	if (ret) {
		t_ep_close(e);
		memset(e, 0, sizeof(*e));
	}
	return ret;
}

void t_ep_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o)
{
	const char *what;
	int ret = t_ep_try_open(e, f, o, &what);

	if (ret)
		t_fail("t_ep_open: %s: %d (%s)", what, ret, fi_strerror(-ret));
}

void t_ep_close(struct t_ep *e)
{
	if (!e->shared_cq) {
		t_unprogress(e->cq);
		t_unname(e->cq);
	}
	for (int i = 0; i < 2; i++)
		t_unname(e->cntr[i]);
	t_fi(fi_close(&e->ep->fid));
	if (e->eq)
		t_fi(fi_close(&e->eq->fid));
	else if (!e->shared_av)
		t_fi(fi_close(&e->av->fid));
	if (!e->shared_cq)
		t_fi(fi_close(&e->cq->fid));
	for (int i = 0; i < 2; i++)
		if (e->cntr[i])
			t_fi(fi_close(&e->cntr[i]->fid));
}

fi_addr_t t_insert(struct t_ep *e, const void *name)
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;

	t_assert(fi_av_insert(e->av, name, 1, &addr, 0, NULL) == 1,
		 "fi_av_insert failed");
	return addr;
}

void t_reg(struct t_fabric *f, void *buf, size_t len, uint64_t access,
	   uint64_t key, struct t_mr *m)
{
	t_fi(fi_mr_reg(f->domain, buf, len, access, 0, key, 0, &m->mr, NULL));
	m->desc = fi_mr_desc(m->mr);
	m->key = fi_mr_key(m->mr);
	m->base = buf;
}

uint64_t t_raddr(const struct t_fabric *f, const struct t_mr *m, size_t off)
{
	uint64_t mode = f->info->domain_attr->mr_mode;

	/* Before API 1.5, mr_mode is the old enum: FI_MR_BASIC is virtual
	 * addresses. */
	if (FI_VERSION_LT(f->fabric->api_version, FI_VERSION(1, 5)) ?
	    mode == T_MR_BASIC : (mode & FI_MR_VIRT_ADDR) != 0)
		return (uintptr_t) m->base + off;
	return off;
}
