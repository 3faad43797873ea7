/* SPDX-License-Identifier: BSD-2-Clause */
/* Endpoints, scalable endpoints and their contexts, shared receive
 * contexts, and aliases: what they are bound to, and their tables. */
#include <stdlib.h>
#include <string.h>

#include "hml_av.h"
#include "hml_log.h"
#include "hml_msg.h"
#include "hml_route.h"

/* libfabric 1.18 added this option; its value is part of the ABI. */
#define HML_OPT_CUDA_API_PERMITTED 10

/* The endpoint, before its provider is called: the receives its domain
 * holds go to the provider first (hold.c). */
static struct hml_ep *flushed(struct hml_ep *e)
{
	hml_hold_flush(e->domain);
	return e;
}

static struct hml_ep *ep_of_fid(struct fid *fid)
{
	return flushed(hml_container_of(fid->ops, struct hml_ep, h.fi.ops));
}

static struct hml_ep *ep_of_ops(struct fid *fid)
{
	struct fid_ep *ep = hml_container_of(fid, struct fid_ep, fid);

	return flushed(hml_container_of(ep->ops, struct hml_ep, ops.ops));
}

static struct hml_ep *wrap(struct hml_domain *d, struct fid_ep *ep,
			   struct hml_ep *base, struct hml_ep *sep,
			   const struct fi_info *info);

static void bind_cntr(struct hml_ep *e, struct hml_cntr *c, uint64_t flags)
{
	static const uint64_t bits[HML_CNTR_MAX] = {
		[HML_CNTR_SEND] = FI_SEND,
		[HML_CNTR_RECV] = FI_RECV,
		[HML_CNTR_READ] = FI_READ,
		[HML_CNTR_WRITE] = FI_WRITE,
		[HML_CNTR_REMOTE_READ] = FI_REMOTE_READ,
		[HML_CNTR_REMOTE_WRITE] = FI_REMOTE_WRITE,
	};

	for (int i = 0; i < HML_CNTR_MAX; i++)
		if (flags & bits[i])
			e->cntr[i] = c;
}

static void bind_cq(struct hml_ep *e, struct hml_cq *cq, uint64_t flags)
{
	if (flags & FI_TRANSMIT) {
		e->tx_cq = cq;
		e->tx_cq_flags = flags;
	}
	if (flags & FI_RECV) {
		e->rx_cq = cq;
		e->rx_cq_flags = flags;
	}
}

static int hml_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct hml_ep *e = ep_of_fid(fid);
	struct hml_fid *b = hml_fid_of(bfid);
	int ret;

	ret = e->h.prov->bind(fid, bfid, flags);
	if (ret)
		return ret;
	/* What the shim did not wrap it cannot complete into: all of this
	 * endpoint's operations pass through. */
	if (!b) {
		e->opaque |= bfid->fclass == FI_CLASS_AV ||
			     bfid->fclass == FI_CLASS_CQ ||
			     bfid->fclass == FI_CLASS_CNTR;
		return 0;
	}
	switch (bfid->fclass) {
	case FI_CLASS_AV:
		e->av = hml_container_of(b, struct hml_av, h);
		break;
	case FI_CLASS_CQ:
		bind_cq(e, hml_container_of(b, struct hml_cq, h), flags);
		break;
	case FI_CLASS_CNTR:
		bind_cntr(e, hml_container_of(b, struct hml_cntr, h), flags);
		break;
	case FI_CLASS_SRX_CTX:
		e->srx = hml_container_of(b, struct hml_ep, h);
		break;
	}
	return 0;
}

static int hml_ep_setopt(fid_t fid, int level, int name, const void *val,
			 size_t len)
{
	struct hml_ep *e = ep_of_ops(fid);

	/* Honour the application's wish even where this libfabric predates
	 * the option: a CUDA call it forbade could deadlock it. */
	struct hml_rxq *q;
	int ret;

	if (level == FI_OPT_ENDPOINT && name == HML_OPT_CUDA_API_PERMITTED &&
	    len == sizeof(bool))
		e->cuda_forbidden = !*(const bool *) val;
	ret = e->prov_ops->setopt(fid, level, name, val, len);
	if (!ret && level == FI_OPT_ENDPOINT && name == FI_OPT_MIN_MULTI_RECV &&
	    (q = __atomic_load_n(&e->rxq, __ATOMIC_ACQUIRE)))
		q->min_multi_recv = *(const size_t *) val;
	return ret;
}

static int hml_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		      struct fid_ep **tx, void *context)
{
	struct hml_ep *s = ep_of_ops(&sep->fid);
	int ret;

	ret = HML_FORWARD(s->prov_ops->tx_ctx(sep, index, attr, tx, context));
	if (!ret) {
		struct hml_ep *t = wrap(s->domain, *tx, NULL, s, NULL);

		if (t && attr) {
			t->tx_op_flags = attr->op_flags;
			t->inject_size = attr->inject_size;
		}
	}
	return ret;
}

static int hml_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		      struct fid_ep **rx, void *context)
{
	struct hml_ep *s = ep_of_ops(&sep->fid);
	struct hml_ep *r;
	int ret;

	ret = HML_FORWARD(s->prov_ops->rx_ctx(sep, index, attr, rx, context));
	if (ret)
		return ret;
	r = wrap(s->domain, *rx, NULL, s, NULL);
	if (!r)
		return 0;
	if (attr) {
		r->rx_op_flags = attr->op_flags;
		r->rx_size = attr->size;
	}
	if (index >= 0 && index < s->rx_ctx_cnt) {
		r->index = index;
		s->rx_ctx[index] = r;
	}
	return 0;
}

/* The endpoint's name, in the registry, and in every address vector
 * that holds it already. */
static void refresh_name(struct hml_ep *e)
{
	hml_self_remove(e);
	e->namelen = sizeof(e->name);
	if (e->prov_cm && e->prov_cm->getname(&e->ep->fid, e->name,
					      &e->namelen) == 0) {
		hml_self_add(e);
		hml_avs_named(e);
	}
}

static int hml_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct fid_ep *ep = hml_container_of(fid, struct fid_ep, fid);
	struct hml_ep *e = flushed(hml_container_of(ep->cm, struct hml_ep,
						    cm.ops));
	int ret;

	ret = e->prov_cm->setname(fid, addr, addrlen);
	if (!ret && e->addressable)
		refresh_name(e);
	return ret;
}

/* Point the endpoint at copies of its tables. Providers may point it at
 * other tables when it is enabled (shm and rxm do, when a shared receive
 * context is bound), so this runs again then. */
static void install(struct hml_ep *e)
{
	struct fid_ep *ep = e->ep;

	if (hml_table_take(&ep->ops, &e->ops, e->prov_ops)) {
		hml_table_set(&e->ops.ops, setopt, hml_ep_setopt);
		hml_table_set(&e->ops.ops, tx_ctx, hml_tx_ctx);
		hml_table_set(&e->ops.ops, rx_ctx, hml_rx_ctx);
		hml_table_set(&e->ops.ops, cancel, hml_rx_cancel);
		ep->ops = &e->ops.ops;
	}
	if (hml_table_take(&ep->cm, &e->cm, e->prov_cm)) {
		hml_table_set(&e->cm.ops, setname, hml_setname);
		ep->cm = &e->cm.ops;
	}
	if (hml_table_take(&ep->rma, &e->rma, e->prov_rma)) {
		hml_rma_ops(&e->rma.ops);
		ep->rma = &e->rma.ops;
	}
	if (hml_table_take(&ep->msg, &e->msg, e->prov_msg)) {
		hml_send_ops(&e->msg.ops, NULL);
		hml_recv_ops(&e->msg.ops, NULL);
		ep->msg = &e->msg.ops;
	}
	if (hml_table_take(&ep->tagged, &e->tagged, e->prov_tagged)) {
		hml_send_ops(NULL, &e->tagged.ops);
		hml_recv_ops(NULL, &e->tagged.ops);
		ep->tagged = &e->tagged.ops;
	}
}

/* Some providers (sockets) make an alias by copying the endpoint's fid,
 * table pointers included: point it back at the provider's tables before
 * giving it copies of its own. */
static void wrap_alias(struct hml_ep *e, struct fid_ep *alias, uint64_t flags)
{
	struct hml_ep *a;

#define UNSHARE(field, copy, prov) do {				\
		if (alias->field == &e->copy.ops)			\
			alias->field = (__typeof__(alias->field)) e->prov; \
	} while (0)
	UNSHARE(fid.ops, h.fi, h.prov);
	UNSHARE(ops, ops, prov_ops);
	UNSHARE(cm, cm, prov_cm);
	UNSHARE(rma, rma, prov_rma);
	UNSHARE(msg, msg, prov_msg);
	UNSHARE(tagged, tagged, prov_tagged);
#undef UNSHARE
	a = wrap(e->domain, alias, e->base, e->sep, NULL);
	if (a && (flags & FI_TRANSMIT))
		a->tx_op_flags = flags & ~FI_TRANSMIT;
	if (a && (flags & FI_RECV))
		a->rx_op_flags = flags & ~FI_RECV;
}

static void control_done(struct hml_ep *e, int command, void *arg)
{
	struct fi_alias *alias = arg;
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		install(e);
		if (e->srx)
			hml_rx_share(e);
		if (e->addressable)
			refresh_name(e);
		break;
	case FI_ALIAS:
		wrap_alias(e, hml_container_of(*alias->fid, struct fid_ep, fid),
			   alias->flags);
		break;
	case FI_SETOPSFLAG:
		if (*flags & FI_TRANSMIT)
			e->tx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		else
			e->rx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		break;
	}
}

static int hml_ep_control(struct fid *fid, int command, void *arg)
{
	struct hml_ep *e = ep_of_fid(fid);
	int ret;

	ret = HML_FORWARD(e->h.prov->control(fid, command, arg));
	if (!ret)
		control_done(e, command, arg);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_ep *e = hml_container_of(h, struct hml_ep, h);

	/* It leaves the registry and every address vector (its memory may
	 * be the next endpoint's). */
	hml_self_remove(e);
	hml_avs_forget(e);
	hml_rx_drop_target(e);
	if (e->sep && e->sep->rx_ctx && e->index >= 0 &&
	    e->sep->rx_ctx[e->index] == e)
		e->sep->rx_ctx[e->index] = NULL;
	for (int i = 0; i < e->rx_ctx_cnt; i++)
		if (e->rx_ctx[i])
			e->rx_ctx[i]->sep = NULL;
	free(e->rx_ctx);
	hml_rxq_free(e->rxq);
	hml_inflight_fini(e);
	free(e);
}

static void set_info(struct hml_ep *e, const struct fi_info *info)
{
	e->caps = info->caps;
	hml_hold_caps(e->domain, info->caps);
	e->addr_format = info->addr_format;
	if (info->tx_attr) {
		e->tx_op_flags = info->tx_attr->op_flags;
		e->inject_size = info->tx_attr->inject_size;
	}
	if (info->rx_attr) {
		e->rx_op_flags = info->rx_attr->op_flags;
		e->rx_size = info->rx_attr->size;
	}
	/* Only connectionless endpoints are reached through an address
	 * vector; a connected endpoint's name is not unique to it. */
	e->addressable = info->ep_attr &&
			 (info->ep_attr->type == FI_EP_RDM ||
			  info->ep_attr->type == FI_EP_DGRAM);
	if (e->h.fid->fclass == FI_CLASS_SEP && info->ep_attr &&
	    info->ep_attr->rx_ctx_cnt) {
		e->rx_ctx = calloc(info->ep_attr->rx_ctx_cnt, sizeof(*e->rx_ctx));
		if (e->rx_ctx)
			e->rx_ctx_cnt = info->ep_attr->rx_ctx_cnt;
	}
}

/* base: the endpoint an alias stands for; sep: the scalable endpoint of a
 * tx/rx context; info: what the endpoint was opened with. */
static struct hml_ep *wrap(struct hml_domain *d, struct fid_ep *ep,
			   struct hml_ep *base, struct hml_ep *sep,
			   const struct fi_info *info)
{
	struct hml_ep *e = calloc(1, sizeof(*e));

	if (!e) {
		hml_warn("out of memory: endpoint %p passes through", ep);
		return NULL;
	}
	e->ep = ep;
	e->domain = d;
	e->base = base ? base : e;
	e->sep = sep;
	e->index = -1;
	hml_inflight_init(e);
	hml_fid_wrap(&e->h, &ep->fid, release);
	e->h.quiesce = hml_inflight_drain;
	if (base) {
		e->caps = base->caps;
		e->tx_op_flags = base->tx_op_flags;
		e->rx_op_flags = base->rx_op_flags;
		e->inject_size = base->inject_size;
		e->rx_size = base->rx_size;
	} else if (sep) {
		e->caps = sep->caps;
		e->tx_op_flags = sep->tx_op_flags;
		e->rx_op_flags = sep->rx_op_flags;
		e->inject_size = sep->inject_size;
	} else if (info) {
		set_info(e, info);
	}
	hml_table_set(&e->h.fi.ops, bind, hml_ep_bind);
	hml_table_set(&e->h.fi.ops, control, hml_ep_control);

	install(e);
	return e;
}

struct hml_ep *hml_ep_wrap(struct hml_domain *d, struct fid_ep *ep,
			   const struct fi_info *info)
{
	return wrap(d, ep, NULL, NULL, info);
}
