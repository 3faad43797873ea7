/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Held receives (issue 29). A receive posted on a recorded queue is kept
 * from the provider while no one can tell the difference: under manual
 * progress the provider matches an incoming message only inside a call
 * that drives its progress, so if every held receive is handed to it, in
 * the order they were posted, before any such call on the domain, the
 * provider sees the same receive queue wherever it could match as it would
 * without hmemloop. A same-process message meanwhile takes a held receive
 * without taking it back from the provider.
 *
 * A domain holds receives only while all of these hold:
 *   - its data progress is FI_PROGRESS_MANUAL as granted: nothing matches
 *     a message but a call (an automatic control progress, as shm and
 *     tcp;ofi_rxm of 1.x grant, runs connection management alone; the
 *     provider's progress threads of 2.x run where data progress is
 *     automatic);
 *   - neither it nor an endpoint of it was opened with FI_ATOMIC or
 *     FI_COLLECTIVE (those calls go to the provider unwrapped), and its
 *     fabric opened no event queue (EQ reads are not wrapped);
 *   - no thread is in a call that sleeps in the provider on it
 *     (fi_cq_sread, fi_cntr_wait), and no wait object of its CQs or
 *     counters is in the application's hands (FI_GETWAIT, a wait set):
 *     a thread may sleep on it outside libfabric (holds_off).
 * The calls that flush a domain's held receives first are every wrapped
 * call that reaches the provider on that domain, or may (hml_hold_flush):
 * CQ and counter reads and waits, operations passed through, fi_cancel,
 * endpoint control and options, AV changes, registrations, opens, and
 * fi_trywait, fi_poll and every close (all domains). Multi-receive
 * buffers are never held.
 *
 * Lock order: a domain's flush lock, then a queue's lock; no provider
 * call is made under a queue's lock.
 */
#include "hml_log.h"
#include "hml_msg.h"

/* Domains, for the flushes of every domain (a close, fi_trywait). */
static pthread_mutex_t domains_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hml_domain *domains;

static void forked(void)
{
	pthread_mutex_init(&domains_lock, NULL);
}

__attribute__((constructor)) static void hold_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

/* What the domain was opened with allows holding (the first of the
 * rules above). */
void hml_hold_domain(struct hml_domain *d, const struct fi_info *info)
{
	const struct fi_domain_attr *a = info->domain_attr;

	pthread_mutex_init(&d->flush_lock, NULL);
	d->hold_ok = a->data_progress == FI_PROGRESS_MANUAL &&
		     !((info->caps | a->caps) & HML_HOLD_NEVER);
	pthread_mutex_lock(&domains_lock);
	d->next_domain = domains;
	domains = d;
	pthread_mutex_unlock(&domains_lock);
}

/* An endpoint of d opened with caps: d may hold no more if they have calls
 * hmemloop does not wrap. */
void hml_hold_caps(struct hml_domain *d, uint64_t caps)
{
	if (!(caps & HML_HOLD_NEVER))
		return;
	__atomic_store_n(&d->hold_ok, false, __ATOMIC_SEQ_CST);
	hml_hold_flush(d);
}

void hml_hold_domain_fini(struct hml_domain *d)
{
	pthread_mutex_lock(&domains_lock);
	for (struct hml_domain **p = &domains; *p; p = &(*p)->next_domain) {
		if (*p == d) {
			*p = d->next_domain;
			break;
		}
	}
	pthread_mutex_unlock(&domains_lock);
	pthread_mutex_destroy(&d->flush_lock);
}

/* May a receive of q be held now? q is locked. */
bool hml_hold_may(const struct hml_rxq *q, uint64_t flags)
{
	const struct hml_domain *d = q->owner->domain;

	return __atomic_load_n(&d->hold_ok, __ATOMIC_SEQ_CST) &&
	       !(flags & FI_MULTI_RECV) &&
	       !__atomic_load_n(&d->holds_off, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&d->fabric->neqs, __ATOMIC_RELAXED);
}

/* Keep r, which may be held, in q: q is locked. */
void hml_hold(struct hml_rxq *q, struct hml_rx *r)
{
	r->state = HML_RX_HELD;
	hml_rx_link(q, r);
	q->nheld++;
	__atomic_add_fetch(&q->owner->domain->held, 1, __ATOMIC_SEQ_CST);
}

/* r, held in q, is taken (by a message or a cancel): q is locked. */
void hml_hold_taken(struct hml_rxq *q, struct hml_rx *r)
{
	hml_rx_unlink(q, r);
	q->nheld--;
	__atomic_sub_fetch(&q->owner->domain->held, 1, __ATOMIC_SEQ_CST);
}

/* The oldest held receive of q, in either list; q is locked. */
static struct hml_rx *oldest_held(struct hml_rxq *q, int list)
{
	struct hml_rx *head = &q->posted[list];

	for (struct hml_rx *r = head->next; r != head; r = r->next)
		if (r->state == HML_RX_HELD)
			return r;
	return NULL;
}

/* q's held receives to the provider, in the order they were posted. The
 * domain's flush lock is held, so that no other flush interleaves. */
static void flush_queue(struct hml_rxq *q)
{
	struct hml_rx *r;

	pthread_mutex_lock(&q->lock);
	for (int list = 0; list < 2; list++) {
		while (q->nheld && (r = oldest_held(q, list))) {
			q->nheld--;
			__atomic_sub_fetch(&q->owner->domain->held, 1,
					   __ATOMIC_SEQ_CST);
			/* Returns with q unlocked. */
			if (hml_rx_submit(q, r))
				hml_warn("a receive (context %p) kept for this "
					 "process could not be given to the "
					 "provider: it will not complete",
					 r->context);
			pthread_mutex_lock(&q->lock);
		}
	}
	pthread_mutex_unlock(&q->lock);
}

/* A provider that reads its own CQ or counter while it takes a receive
 * comes back here: that thread's flush is under way. */
static __thread bool flushing;

/* Every held receive of d to the provider: before a call that may drive
 * its progress. */
void hml_hold_flush_all(struct hml_domain *d)
{
	if (flushing)
		return;
	pthread_mutex_lock(&d->flush_lock);
	flushing = true;
	for (struct hml_rxq *q = d->rxqs; q; q = q->next_in_domain)
		if (q->nheld)
			flush_queue(q);
	flushing = false;
	pthread_mutex_unlock(&d->flush_lock);
}

/* Every domain's: a close, fi_trywait, fi_poll. */
void hml_hold_flush_every(void)
{
	pthread_mutex_lock(&domains_lock);
	for (struct hml_domain *d = domains; d; d = d->next_domain)
		hml_hold_flush(d);
	pthread_mutex_unlock(&domains_lock);
}

/* From now on, or while delta stays counted, d may not hold: what it
 * holds goes to the provider first. */
void hml_hold_off(struct hml_domain *d, int delta)
{
	if (!d)
		return;
	__atomic_add_fetch(&d->holds_off, delta, __ATOMIC_SEQ_CST);
	if (delta > 0)
		hml_hold_flush(d);
}

/* q joins or leaves its domain's queues. */
void hml_hold_queue(struct hml_rxq *q, bool join)
{
	struct hml_domain *d = q->owner->domain;
	struct hml_rxq **p;

	pthread_mutex_lock(&d->flush_lock);
	if (join) {
		q->next_in_domain = d->rxqs;
		d->rxqs = q;
	} else {
		for (p = &d->rxqs; *p && *p != q; p = &(*p)->next_in_domain)
			;
		if (*p)
			*p = q->next_in_domain;
	}
	pthread_mutex_unlock(&d->flush_lock);
}
