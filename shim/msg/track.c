/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Which endpoints' receives are recorded, and which CQs are read through
 * their records. An endpoint's receives are recorded from when it is found
 * in an address vector of this process (track(), which the address
 * layer calls for each one it finds), in the queue of the endpoint or of
 * its shared receive context; the CQs of every endpoint enabled on that
 * context are watched (filter.c) before the queue is published. Closing
 * undoes it.
 */
#include "hml_log.h"
#include "hml_msg.h"

/* Guards the lists of endpoints sharing a receive context; taken before
 * any CQ's or queue's lock. */
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;

/* A CQ t's receives complete on is read through q's records, or, where
 * it cannot be, messages to q pass through. */
static void watch(struct hml_rxq *q, struct hml_ep *t)
{
	if (t->base->rx_cq && !hml_rx_watch(t->base->rx_cq, q) &&
	    !__atomic_exchange_n(&q->pass, true, __ATOMIC_RELAXED))
		hml_warn("endpoint %p: its CQ serves %d tracked endpoints, or "
			 "its shared receive context %d CQs: same-process "
			 "messages to it pass through", t->ep, HML_CQ_RXQS,
			 HML_CQ_RXQS);
}

/*
 * Start recording the receives of an endpoint that is now in an address
 * vector of this process. The CQs they may complete on are watched before
 * the queue is published, so that no receive goes to the provider under
 * the shim's context before those CQs' entries pass the records: for a
 * shared receive context, the CQs of every endpoint enabled on it, in an
 * address vector or not.
 */
static void track(struct hml_ep *t)
{
	struct hml_ep *o = hml_rx_owner(t);
	struct hml_rxq *q;

	pthread_mutex_lock(&share_lock);
	q = hml_rxq_any(t);
	if (!q && (q = hml_rxq_new(o, t))) {
		for (struct hml_ep *s = o->sharers; s; s = s->share_next)
			watch(q, s);
		hml_hold_queue(q, true);
		__atomic_store_n(&o->rxq, q, __ATOMIC_RELEASE);
		hml_info("endpoint %p is in an address vector of this process: "
			 "receives posted on it from now on are recorded", t->ep);
	}
	if (q)
		watch(q, t);
	else
		hml_warn("out of memory: messages to endpoint %p from this "
			 "process pass through", t->ep);
	pthread_mutex_unlock(&share_lock);
}

/* e was enabled with a shared receive context: the context's receives may
 * complete on e's CQ from now on. */
void hml_rx_share(struct hml_ep *e)
{
	struct hml_ep *srx = e->base->srx;
	struct hml_rxq *q;

	pthread_mutex_lock(&share_lock);
	e->share_next = srx->sharers;
	srx->sharers = e;
	if ((q = hml_rxq_any(e)))
		watch(q, e);
	pthread_mutex_unlock(&share_lock);
}

static void leave_srx(struct hml_ep *t)
{
	struct hml_ep **p;

	pthread_mutex_lock(&share_lock);
	for (p = &t->base->srx->sharers; *p && *p != t; p = &(*p)->share_next)
		;
	if (*p)
		*p = t->share_next;
	pthread_mutex_unlock(&share_lock);
}

/* t is closing: it leaves its shared receive context, and messages sent
 * to it that wait there are lost (fi_endpoint(3)). */
void hml_rx_drop_target(struct hml_ep *t)
{
	struct hml_rxq *q;

	if (!t->base->srx)
		return;
	q = hml_rxq_any(t);
	leave_srx(t);
	if (q)
		hml_rxq_drop(q, t);
}

__attribute__((constructor)) static void track_init(void)
{
	hml_av_on_found(track);
}

void hml_rxq_free(struct hml_rxq *q)
{
	if (!q)
		return;
	/* Entries the provider wrote before the endpoint closed get their
	 * application's contexts while the records are there to say. */
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_mutex_unlock(&q->lock);
	hml_hold_queue(q, false);
	for (int i = 0; i < q->ncqs; i++)
		hml_rx_pump(q->cqs[i]);
	while (q->ncqs)
		hml_rx_unwatch(q->cqs[0], q);
	hml_rxq_destroy(q);
}
