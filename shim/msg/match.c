/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The matcher: a same-process message to a recorded receive queue goes to
 * the first receive, in posting order, that takes it, host or device
 * memory alike: kept here, or taken back from the provider (takeback.c).
 * No receive takes it: it waits, staged, for the next one posted
 * (deliver.c), unless the provider may hold its match (early receives,
 * or messages of this process it carries), which the router then hands it
 * to.
 */
#include <sched.h>

#include "hml_log.h"
#include "hml_msg.h"
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
		     r->state != HML_RX_KEPT && r->state != HML_RX_HELD) ||
		    r->unclaimable)
			continue;
		if (!hml_rx_matches(q, r, in->src, in->tag))
			continue;
		*busy = r->state == HML_RX_POSTING;
		return r;
	}
	return NULL;
}

/* The sender's address in the receiver's AV, for FI_SOURCE and directed
 * receives. */
fi_addr_t hml_msg_source(struct hml_ep *e, struct hml_ep *t)
{
	struct hml_av *av = hml_ep_av(t->base);

	return av ? hml_av_source(av, e->sep ? e->sep : e->base) :
		    FI_ADDR_NOTAVAIL;
}

/*
 * A same-process message the provider carries (more buffers than hmemloop
 * takes, a host inject over inject_size, early receives) that no recorded
 * receive takes may wait at the provider. A later message staged here
 * would then be matched first, against FI_ORDER_SAS: from now on,
 * messages to the queue that no recorded receive takes go to the provider
 * too, as after early receives.
 */
void hml_rxq_passed(struct hml_rxq *q, int tagged, const struct hml_msgin *in)
{
	bool busy;

	if (__atomic_load_n(&q->prov_msgs, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&q->lock);
	if (!first_match(q, tagged, in, &busy))
		__atomic_store_n(&q->prov_msgs, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&q->lock);
}

/*
 * Copy the message, from its staged copy u if it has one, into a receive
 * the sender holds, for op. A multi-receive buffer stays linked in its
 * place meanwhile, POSTING, so that other senders wait for it; with room
 * left it goes back there: kept, or to the provider. A staged copy is
 * freed after, so its copy is over first; a multi-receive buffer's release
 * comes after every message it took, so the sender's operations in flight
 * complete first.
 */
static int deliver(struct hml_rxq *q, struct hml_rx *r, struct hml_ep *t,
		   const struct hml_side *src, const struct hml_unexp *u,
		   const struct hml_msgin *in, struct hml_op *op, bool kept)
{
	bool multi = r->flags & FI_MULTI_RECV;
	int err;

	op->wait = u || multi;
	if (multi)
		hml_inflight_wait(op->e);
	err = hml_rx_deliver(t, r, u ? &u->side : src, in, op);

	pthread_mutex_lock(&q->lock);
	if (multi && hml_rx_multi_left(r) && !kept) {
		pthread_mutex_unlock(&q->lock);
		hml_rx_requeue(q, r, t);
		return err;
	}
	if (multi && hml_rx_multi_left(r)) {
		r->state = HML_RX_KEPT;
	} else {
		hml_rx_unlink(q, r);
		hml_rx_free(r);
	}
	pthread_mutex_unlock(&q->lock);
	return err;
}

static void lost(struct hml_rxq *q, struct hml_rx *r)
{
	pthread_mutex_lock(&q->lock);
	hml_rx_free(r);
	pthread_mutex_unlock(&q->lock);
}

/* What a take-back that cannot be done makes of the message: an error
 * completion, said once. */
static int refused(enum hml_take how)
{
	if (how == HML_BUSY)
		hml_warn_once("a multi-receive buffer the provider has begun to "
			      "fill cannot be taken back: the same-process send "
			      "completes with FI_EOPNOTSUPP");
	else
		hml_warn_once("a directed untagged receive posted before its "
			      "source was in the address vector cannot be "
			      "taken back: the same-process send completes "
			      "with FI_EOPNOTSUPP");
	return -FI_EOPNOTSUPP;
}

ssize_t hml_msg_send(struct hml_op *op, struct hml_rxq *q,
		     const struct fi_msg_tagged *m, bool tagged,
		     const struct hml_side *src, bool hold)
{
	struct hml_ep *t = op->t;
	struct hml_msgin in = {
		.flags = op->flags & FI_REMOTE_CQ_DATA,
		.data = m->data,
		.tag = tagged ? m->tag : 0,
		.src = hml_msg_source(op->e, t),
	};
	struct hml_unexp *u = NULL;
	enum hml_take how;
	struct hml_rx *r;
	ssize_t ret = 0;
	bool busy;
	int err = -op->tx.err;

	while (!err) {
		pthread_mutex_lock(&q->lock);
		r = first_match(q, tagged, &in, &busy);
		if (busy) {
			pthread_mutex_unlock(&q->lock);
			sched_yield();
			continue;
		}
		if (!r && !u && !hold && hml_rxq_early(q)) {
			pthread_mutex_unlock(&q->lock);
			return HML_MSG_EARLY;
		}
		if (!r && (u ? !hml_rx_hold(q, u, tagged) : !hml_rx_room(q))) {
			pthread_mutex_unlock(&q->lock);
			/* As many wait as the receiver may hold: the sender
			 * tries again, as with a provider out of room. */
			ret = -FI_EAGAIN;
			goto out;
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
			hml_inflight_wait(op->e);
			u = hml_rx_stage(t, src, &in, &err);
			if (err == -FI_EAGAIN) {
				ret = err;
				goto out;
			}
			continue;
		}
		if (r->state == HML_RX_KEPT || r->state == HML_RX_HELD) {
			/* Not the provider's: nothing to take back. */
			bool kept = r->state == HML_RX_KEPT;

			if (!kept) {
				hml_hold_taken(q, r);
				HML_STAT(held);
			} else if (r->flags & FI_MULTI_RECV) {
				r->state = HML_RX_POSTING;
			} else {
				hml_rx_unlink(q, r);
			}
			pthread_mutex_unlock(&q->lock);
			err = deliver(q, r, t, src, u, &in, op, kept);
			break;
		}
		busy = r->in_use;
		if (!busy) {
			r->state = HML_RX_CANCELING;
			/* A multi-receive buffer keeps its place. */
			r->stay = r->flags & FI_MULTI_RECV;
		}
		pthread_mutex_unlock(&q->lock);

		how = busy ? HML_BUSY : hml_rx_reclaim(q, r, t);
		if (how == HML_WON) {
			HML_STAT(taken_back);
			if (r->stay) {
				pthread_mutex_lock(&q->lock);
				r->state = HML_RX_POSTING;
				pthread_mutex_unlock(&q->lock);
			}
			err = deliver(q, r, t, src, u, &in, op, false);
			break;
		}
		if (how == HML_BUSY || how == HML_UNSAFE) {
			err = refused(how);
			break;
		}
		if (how == HML_LOST)
			lost(q, r);
		if (how != HML_NO_CANCEL)
			continue;
		hml_warn_once("this provider cannot cancel receives: "
			      "same-process messages go to it");
		if (!u)
			return HML_MSG_NO_CANCEL;
		pthread_mutex_lock(&q->lock);
		ret = hml_rx_hold(q, u, tagged) ? 0 : -FI_EAGAIN;
		pthread_mutex_unlock(&q->lock);
		if (ret)
			goto out;
		u = NULL;
		break;
	}
	op->tx.err = -err;
	op->tx.len = err ? 0 : src->len;
	hml_inflight_add(op);
out:
	if (u)
		hml_rx_unstage(u);
	return ret;
}
