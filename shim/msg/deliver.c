/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Delivery: a message into a receive, and its receive's completion; a
 * receive that goes back to the provider taking first the messages from
 * this process that wait for it (rxq.c stages them).
 */
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_stats.h"

/*
 * Copy a message into a receive and complete the receive on the endpoint
 * the message was sent to: now, or with the sender's op, whose copy it
 * then is. A message longer than the receive is cut, and the receive says
 * so (FI_ETRUNC). A multi-receive buffer takes it at its first free byte
 * and is released (FI_MULTI_RECV) once what is left is below the minimum.
 * Returns the copy's error, which the sender shares.
 */
int hml_rx_deliver(struct hml_ep *t, struct hml_rx *r,
		   const struct hml_side *src, const struct hml_msgin *in,
		   struct hml_op *op)
{
	struct hml_ep *b = t->base;
	bool multi = r->flags & FI_MULTI_RECV;
	bool asked = (r->flags & FI_COMPLETION) && !r->silent;
	struct hml_cqe c = {
		.op_context = r->context,
		.flags = (r->tagged ? FI_TAGGED : FI_MSG) | FI_RECV |
			 (in->flags & FI_REMOTE_CQ_DATA),
		.data = in->data,
		.tag = in->tag,
		.src_addr = in->src,
	};
	struct hml_side dst;
	struct iovec left;
	int err;

	if (multi) {
		left.iov_base = (char *) r->iov[0].iov_base + r->used;
		left.iov_len = r->iov[0].iov_len - r->used;
		c.buf = left.iov_base;
		err = hml_side_local(&dst, b->domain, &left, r->desc, 1);
	} else {
		err = hml_side_local(&dst, b->domain, r->iov, r->desc, r->count);
	}
	if (!err) {
		c.len = src->len < dst.len ? src->len : dst.len;
		err = hml_move(&dst, src, c.len, op);
	}
	if (err) {
		c.err = -err;
		c.len = 0;
	} else if (src->len > dst.len) {
		c.err = FI_ETRUNC;
		c.olen = src->len - dst.len;
	}
	if (multi) {
		r->used += (c.len + 7) & ~(size_t) 7;
		if (!hml_rx_multi_left(r))
			c.flags |= FI_MULTI_RECV;
	}
	if (op) {
		op->t = t;
		op->recv = true;
		op->rx = c;
		op->asked = asked;
	} else {
		hml_complete_rx(t, &c, asked);
	}
	hml_stat_recv(r->tagged, src, &dst, c.len, c.err);
	return err;
}

/* Does a staged message match a receive of q? */
static bool takes(struct hml_rxq *q, struct hml_rx *r, struct hml_unexp *u)
{
	return hml_rx_matches(q, r, u->in.src, u->in.tag);
}

static struct hml_unexp *take_unexp(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_unexp **p, *u;

	for (p = &q->unexp[r->tagged]; (u = *p); p = &u->next) {
		if (takes(q, r, u)) {
			*p = u->next;
			if (q->unexp_tail[r->tagged] == &u->next)
				q->unexp_tail[r->tagged] = p;
			q->nunexp--;
			return u;
		}
	}
	return NULL;
}

/*
 * A receive about to go to the provider first takes the messages from this
 * process that wait for it. Called and returning with the queue locked;
 * false if nothing is left of the receive to post.
 */
bool hml_rx_take_waiting(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_unexp *u;

	while (q->nunexp && (u = take_unexp(q, r))) {
		pthread_mutex_unlock(&q->lock);
		/* After the messages in flight, which may be older. */
		hml_inflight_drain();
		hml_rx_deliver(u->target, r, &u->side, &u->in, NULL);
		hml_rx_unstage(u);
		pthread_mutex_lock(&q->lock);
		if (!(r->flags & FI_MULTI_RECV) || !hml_rx_multi_left(r))
			return false;
	}
	return true;
}

/* A receive taken back for a sender that gave up waiting for the cancel, or
 * a multi-receive buffer with room left: it goes to what waits for it, or
 * back to the provider (or, kept, to the end of the queue). */
void hml_rx_repost(struct hml_rxq *q, struct hml_rx *r)
{
	void *context = r->context;

	pthread_mutex_lock(&q->lock);
	r->abandoned = false;
	if (!hml_rx_take_waiting(q, r)) {
		hml_rx_free(r);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	if (r->state == HML_RX_KEPT) {
		hml_rx_link(q, r);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	if (hml_rx_post(q, r))
		hml_warn("a receive (context %p) taken back from the provider "
			 "could not be given back: it will not complete",
			 context);
}
