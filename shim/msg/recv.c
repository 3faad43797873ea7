/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The receive calls. A message from this process must land in a receive
 * the application posted, and the provider holds those. So once an
 * endpoint is in an address vector of this process, hmemloop records every
 * receive posted on it (or on its shared receive context) in its queue
 * (rxq.c), in posting order, until its completion is read; the provider
 * holds each under the record's own context (hml_msg.h says why). A
 * directed untagged receive for an endpoint of this process is kept here,
 * never given to the provider. FI_PEEK and FI_CLAIM look at the messages
 * hmemloop holds first (peek.c). The application's fi_cancel is mapped to
 * the record's context. Which endpoints are tracked is track.c's.
 */
#include <sched.h>
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"

static struct hml_ep *msg_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->msg, struct hml_ep, msg.ops);
}

static struct hml_ep *tagged_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->tagged, struct hml_ep, tagged.ops);
}

/* A receive the shim does not record: should the endpoint be tracked
 * later, messages from this process must not wait for a recorded receive
 * while the provider may hold a matching one (msg.c). A store once. */
static struct hml_ep *untracked(struct hml_ep *o)
{
	if (!__atomic_load_n(&o->early_rx, __ATOMIC_RELAXED))
		__atomic_store_n(&o->early_rx, true, __ATOMIC_RELAXED);
	return o;
}

/* A directed untagged receive for an endpoint of this process whose sends
 * all come through the shim (msg.c passes none to the provider). */
static bool keep(struct hml_rxq *q, const struct hml_rx *r)
{
	struct hml_ep *s;

	if (r->tagged || !hml_rx_directed(q, r) || !q->av)
		return false;
	s = hml_av_target(q->av, r->src);
	return s && !s->base->opaque && !s->base->cuda_forbidden &&
	       !q->owner->cuda_forbidden;
}

static ssize_t post(struct hml_rxq *q, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags, int tagged)
{
	struct hml_rx *r;

	pthread_mutex_lock(&q->lock);
	r = hml_rx_new(q, fid, m, flags, tagged);
	if (!r) {
		pthread_mutex_unlock(&q->lock);
		hml_warn("out of memory: a receive (context %p) is not "
			 "recorded; a same-process message cannot take it",
			 m->context);
		/* Unrecorded, so under the application's own context. */
		return hml_rx_prov(untracked(q->owner), fid, m, flags,
				   tagged);
	}
	if (!hml_rx_take_waiting(q, r)) {
		hml_rx_free(r);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	if (keep(q, r)) {
		r->state = HML_RX_KEPT;
		hml_rx_link(q, r);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	if (hml_hold_may(q, r->flags)) {
		hml_hold(q, r);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	/* Behind those held before it. */
	if (q->nheld) {
		pthread_mutex_unlock(&q->lock);
		hml_hold_flush(q->owner->domain);
		pthread_mutex_lock(&q->lock);
	}
	return hml_rx_post(q, r);
}

/* An untracked receive, or one the provider must see now: what the
 * domain holds goes to the provider first. */
static struct hml_ep *to_provider(struct hml_ep *o)
{
	hml_hold_flush(o->domain);
	return o;
}

/* The receive wrappers: for an endpoint that is in no address vector of
 * this process, a few loads more than the provider's call. The message is
 * put in fi_msg_tagged form only for one that is. */
#define RECV(e, table, fid, flags, tagged, call, ...) ({		\
	struct hml_rxq *q_ = hml_rxq_of(e);				\
	!q_ ? untracked(to_provider(hml_rx_owner(e)))->prov_##table->call : \
	      post(q_, fid, &(struct fi_msg_tagged) { __VA_ARGS__ },	\
		   flags, tagged); })

static ssize_t hml_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, e->rx_op_flags, HML_UNTAGGED,
		    recv(ep, buf, len, desc, src, ctx),
		    HML_IOV(buf, len), &desc, 1, src, 0, 0, ctx, 0);
}

static ssize_t hml_recvv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, e->rx_op_flags, HML_UNTAGGED,
		    recvv(ep, iov, desc, count, src, ctx),
		    iov, desc, count, src, 0, 0, ctx, 0);
}

static ssize_t hml_recvmsg(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, flags, HML_UNTAGGED, recvmsg(ep, msg, flags),
		    msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0, 0,
		    msg->context, 0);
}

static ssize_t hml_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			 fi_addr_t src, uint64_t tag, uint64_t ignore,
			 void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);

	return RECV(e, tagged, ep, e->rx_op_flags, HML_TAGGED,
		    recv(ep, buf, len, desc, src, tag, ignore, ctx),
		    HML_IOV(buf, len), &desc, 1, src, tag, ignore, ctx, 0);
}

static ssize_t hml_trecvv(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t src,
			  uint64_t tag, uint64_t ignore, void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);

	return RECV(e, tagged, ep, e->rx_op_flags, HML_TAGGED,
		    recvv(ep, iov, desc, count, src, tag, ignore, ctx),
		    iov, desc, count, src, tag, ignore, ctx, 0);
}

/* FI_PEEK, FI_CLAIM and FI_DISCARD: the messages hmemloop holds, then
 * the provider's. */
static ssize_t hml_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			    uint64_t flags)
{
	struct hml_ep *e = tagged_ep(ep);
	struct hml_rxq *q;
	ssize_t ret;

	if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD)) {
		q = hml_rxq_of(e);
		if (q && hml_msg_peek(e, q, ep, msg, flags, &ret))
			return ret;
		return to_provider(hml_rx_owner(e))->prov_tagged->recvmsg(ep,
								msg, flags);
	}
	return RECV(e, tagged, ep, flags, HML_TAGGED, recvmsg(ep, msg, flags),
		    msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
		    msg->tag, msg->ignore, msg->context, 0);
}

void hml_recv_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged)
{
	if (msg) {
		hml_table_set(msg, recv, hml_recv);
		hml_table_set(msg, recvv, hml_recvv);
		hml_table_set(msg, recvmsg, hml_recvmsg);
	}
	if (tagged) {
		hml_table_set(tagged, recv, hml_trecv);
		hml_table_set(tagged, recvv, hml_trecvv);
		hml_table_set(tagged, recvmsg, hml_trecvmsg);
	}
}

/* The first receive posted with the application's context that no sender
 * is taking; *busy if it is still being handed to the provider. Rare:
 * a walk. */
static struct hml_rx *app_rx(struct hml_rxq *q, void *context, bool *busy)
{
	for (int i = 0; i < 2; i++) {
		struct hml_rx *head = &q->posted[i];

		for (struct hml_rx *r = head->next; r != head; r = r->next) {
			if (r->context != context ||
			    (r->state != HML_RX_POSTED &&
			     r->state != HML_RX_POSTING &&
			     r->state != HML_RX_KEPT &&
			     r->state != HML_RX_HELD))
				continue;
			*busy = r->state == HML_RX_POSTING;
			return r;
		}
	}
	return NULL;
}

/* A kept or held receive the application cancels, unlinked: completed
 * with FI_ECANCELED as util providers complete one they hold. */
static void cancel_kept(struct hml_rxq *q, struct hml_rx *r,
			struct hml_cq *cq)
{
	struct hml_cqe c = {
		.op_context = r->context,
		.flags = (r->tagged ? FI_TAGGED : FI_MSG) | FI_RECV |
			 (r->flags & FI_MULTI_RECV),
		.src_addr = FI_ADDR_NOTAVAIL,
		.err = FI_ECANCELED,
		.prov_errno = -FI_ECANCELED,
	};

	hml_rx_free(r);
	pthread_mutex_unlock(&q->lock);
	if (cq)
		hml_cq_push(cq, &c);
}

/*
 * fi_cancel. A recorded receive the provider knows by its record's
 * context: the application's is mapped to it, senders leave the receive
 * alone from then on, and the FI_ECANCELED entry reaches the application
 * with its own context (takeback.c). A kept receive the provider never
 * saw is cancelled here. Any other context (a send's, a receive the shim
 * did not record) is the provider's to find.
 */
ssize_t hml_rx_cancel(fid_t fid, void *context)
{
	struct fid_ep *ep = hml_container_of(fid, struct fid_ep, fid);
	struct hml_ep *e = hml_container_of(ep->ops, struct hml_ep, ops.ops);
	struct hml_rxq *q = hml_rxq_any(e);
	struct hml_cq *cq;
	struct hml_rx *r;
	bool busy = false;
	ssize_t ret;

	if (!q)
		return to_provider(e)->prov_ops->cancel(fid, context);
	pthread_mutex_lock(&q->lock);
	while ((r = app_rx(q, context, &busy)) && busy) {
		pthread_mutex_unlock(&q->lock);
		sched_yield();
		pthread_mutex_lock(&q->lock);
	}
	if (!r) {
		pthread_mutex_unlock(&q->lock);
		return to_provider(e)->prov_ops->cancel(fid, context);
	}
	if (r->state == HML_RX_KEPT || r->state == HML_RX_HELD) {
		if (r->state == HML_RX_HELD)
			hml_hold_taken(q, r);
		else
			hml_rx_unlink(q, r);
		cq = q->ncqs ? q->cqs[0] : NULL;
		cancel_kept(q, r, cq);
		return 0;
	}
	r->state = HML_RX_APP_CANCELING;
	pthread_mutex_unlock(&q->lock);
	hml_hold_flush(e->domain);

	ret = e->prov_ops->cancel(fid, &r->ctx);

	pthread_mutex_lock(&q->lock);
	if (r->state == HML_RX_DONE) {
		hml_rx_free(r);
	} else if (hml_rxq_unseen(q)) {
		/* No CQ will say more: cancelled or completed unseen, it is
		 * gone from the provider. */
		hml_rx_unlink(q, r);
		hml_rx_free(r);
	} else {
		r->state = ret ? HML_RX_POSTED : HML_RX_APP_CANCELED;
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}
