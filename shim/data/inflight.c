/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Operations in flight (hml_op.h). An operation whose copy is posted goes
 * to the end of its initiator's list; anything that progresses retires
 * each list from its head while the head's copy has landed, and makes its
 * completions. An operation with nothing to wait for is completed at once
 * when its list is empty, so the synchronous path costs no allocation.
 *
 * Progress walks every listed endpoint and takes each list it can lock
 * without waiting: a list locked by another thread is being retired by it,
 * so no thread waits for another's reader, and a thread that never reads
 * holds nothing back. Endpoints are listed once, at their first queued
 * operation, and leave the list at close.
 */
#include <stdlib.h>

#include "hml_op.h"

/* An initiator with this many in flight waits for them before posting
 * more: an application that never reads would otherwise grow it for
 * ever. */
#define MAX_INFLIGHT 4096

unsigned long hml_inflight;

static pthread_rwlock_t list_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct hml_ep **listed;
static size_t nlisted, cap;
/* Threads asleep in fi_cntr_wait, which the shim cannot wake: while there
 * are any, copies are waited for at post. */
static int sleepers;
/* CQs and counters someone may sleep on without reading them (a thread in
 * sread, a wait object handed out): while there are none, no operation
 * asks its own. */
static int watchers;
/* Bumped in a fork() child: the parent's operations are not its own. */
static unsigned int gen;

void hml_inflight_init(struct hml_ep *e)
{
	pthread_mutex_init(&e->flight.lock, NULL);
	e->flight.gen = gen;
}

static void list(struct hml_ep *b)
{
	struct hml_ep **grown;

	pthread_rwlock_wrlock(&list_lock);
	if (b->flight.listed) {
		pthread_rwlock_unlock(&list_lock);
		return;
	}
	if (nlisted == cap) {
		grown = realloc(listed, (cap ? cap * 2 : 16) * sizeof(*listed));
		if (!grown) {
			pthread_rwlock_unlock(&list_lock);
			return;
		}
		listed = grown;
		cap = cap ? cap * 2 : 16;
	}
	listed[nlisted++] = b;
	__atomic_store_n(&b->flight.listed, true, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&list_lock);
}

/* Called at release, after the close drained it. */
void hml_inflight_fini(struct hml_ep *e)
{
	pthread_rwlock_wrlock(&list_lock);
	for (size_t i = 0; i < nlisted; i++)
		if (listed[i] == e) {
			listed[i] = listed[--nlisted];
			break;
		}
	pthread_rwlock_unlock(&list_lock);
	pthread_mutex_destroy(&e->flight.lock);
}

/* Does the target report on its CQ? */
static bool t_reports(const struct hml_op *op)
{
	return op->t && (op->recv || (op->kind != HML_READ &&
				      (op->flags & FI_REMOTE_CQ_DATA)));
}

static void finish(struct hml_op *op, int err)
{
	hml_complete_op(op, err);
	hml_ticket_put(&op->ticket);
}

/* Complete the list's operations from its head: those landed, or, with
 * wait, all of them. The list is locked. */
static void retire(struct hml_flight *f, bool wait)
{
	struct hml_op *op;
	int r;

	while ((op = f->head)) {
		r = wait ? hml_ticket_wait(&op->ticket) :
			   hml_ticket_poll(&op->ticket);
		if (!r && !wait)
			break;
		f->head = op->next;
		if (!f->head)
			f->tail = NULL;
		__atomic_sub_fetch(&f->count, 1, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&hml_inflight, 1, __ATOMIC_RELEASE);
		finish(op, r < 0 ? r : 0);
		free(op);
	}
}

/*
 * Someone sleeps, or may, where only an entry or count made now would
 * wake them: a thread in fi_cntr_wait or a CQ's sread, or an application
 * that waits on a CQ's or a counter's wait object itself. Asked after the
 * operation is counted in its list, as a sleeper asks the lists after it
 * is counted: one of the two sees the other.
 */
static bool asleep(const struct hml_op *op)
{
	if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST))
		return true;
	if (!__atomic_load_n(&watchers, __ATOMIC_SEQ_CST))
		return false;
	return hml_cq_watched(op->e->base->tx_cq) ||
	       (t_reports(op) && hml_cq_watched(op->t->base->rx_cq)) ||
	       hml_op_cntr_watched(op);
}

/* The list of a fork() child is its parent's: it starts empty. */
static void fresh(struct hml_flight *f)
{
	if (f->gen == gen)
		return;
	f->head = f->tail = NULL;
	f->last = NULL;
	f->count = 0;
	f->gen = gen;
}

void hml_inflight_add(struct hml_op *op)
{
	struct hml_ep *b = op->e->base;
	struct hml_flight *f = &b->flight;
	struct hml_op *q;

	if (op->ticket.s && !__atomic_load_n(&f->listed, __ATOMIC_ACQUIRE))
		list(b);
	pthread_mutex_lock(&f->lock);
	fresh(f);
	if (f->count >= MAX_INFLIGHT)
		retire(f, true);
	if (!op->ticket.s && !f->head) {
		finish(op, 0);
		pthread_mutex_unlock(&f->lock);
		return;
	}
	q = malloc(sizeof(*q));
	if (!q || !__atomic_load_n(&f->listed, __ATOMIC_ACQUIRE)) {
		/* Nowhere to keep it: it is waited for, and so is the list. */
		retire(f, true);
		finish(op, hml_ticket_wait(&op->ticket));
		pthread_mutex_unlock(&f->lock);
		free(q);
		return;
	}
	*q = *op;
	q->next = NULL;
	if (q->ticket.s)
		f->last = q->ticket.s;
	if (f->tail)
		f->tail->next = q;
	else
		f->head = q;
	f->tail = q;
	__atomic_add_fetch(&f->count, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&hml_inflight, 1, __ATOMIC_SEQ_CST);
	if (asleep(op))
		retire(f, true);
	pthread_mutex_unlock(&f->lock);
}

/* Before c's pieces are queued for e: e's operations on another stream
 * (another thread's, another device's) are waited for, so that the copies
 * land in the order they were posted. The list's copies are all on one
 * stream, its last. */
void hml_inflight_order(struct hml_ep *e, const struct hml_copy *c)
{
	struct hml_flight *f = &e->base->flight;

	if (!__atomic_load_n(&f->count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&f->lock);
	fresh(f);
	if (f->head && f->last != c->s)
		retire(f, true);
	pthread_mutex_unlock(&f->lock);
}

/* Everything e posted, landed and completed: before the provider carries
 * one of e's operations to an endpoint of this process. */
void hml_inflight_wait(struct hml_ep *e)
{
	struct hml_flight *f = &e->base->flight;

	if (!__atomic_load_n(&f->count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&f->lock);
	fresh(f);
	retire(f, true);
	pthread_mutex_unlock(&f->lock);
}

static void each(bool wait)
{
	pthread_rwlock_rdlock(&list_lock);
	for (size_t i = 0; i < nlisted; i++) {
		struct hml_flight *f = &listed[i]->flight;

		if (!__atomic_load_n(&f->count, __ATOMIC_SEQ_CST))
			continue;
		if (wait)
			pthread_mutex_lock(&f->lock);
		else if (pthread_mutex_trylock(&f->lock))
			continue;
		fresh(f);
		retire(f, wait);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_rwlock_unlock(&list_lock);
}

/* What has landed, completed; never waits. */
void hml_inflight_progress(void)
{
	each(false);
}

/* Everything in flight, waited for and completed: a close, a blocking
 * wait, fi_trywait. */
void hml_inflight_drain(void)
{
	if (hml_inflight_any())
		each(true);
}

/* A thread goes to sleep where only a completion made at post would wake
 * it (delta 1), or wakes (-1). */
void hml_inflight_sleep(int delta)
{
	__atomic_add_fetch(&sleepers, delta, __ATOMIC_ACQ_REL);
}

/* A CQ or counter may be slept on without a read (delta 1: a thread in
 * its sread, its wait object handed out, a wait set), or no longer (-1). */
void hml_inflight_watch(int delta)
{
	__atomic_add_fetch(&watchers, delta, __ATOMIC_SEQ_CST);
}

static void forked(void)
{
	gen++;
	hml_inflight = 0;
	sleepers = 0;
	watchers = 0;
	nlisted = 0;
	pthread_rwlock_init(&list_lock, NULL);
}

__attribute__((constructor)) static void inflight_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}
