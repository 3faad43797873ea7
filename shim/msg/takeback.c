/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The take-back: how a receive the provider holds comes back to a sender
 * of this process. The sender cancels it under the record's context
 * (hml_rx_reclaim). util providers' fi_cancel returns 0 whether or not it
 * found the receive, so the answer is in the CQ the receive completes on:
 * the cancel's FI_ECANCELED (the receive is the sender's), or the
 * receive's own completion (a message from elsewhere got there first).
 * While it waits, the sender pumps those CQs through the records
 * (filter.c), which see either. A record whose sender stopped waiting is
 * given back to the provider when its cancel comes.
 */
#include <time.h>

#include "hml_log.h"
#include "hml_msg.h"

/* How long a sender waits for the provider to answer a cancel; for a
 * receive of a shared receive context, after which silence is consent. */
#define RECLAIM_SECONDS 5
#define SRX_SECONDS 0.05

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pump_all(struct hml_rxq *q)
{
	struct hml_cq *cqs[HML_CQ_RXQS];
	int n;

	pthread_mutex_lock(&q->lock);
	n = q->ncqs;
	for (int i = 0; i < n; i++)
		cqs[i] = q->cqs[i];
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < n; i++)
		hml_rx_pump(cqs[i]);
}

/* sockets counts a cancelled receive as an error on the receive counter:
 * the application did not cancel anything, so take it back. */
static void uncount(struct hml_cntr *c, uint64_t before)
{
	uint64_t after;

	/* Counters add modulo 2^64: adding the difference's complement
	 * takes it away. */
	if (c && (after = fi_cntr_readerr(c->cntr)) > before)
		fi_cntr_adderr(c->cntr, before - after);
}

/*
 * Take a receive back from the provider. util providers' fi_cancel returns
 * 0 whether or not it found the receive, so the answer is in the CQ: the
 * cancel's FI_ECANCELED error (the receive is ours), or the receive's own
 * completion (a message from elsewhere got there first). A receive on a
 * shared receive context has no CQ of its own, and sockets removes it
 * without a word: no answer then means it is ours.
 */
enum hml_take hml_rx_reclaim(struct hml_rxq *q, struct hml_rx *r,
			     struct hml_ep *t)
{
	bool srx = q->owner->h.fid->fclass == FI_CLASS_SRX_CTX;
	double deadline = now() + (srx ? SRX_SECONDS : RECLAIM_SECONDS);
	struct hml_cntr *rc = t->base->cntr[HML_CNTR_RECV];
	uint64_t errs = rc ? fi_cntr_readerr(rc->cntr) : 0;
	ssize_t ret;
	int state;

	/* Only one given to the provider before its source was an endpoint
	 * of this process in the address vector. */
	if (!r->tagged && hml_rx_directed(q, r)) {
		pthread_mutex_lock(&q->lock);
		state = r->state;
		if (state != HML_RX_DONE)
			r->state = HML_RX_POSTED;
		r->stay = false;
		pthread_mutex_unlock(&q->lock);
		return state == HML_RX_DONE ? HML_LOST : HML_UNSAFE;
	}
	/* The provider's own: the application's fi_cancel is wrapped. */
	ret = q->owner->prov_ops->cancel(&r->fid->fid, &r->ctx);

	/* No CQ to answer on (sockets allows a receive counter alone), and
	 * sockets says whether it found the receive: found, it is ours; not
	 * found, it completed unseen, and the record is stale. */
	if (hml_rxq_unseen(q) && ret != -FI_ENOSYS) {
		pthread_mutex_lock(&q->lock);
		if (ret || !r->stay)
			hml_rx_unlink(q, r);
		r->state = HML_RX_RECLAIMED;
		pthread_mutex_unlock(&q->lock);
		if (ret)
			return HML_LOST;
		uncount(rc, errs);
		return HML_WON;
	}
	if (ret) {
		pthread_mutex_lock(&q->lock);
		/* Refused because the provider has just completed it. */
		if (r->state == HML_RX_DONE) {
			pthread_mutex_unlock(&q->lock);
			return HML_LOST;
		}
		r->state = HML_RX_POSTED;
		r->stay = false;
		if (ret == -FI_ENOSYS)
			__atomic_store_n(&q->no_cancel, true,
					 __ATOMIC_RELAXED);
		else if (!r->in_use)
			r->unclaimable = true;
		pthread_mutex_unlock(&q->lock);
		return ret == -FI_ENOSYS ? HML_NO_CANCEL : r->in_use ? HML_BUSY : HML_REFUSED;
	}
	for (;;) {
		pthread_mutex_lock(&q->lock);
		state = r->state;
		if (state == HML_RX_CANCELING && now() > deadline) {
			if (srx) {
				if (!r->stay)
					hml_rx_unlink(q, r);
				state = r->state = HML_RX_RECLAIMED;
			} else {
				r->abandoned = true;
			}
		}
		pthread_mutex_unlock(&q->lock);
		if (state == HML_RX_RECLAIMED) {
			uncount(rc, errs);
			return HML_WON;
		}
		if (state != HML_RX_CANCELING)
			return HML_LOST;
		if (r->abandoned) {
			hml_warn("the provider did not answer a cancel in %d s: "
				 "a same-process message waits for the next "
				 "receive", RECLAIM_SECONDS);
			return HML_GAVE_UP;
		}
		pump_all(q);
	}
}

/* The first record after from in the list of head in state, with stay. */
static struct hml_rx *after(struct hml_rx *head, struct hml_rx *from,
			    int state, bool stay)
{
	for (struct hml_rx *x = from->next; x != head; x = x->next)
		if (x->state == state && x->stay == stay && !x->in_use &&
		    !x->unclaimable)
			return x;
	return NULL;
}

/*
 * A multi-receive buffer taken back with room left goes back to the
 * provider in its place, as the provider alone keeps it first: the
 * receives given to the provider after it are taken back too, then the
 * buffer and they are given again, in posting order. r is linked and
 * POSTING (senders wait for it); q is unlocked. A message from elsewhere
 * that one of those receives took meanwhile went where it would have gone
 * had the buffer been released.
 */
void hml_rx_requeue(struct hml_rxq *q, struct hml_rx *r, struct hml_ep *t)
{
	struct hml_rx *head = &q->posted[r->tagged], *x;
	enum hml_take how;

	pthread_mutex_lock(&q->lock);
	while ((x = after(head, r, HML_RX_POSTED, false))) {
		x->state = HML_RX_CANCELING;
		x->stay = true;
		pthread_mutex_unlock(&q->lock);
		how = hml_rx_reclaim(q, x, t);
		pthread_mutex_lock(&q->lock);
		if (how == HML_WON) {
			x->state = HML_RX_POSTING;
			continue;
		}
		if (how == HML_LOST)
			hml_rx_free(x);
		/* What cannot come back stays before the buffer. */
		if (how != HML_LOST)
			break;
	}
	/* The buffer, then those taken back, each in its place. */
	for (x = r; x; x = after(head, head, HML_RX_POSTING, true)) {
		x->stay = false;
		if (hml_rx_submit(q, x))
			hml_warn("a receive (context %p) taken back from the "
				 "provider could not be given back: it will not "
				 "complete", x->context);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
}
