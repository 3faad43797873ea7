/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The send side: a send to an endpoint of this process that is in an
 * address vector of this process goes to the first matching receive the
 * shim has recorded (rxq.c), taken back from the provider (takeback.c), or
 * waits staged until one is posted. Host memory on both sides, when a
 * receive is there to take it, is left to the provider. The calls that
 * bring sends here are send.c's.
 */
#include <sched.h>
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_op.h"
#include "hml_stats.h"

/* The oldest posted receive that takes the message; *busy if one that
 * would is still being handed to the provider. */
static struct hml_rx *first_match(struct hml_rxq *q, int tagged,
				  const struct hml_msgin *in, bool *busy)
{
	struct hml_rx *head = &q->posted[tagged];

	*busy = false;
	for (struct hml_rx *r = head->next; r != head; r = r->next) {
		if ((r->state != HML_RX_POSTING && r->state != HML_RX_POSTED &&
		     r->state != HML_RX_KEPT) || r->unclaimable)
			continue;
		if (!hml_rx_matches(q, r, in->src, in->tag))
			continue;
		*busy = r->state == HML_RX_POSTING;
		return r;
	}
	return NULL;
}

/*
 * Copy the message, from its staged copy u if it has one, into a receive
 * the sender holds, for op; a multi-receive buffer with room left goes
 * back. A staged copy is freed after, so its copy is over first; a
 * multi-receive buffer's release comes after every message it took, so
 * the sender's operations in flight complete first.
 */
static int deliver(struct hml_rxq *q, struct hml_rx *r, struct hml_ep *t,
		   const struct hml_side *src, const struct hml_unexp *u,
		   const struct hml_msgin *in, struct hml_op *op)
{
	int err;

	op->wait = u || (r->flags & FI_MULTI_RECV);
	if (r->flags & FI_MULTI_RECV)
		hml_inflight_wait(op->e);
	err = hml_rx_deliver(t, r, u ? &u->side : src, in, op);

	if ((r->flags & FI_MULTI_RECV) && hml_rx_multi_left(r))
		hml_rx_repost(q, r);
	else
		free(r);
	return err;
}

/* The sender's address in the receiver's AV, for FI_SOURCE and directed
 * receives. */
static fi_addr_t source(struct hml_ep *e, struct hml_ep *t)
{
	struct hml_av *av = hml_ep_av(t->base);

	return av ? hml_av_source(av, e->sep ? e->sep : e->base) :
		    FI_ADDR_NOTAVAIL;
}

/*
 * No recorded receive takes the message, but the provider may hold one
 * posted before the shim recorded the endpoint's receives: holding the
 * message for a later receive could then wait for ever (fi_loopback posts
 * before it inserts its own address). Host memory goes to the provider;
 * device memory goes as a host copy, which the provider takes only up to
 * inject_size. A larger one is held, as README's Limits say.
 */
static bool early(const struct hml_rxq *q, const struct hml_side *src,
		  const struct hml_ep *e)
{
	if (!__atomic_load_n(&q->owner->early_rx, __ATOMIC_RELAXED) &&
	    !q->prov_msgs)
		return false;
	if (!src->device || src->len <= e->inject_size)
		return true;
	hml_warn_once("a same-process send of %zu bytes of device memory, "
		      "over inject_size, to an endpoint that posted receives "
		      "before its address was in an address vector, or that "
		      "the provider may hold same-process messages for, waits "
		      "for a receive posted after", src->len);
	return false;
}

/*
 * A same-process message the provider carries (a host inject over
 * inject_size, more iovs than the shim takes) that no recorded receive
 * takes may wait at the provider. A later message staged here would then
 * be matched first, against FI_ORDER_SAS: from now on, messages to the
 * queue that no recorded receive takes go to the provider too, as after
 * early receives.
 */
static enum hml_verdict pass(struct hml_rxq *q, int tagged,
			     const struct hml_msgin *in)
{
	bool busy;

	pthread_mutex_lock(&q->lock);
	if (!q->prov_msgs && !first_match(q, tagged, in, &busy))
		q->prov_msgs = true;
	pthread_mutex_unlock(&q->lock);
	return HML_PASS;
}

/* The message, from a host buffer, injected by the provider: the buffer
 * is free when the call returns. */
static ssize_t prov_inject(struct hml_ep *e, const struct fi_msg_tagged *m,
			   uint64_t flags, int tagged, const void *buf,
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
 * is the shim's to report (sendmsg's FI_INJECT would keep the buffer
 * short, but udp;ofi_rxd then drops the context and the data). */
static ssize_t bounce(struct hml_ep *e, const struct fi_msg_tagged *m,
		      uint64_t flags, int tagged, bool inject,
		      const struct hml_side *src)
{
	struct hml_side host = { .count = 1, .len = src->len };
	struct hml_cqe c = {
		.op_context = m->context,
		.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_SEND,
		.len = src->len,
		.src_addr = FI_ADDR_NOTAVAIL,
	};
	void *buf = malloc(src->len ? src->len : 1);
	ssize_t ret;

	HML_STAT(passed[HML_STAT_EARLY]);
	if (!buf)
		return -FI_ENOMEM;
	hml_inflight_wait(e);
	host.mem[0].type = HML_MEM_HOST;
	host.iov[0] = (struct iovec) { buf, src->len };
	ret = hml_move(&host, src, src->len, NULL);
	if (!ret)
		ret = prov_inject(e, m, flags, tagged, buf, src->len);
	free(buf);
	if (!ret)
		hml_complete_tx(e, &c, flags, inject, HML_CNTR_NONE);
	return ret;
}

/*
 * HML_PASS when the provider should carry it; otherwise *res is the call's
 * return: 0 with the message delivered or held and the sender's completion
 * reported, or an error with nothing reported.
 */
static enum hml_verdict local_send(struct hml_ep *e, struct hml_ep *t,
				   const struct fi_msg_tagged *m,
				   uint64_t flags, int tagged, bool inject,
				   ssize_t *res)
{
	struct hml_rxq *q = hml_rxq_of(t);
	struct hml_msgin in = {
		.flags = flags & FI_REMOTE_CQ_DATA,
		.data = m->data,
		.tag = tagged ? m->tag : 0,
	};
	struct hml_op op = {
		.e = e,
		.flags = flags,
		.inject = inject,
		.cntr = HML_CNTR_SEND,
		.tx = {
			.op_context = m->context,
			.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_SEND,
			.src_addr = FI_ADDR_NOTAVAIL,
		},
	};
	struct hml_unexp *u = NULL;
	const struct hml_side *src;
	enum hml_verdict v;
	struct hml_xfer x;
	struct hml_rx *r;
	bool busy;
	ssize_t ret;
	int err;

	/* Endpoints that forbade CUDA calls tell the queue nothing (pass()
	 * is for messages the shim could not take). */
	if (!q || q->no_cancel)
		return hml_stat_pass(HML_STAT_UNSUPPORTED);
	if (!hml_xfer_msg_ok(e, t))
		return hml_stat_pass(HML_STAT_FORBIDDEN);
	in.src = source(e, t);
	v = hml_xfer_send(&x, e, t, m->msg_iov, m->desc, m->iov_count, flags,
			  inject);
	*res = x.err;
	if (v == HML_PASS)
		return pass(q, tagged, &in);
	if (v != HML_DO)
		return v;
	src = &x.mine;
	err = x.err;
	while (!err) {
		pthread_mutex_lock(&q->lock);
		r = first_match(q, tagged, &in, &busy);
		if (busy) {
			pthread_mutex_unlock(&q->lock);
			sched_yield();
			continue;
		}
		if (!r && !u && early(q, src, e)) {
			pthread_mutex_unlock(&q->lock);
			if (!src->device)
				return hml_stat_pass(HML_STAT_EARLY);
			*res = bounce(e, m, flags, tagged, inject, src);
			return HML_DO;
		}
		if (!r && (u ? !hml_rx_hold(q, u, tagged) : !hml_rx_room(q))) {
			pthread_mutex_unlock(&q->lock);
			ret = -FI_EAGAIN;
			goto pushed_back;
		}
		if (!r && u) {
			pthread_mutex_unlock(&q->lock);
			u = NULL;
			break;
		}
		if (!r) {
			/* Staged outside the lock, after the copies in flight
			 * that may write its source; then looked at again. */
			pthread_mutex_unlock(&q->lock);
			hml_inflight_wait(e);
			u = hml_rx_stage(t, src, &in, &err);
			if (err == -FI_EAGAIN) {
				*res = err;
				return HML_DO;
			}
			continue;
		}
		if (r->state == HML_RX_KEPT) {
			/* Never the provider's: nothing to take back. */
			hml_rx_unlink(q, r);
			pthread_mutex_unlock(&q->lock);
			err = deliver(q, r, t, src, u, &in, &op);
			goto done;
		}
		if (!u && hml_xfer_host(&x, t->base->domain, r->iov, r->desc,
					r->count)) {
			pthread_mutex_unlock(&q->lock);
			return hml_stat_pass(HML_STAT_HOST);
		}
		busy = r->in_use;
		if (!busy)
			r->state = HML_RX_CANCELING;
		pthread_mutex_unlock(&q->lock);

		switch (busy ? HML_BUSY : hml_rx_reclaim(q, r, t)) {
		case HML_WON:
			HML_STAT(taken_back);
			err = deliver(q, r, t, src, u, &in, &op);
			goto done;
		case HML_LOST:
			free(r);
			break;
		case HML_REFUSED:
		case HML_GAVE_UP:
			break;
		case HML_BUSY:
			hml_warn_once("a multi-receive buffer the provider has "
				      "begun to fill cannot be taken back: the "
				      "same-process send completes with "
				      "FI_EOPNOTSUPP");
			err = -FI_EOPNOTSUPP;
			goto done;
		case HML_UNSAFE:
			hml_warn_once("a directed untagged receive posted before "
				      "its source was in the address vector "
				      "cannot be taken back: the same-process "
				      "send completes with FI_EOPNOTSUPP");
			err = -FI_EOPNOTSUPP;
			goto done;
		case HML_NO_CANCEL:
			hml_warn_once("this provider cannot cancel receives: "
				      "same-process messages pass through");
			if (!u)
				return hml_stat_pass(HML_STAT_UNSUPPORTED);
			pthread_mutex_lock(&q->lock);
			ret = hml_rx_hold(q, u, tagged) ? 0 : -FI_EAGAIN;
			pthread_mutex_unlock(&q->lock);
			if (ret)
				goto pushed_back;
			u = NULL;
			goto done;
		}
	}
done:
	if (u)
		hml_rx_unstage(u);
	op.tx.err = -err;
	op.tx.len = err ? 0 : src->len;
	hml_inflight_add(&op);
	*res = 0;
	return HML_DO;

pushed_back:
	/* As many wait as the receiver may hold: the sender tries again,
	 * as with a provider out of room. */
	if (u)
		hml_rx_unstage(u);
	*res = ret;
	return HML_DO;
}

/* A place on the sender's CQ first (cqueue.c): local_send reports
 * there exactly when it does it and returns 0. */
enum hml_verdict hml_msg_send(struct hml_ep *e, struct hml_ep *t,
			      const struct fi_msg_tagged *m, uint64_t flags,
			      int tagged, bool inject, ssize_t *res)
{
	enum hml_verdict v;

	*res = -FI_EAGAIN;
	if (!hml_cq_reserve(e->base->tx_cq))
		return HML_REFUSE;
	v = local_send(e, t, m, flags, tagged, inject, res);
	/* The provider's messages to this process follow the shim's. */
	if (v == HML_PASS)
		hml_inflight_wait(e);
	if (v != HML_DO || *res)
		hml_cq_unreserve(e->base->tx_cq);
	if (v != HML_PASS)
		hml_stat_ret(*res);
	return v;
}
