/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The router (hml_route.h). The decision: whose an operation is, and why,
 * from what is known of it; nothing else decides, tests/unit/route.c holds
 * a row for each reason and report/stats.c names them. And the pipeline
 * every operation to an endpoint of this process runs through: judge its
 * buffers, decide, take the places its entries need, move its bytes,
 * complete it (data/). A message's bytes go to the receive the message
 * layer finds for it.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_route.h"
#include "hml_stats.h"

#define WAY(r, why) ((struct hml_way) { (r), (why) })

struct hml_way hml_route(const struct hml_facts *f)
{
	if (!f->local)
		return WAY(HML_PROVIDER, HML_WHY_REMOTE);
	/* No CUDA call may be made for it, not even to classify. */
	if (f->forbidden)
		return WAY(HML_PROVIDER, HML_WHY_FORBIDDEN);
	/* hmemloop cannot see the receives it would match. */
	if (f->msg && f->untracked)
		return WAY(HML_PROVIDER, HML_WHY_UNTRACKED);
	/* No provider takes as many (iov_limit): it answers. */
	if (f->many)
		return WAY(HML_PROVIDER, HML_WHY_MANY);
	if (!f->judged)
		return WAY(HML_JUDGE, HML_WHY_PAIR);
	/* Lengths that add up past 2^64. */
	if (f->err == -FI_EINVAL)
		return WAY(HML_REFUSE, HML_WHY_INVALID);
	/* The provider refuses a host one by its size; a device one it must
	 * not see. */
	if (f->inject && f->len > f->inject_size)
		return f->device ? WAY(HML_REFUSE, HML_WHY_DEVICE_INJECT) :
				   WAY(HML_PROVIDER, HML_WHY_OVERSIZE);
	/* The provider is the receive queue's matcher: a device payload
	 * goes to it as a host copy where that fits an inject; a larger one
	 * waits here for a receive posted later (README, Limits). */
	if (f->msg && f->early) {
		if (!f->device)
			return WAY(HML_PROVIDER, HML_WHY_EARLY);
		if (f->len <= f->inject_size)
			return WAY(HML_BOUNCE, HML_WHY_EARLY);
		return WAY(HML_HERE, HML_WHY_EARLY);
	}
	return WAY(HML_HERE, f->device ? HML_WHY_DEVICE : HML_WHY_PAIR);
}

static void told(const struct hml_op *op, struct hml_way w)
{
	static const char *const routes[] = {
		[HML_PROVIDER] = "provider", [HML_BOUNCE] = "provider, a host "
		"copy", [HML_HERE] = "here", [HML_REFUSE] = "refused",
	};

	hml_debug("endpoint %p: %s to %p: %s (%s)", op->e->ep,
		  op->kind == HML_WRITE ? "write" : op->kind == HML_READ ?
		  "read" : "send", op->t ? op->t->ep : NULL, routes[w.route],
		  hml_reason_name(w.reason));
}

/* The provider's, after hmemloop's operations in flight from the same
 * initiator: what the application posted first lands first. */
static bool pass(const struct hml_op *op, struct hml_way w)
{
	hml_stat_pass(w.reason);
	hml_inflight_wait(op->e);
	hml_hold_flush(op->e->domain);
	return true;
}

static void start(struct hml_op *op, struct hml_ep *e, struct hml_ep *t,
		  int kind, uint64_t flags, bool inject, void *context)
{
	memset(op, 0, offsetof(struct hml_op, mrs));
	op->e = e;
	op->t = t;
	op->kind = kind;
	op->flags = flags;
	op->inject = inject;
	/* A fenced operation starts after its initiator's earlier ones are
	 * over: its copy never shares a batch with theirs (side.c). The
	 * orders msg_order grants hold without: copies land in the order
	 * they were posted wherever their bytes meet, and complete in it. */
	op->ordered = flags & FI_FENCE;
	op->tx.op_context = context;
	op->tx.src_addr = FI_ADDR_NOTAVAIL;
}

static void facts_of(struct hml_facts *f, const struct hml_op *op,
		     const struct hml_side *mine, int err)
{
	f->judged = true;
	f->err = err;
	f->device = mine->device;
	f->inject = op->inject || (op->flags & FI_INJECT);
	f->len = mine->len;
	f->inject_size = op->e->inject_size;
}

static void bad_rma(int err, const struct fi_msg_rma *msg, bool read)
{
	const char *what = read ? "read" : "write";

	if (err == FI_EINVAL && msg->iov_count)
		hml_warn_once("an RMA %s names no region of its target "
			      "(key %#lx) or its lengths differ: error "
			      "completion FI_EINVAL", what,
			      (unsigned long) msg->rma_iov[0].key);
	else if (err == FI_EACCES)
		hml_warn_once("an RMA %s runs outside its target region or "
			      "lacks FI_REMOTE_%s: error completion FI_EACCES",
			      what, read ? "READ" : "WRITE");
	hml_debug("RMA %s to context %p failed: %s", what, msg->context,
		  fi_strerror(err));
}

/* The target's CQ, where a write reports remote CQ data. */
static struct hml_cq *data_cq(const struct hml_op *op)
{
	return op->kind == HML_WRITE && (op->flags & FI_REMOTE_CQ_DATA) ?
	       op->t->base->rx_cq : NULL;
}

/* A place for each entry it may report, or nothing moves. */
static bool reserve(struct hml_op *op)
{
	if (!hml_cq_reserve(op->e->base->tx_cq))
		return false;
	if (hml_cq_reserve(data_cq(op)))
		return true;
	hml_cq_unreserve(op->e->base->tx_cq);
	return false;
}

/* Move an RMA operation's bytes: from the target's side to the
 * initiator's for a read, the other way for a write. */
static int rma_move(struct hml_op *op, const struct hml_side *mine,
		    const struct hml_side *theirs)
{
	bool read = op->kind == HML_READ;

	if (mine->len != theirs->len)
		return -FI_EINVAL;
	return read ? hml_move(mine, theirs, mine->len, op) :
		      hml_move(theirs, mine, mine->len, op);
}

bool hml_run_rma(struct hml_ep *e, struct hml_ep *t,
		 const struct fi_msg_rma *msg, uint64_t flags, int kind,
		 bool inject, ssize_t *ret)
{
	bool read = kind == HML_READ;
	struct hml_facts f = {
		.local = true,
		.forbidden = e->base->cuda_forbidden,
		.many = msg->iov_count > HML_IOV_MAX ||
			msg->rma_iov_count > HML_IOV_MAX,
	};
	struct hml_side mine, theirs;
	struct hml_op op;
	struct hml_way w;
	int err, terr;

	start(&op, e, t, kind, flags, inject, msg->context);
	w = hml_route(&f);
	if (w.route == HML_PROVIDER) {
		told(&op, w);
		return pass(&op, w);
	}
	err = hml_side_local(&mine, e->domain, msg->msg_iov, msg->desc,
			     msg->iov_count);
	terr = hml_side_target(&theirs, t, msg->rma_iov, msg->rma_iov_count,
			       read ? FI_REMOTE_READ : FI_REMOTE_WRITE, op.mrs);
	/* A failed hml_side_target holds no region. */
	op.nmrs = terr ? 0 : msg->rma_iov_count;
	facts_of(&f, &op, &mine, err);
	f.device |= theirs.device;
	w = hml_route(&f);
	told(&op, w);
	*ret = 0;
	if (w.route == HML_PROVIDER) {
		pass(&op, w);
		goto out;
	}
	if (w.route == HML_REFUSE) {
		*ret = hml_stat_ret(err ? err : -FI_EINVAL);
		if (w.reason == HML_WHY_DEVICE_INJECT)
			hml_warn_once("an inject of %zu bytes of device memory "
				      "is over the endpoint's inject_size "
				      "(%zu): -FI_EINVAL", mine.len,
				      e->inject_size);
		goto out;
	}
	if (!reserve(&op)) {
		*ret = -FI_EAGAIN;
		goto out;
	}
	op.reason = w.reason;
	op.cntr = read ? HML_CNTR_READ : HML_CNTR_WRITE;
	op.tx.flags = FI_RMA | (read ? FI_READ : FI_WRITE);
	op.target = true;
	op.data = msg->data;
	op.tx.err = -(err ? err : terr);
	if (!op.tx.err)
		op.tx.err = -rma_move(&op, &mine, &theirs);
	if (op.tx.err) {
		bad_rma(op.tx.err, msg, read);
		hml_cq_unreserve(data_cq(&op));
		op.target = false;
	} else {
		op.tx.len = mine.len;
		hml_stat_done(kind, read ? &theirs : &mine,
			      read ? &mine : &theirs, op.tx.len);
	}
	/* The regions stay held until the operation completes. */
	hml_inflight_add(&op);
	return false;
out:
	hml_side_put(op.mrs, op.nmrs);
	return w.route == HML_PROVIDER;
}

/* The message, from a host buffer, injected by the provider: the buffer
 * is free when the call returns. */
static ssize_t prov_inject(struct hml_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags, bool tagged, const void *buf,
			   size_t len)
{
	if (flags & FI_REMOTE_CQ_DATA)
		return tagged ? e->prov_tagged->injectdata(e->ep, buf, len,
						m->data, m->addr, m->tag) :
				e->prov_msg->injectdata(e->ep, buf, len,
						m->data, m->addr);
	return tagged ? e->prov_tagged->inject(e->ep, buf, len, m->addr,
					       m->tag) :
			e->prov_msg->inject(e->ep, buf, len, m->addr);
}

/* A device message the provider must match: it injects a host copy,
 * counted by the provider as its injects are, and the send's completion
 * is hmemloop's to report (sendmsg's FI_INJECT would keep the buffer
 * short, but udp;ofi_rxd then drops the context and the data). */
static ssize_t bounce(struct hml_op *op, const struct fi_msg_tagged *m,
		      bool tagged, const struct hml_side *src)
{
	struct hml_side host = { .count = 1, .len = src->len };
	void *buf;
	ssize_t ret;

	if (!hml_cq_reserve(op->e->base->tx_cq))
		return -FI_EAGAIN;
	buf = malloc(src->len ? src->len : 1);
	if (!buf) {
		hml_cq_unreserve(op->e->base->tx_cq);
		return -FI_ENOMEM;
	}
	hml_inflight_wait(op->e);
	hml_hold_flush(op->e->domain);
	host.mem[0].type = HML_MEM_HOST;
	host.iov[0] = (struct iovec) { buf, src->len };
	ret = hml_move(&host, src, src->len, NULL);
	if (!ret)
		ret = prov_inject(op->e, m, op->flags, tagged, buf, src->len);
	free(buf);
	op->tx.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_SEND;
	op->tx.len = src->len;
	if (ret)
		hml_cq_unreserve(op->e->base->tx_cq);
	else
		hml_complete_tx(op->e, &op->tx, op->flags, op->inject,
				HML_CNTR_NONE);
	return ret;
}

/* A message hmemloop delivers: to the receive the message layer finds for
 * it, or staged until one is posted; held where the provider may hold its
 * match but it must not see the message. HML_MSG_* where the router must
 * decide again. */
static ssize_t deliver(struct hml_op *op, struct hml_rxq *q,
		       const struct fi_msg_tagged *m, bool tagged,
		       const struct hml_side *mine, struct hml_way w, int err)
{
	ssize_t ret;

	if (!hml_cq_reserve(op->e->base->tx_cq))
		return -FI_EAGAIN;
	op->reason = w.reason;
	op->cntr = HML_CNTR_SEND;
	op->tx.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_SEND;
	op->tx.err = -err;
	ret = hml_msg_send(op, q, m, tagged, mine, w.reason == HML_WHY_EARLY);
	if (ret)
		hml_cq_unreserve(op->e->base->tx_cq);
	return ret;
}

bool hml_run_send(struct hml_ep *e, struct hml_ep *t,
		  const struct fi_msg_tagged *m, uint64_t flags, bool tagged,
		  bool inject, ssize_t *ret)
{
	struct hml_rxq *q = hml_rxq_of(t);
	struct hml_facts f = {
		.local = true,
		.forbidden = e->base->cuda_forbidden ||
			     t->base->cuda_forbidden,
		.msg = true,
		.untracked = !q || hml_rxq_no_cancel(q),
		.many = m->iov_count > HML_IOV_MAX,
	};
	struct hml_side mine;
	struct hml_op op;
	struct hml_way w;

	start(&op, e, t, tagged ? HML_TSEND : HML_SEND, flags, inject,
	      m->context);
	for (;;) {
		w = hml_route(&f);
		if (w.route == HML_JUDGE) {
			facts_of(&f, &op, &mine,
				 hml_side_local(&mine, e->domain, m->msg_iov,
						m->desc, m->iov_count));
			continue;
		}
		if (w.route != HML_HERE)
			break;
		*ret = deliver(&op, q, m, tagged, &mine, w, f.err);
		/* What the message layer learned: the provider cannot give
		 * receives back, or may hold this message's match. */
		if (*ret == HML_MSG_NO_CANCEL)
			f.untracked = true;
		else if (*ret == HML_MSG_EARLY)
			f.early = true;
		else
			return hml_stat_ret(*ret), false;
	}
	told(&op, w);
	switch (w.route) {
	case HML_BOUNCE:
		hml_stat_pass(w.reason);
		*ret = hml_stat_ret(bounce(&op, m, tagged, &mine));
		return false;
	case HML_REFUSE:
		if (w.reason == HML_WHY_DEVICE_INJECT)
			hml_warn_once("an inject of %zu bytes of device memory "
				      "is over the endpoint's inject_size "
				      "(%zu): -FI_EINVAL", mine.len,
				      e->inject_size);
		*ret = hml_stat_ret(f.err ? f.err : -FI_EINVAL);
		return false;
	default:
		/* The queue learns that the provider may hold one of its
		 * messages, unless the sender forbade CUDA calls or the queue
		 * is not recorded. */
		if (q && (w.reason == HML_WHY_MANY ||
			  w.reason == HML_WHY_OVERSIZE ||
			  w.reason == HML_WHY_EARLY))
			hml_rxq_passed(q, tagged, &(struct hml_msgin) {
				.tag = tagged ? m->tag : 0,
				.src = hml_msg_source(e, t) });
		return pass(&op, w);
	}
}
