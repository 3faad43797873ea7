/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The provider's CQ entries, through the receive records. A CQ where
 * recorded receives complete (hml_rx_watch) passes each entry the
 * provider returns through them: an entry that names a record (its
 * context lies in the records' arena, rxq.c) retires it and gets the
 * application's context back; the cancels a sender asked for
 * (takeback.c), and the completions of receives hmemloop asked an entry
 * for, never reach the application. Any other entry passes untouched, at
 * the cost of two comparisons. Reads pass the entries in place in the
 * application's buffer (hml_rx_filter); a sender waiting for a cancel's
 * answer, and an error, go through the pump, which keeps what it read in
 * the CQ's queue (cqueue.c), in order. A record whose sender stopped
 * waiting is given back to the provider when its cancel comes (orphans).
 */
#include <stdlib.h>
#include <string.h>

#include "hml_log.h"
#include "hml_msg.h"

#define PUMP_BATCH 16

/* Records whose cancel came after their sender gave up, in any queue. */
static unsigned long orphaned;

/* The fields of an entry of the CQ's format that the records read. */
static void to_cqe(const struct hml_cq *c, const void *buf, fi_addr_t src,
		   struct hml_cqe *e)
{
	const struct fi_cq_tagged_entry *t = buf;

	*e = (struct hml_cqe) { .op_context = t->op_context, .src_addr = src };
	switch (c->format) {
	case FI_CQ_FORMAT_TAGGED:
		e->tag = t->tag;
		/* fall through */
	case FI_CQ_FORMAT_DATA:
		e->buf = t->buf;
		e->data = t->data;
		/* fall through */
	case FI_CQ_FORMAT_MSG:
		e->flags = t->flags;
		e->len = t->len;
		break;
	default:
		break;
	}
}

/*
 * An entry the provider wrote for the record r, under its queue's lock:
 * it gets the application's context back, and the receive is done, unless
 * it is a multi-receive buffer not yet released, or this is the cancel a
 * sender asked for, which the application never sees. False when the
 * entry is swallowed.
 */
static bool filter_one(struct hml_rxq *q, struct hml_rx *r, struct hml_cqe *e)
{
	bool keep;

	e->op_context = r->context;
	if (e->err == FI_ECANCELED && r->state == HML_RX_CANCELING) {
		if (!r->stay || r->abandoned)
			hml_rx_unlink(q, r);
		r->state = HML_RX_RECLAIMED;
		if (r->abandoned) {
			r->next = q->orphans;
			q->orphans = r;
			__atomic_add_fetch(&orphaned, 1, __ATOMIC_RELEASE);
		}
		return false;
	}
	/* The provider placed a message in a multi-receive buffer: no
	 * sender may take it back and place one over it. */
	if (!e->err && (r->flags & FI_MULTI_RECV) &&
	    !(e->flags & FI_MULTI_RECV)) {
		r->in_use = true;
		return !r->silent;
	}
	hml_rx_unlink(q, r);
	keep = e->err || !r->silent;
	/* Whoever is busy with it frees it. */
	if (r->state == HML_RX_POSTED || r->state == HML_RX_APP_CANCELED ||
	    (r->state == HML_RX_CANCELING && r->abandoned))
		hml_rx_free(r);
	else
		r->state = HML_RX_DONE;
	return keep;
}

static bool filter(struct hml_cqe *e)
{
	struct hml_rx *r = hml_rx_named(e->op_context);
	struct hml_rxq *q;
	bool keep;

	if (!r)
		return true;
	q = r->q;
	pthread_mutex_lock(&q->lock);
	keep = filter_one(q, r, e);
	pthread_mutex_unlock(&q->lock);
	return keep;
}

/* Receives whose sender stopped waiting for their cancel, which has come
 * since: back to the provider, or to what waits for them. */
static void orphans(struct hml_cq *cq)
{
	int n = __atomic_load_n(&cq->nrxqs, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&orphaned, __ATOMIC_ACQUIRE))
		return;
	for (int i = 0; i < n; i++) {
		struct hml_rxq *q = cq->rxqs[i];
		struct hml_rx *r;

		pthread_mutex_lock(&q->lock);
		while (!q->closed && (r = q->orphans)) {
			q->orphans = r->next;
			r->next = NULL;
			__atomic_sub_fetch(&orphaned, 1, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&q->lock);
			hml_rx_repost(q, r);
			pthread_mutex_lock(&q->lock);
		}
		pthread_mutex_unlock(&q->lock);
	}
}

/* The provider's error, with a copy of its error data: the provider's is
 * valid only until its CQ is read again. */
static bool read_err(struct hml_cq *c, struct hml_cqe *e)
{
	char data[256];
	/* Room for the entry of any API version: the provider fills what
	 * the application's has. */
	struct hml_cq_err buf = {
		.err_data = data, .err_data_size = sizeof(data),
		.src_addr = FI_ADDR_NOTAVAIL,
	};

	if (c->prov->readerr(c->cq, (struct fi_cq_err_entry *) &buf, 0) != 1)
		return false;
	*e = (struct hml_cqe) {
		.op_context = buf.op_context, .flags = buf.flags,
		.len = buf.len, .buf = buf.buf, .data = buf.data,
		.tag = buf.tag, .olen = buf.olen, .err = buf.err,
		.prov_errno = buf.prov_errno, .src_addr = buf.src_addr,
	};
	if (buf.err_data && buf.err_data_size &&
	    (e->err_data = malloc(buf.err_data_size))) {
		memcpy(e->err_data, buf.err_data, buf.err_data_size);
		e->err_data_size = buf.err_data_size;
	}
	return true;
}

/* Move what the provider has completed into the CQ's queue, past the
 * receive records. Under the pump lock, so that entries keep their order. */
void hml_rx_pump(struct hml_cq *c)
{
	char buf[PUMP_BATCH * sizeof(struct fi_cq_tagged_entry)];
	fi_addr_t src[PUMP_BATCH];
	struct hml_cqe e;
	size_t max;
	ssize_t n;

	hml_pump_lock(c);
	/* No more than the CQ's size waits in hmemloop. */
	max = hml_cq_room(c) < PUMP_BATCH ? hml_cq_room(c) : PUMP_BATCH;
	n = !max ? -FI_EAGAIN :
	    c->from ? c->prov->readfrom(c->cq, buf, max, src) :
		      c->prov->read(c->cq, buf, max);
	if (n == -FI_ENOSYS && c->from) {
		c->from = false;
		n = c->prov->read(c->cq, buf, max);
	}
	for (ssize_t i = 0; i < n; i++) {
		to_cqe(c, buf + i * c->entry_size, c->from ? src[i] :
		       FI_ADDR_NOTAVAIL, &e);
		if (filter(&e))
			hml_cq_push(c, &e);
	}
	if (n == -FI_EAVAIL && read_err(c, &e)) {
		if (filter(&e))
			hml_cq_push(c, &e);
		else
			free(e.err_data);
	}
	hml_pump_unlock(c);
	orphans(c);
}

/* Entries the provider returned in buf: those for records get the
 * application's context, swallowed ones are squeezed out. How many are
 * left. */
ssize_t hml_rx_filter(struct hml_cq *c, void *buf, ssize_t n, fi_addr_t *src)
{
	ssize_t kept = 0;
	struct hml_cqe e;

	for (ssize_t i = 0; i < n; i++) {
		char *entry = (char *) buf + i * c->entry_size;

		if (hml_rx_named(((struct fi_cq_entry *) entry)->op_context)) {
			to_cqe(c, entry, src ? src[i] : FI_ADDR_NOTAVAIL, &e);
			if (!filter(&e))
				continue;
			/* Every format starts with the context. */
			((struct fi_cq_entry *) entry)->op_context =
				e.op_context;
		}
		if (kept != i) {
			memmove((char *) buf + kept * c->entry_size, entry,
				c->entry_size);
			if (src)
				src[kept] = src[i];
		}
		kept++;
	}
	orphans(c);
	return kept;
}

/* From now on the receives of q complete here: read through the records.
 * Each side lists the other. False when either list is full. */
bool hml_rx_watch(struct hml_cq *c, struct hml_rxq *q)
{
	bool ok = true;
	int i;

	hml_pump_lock(c);
	pthread_mutex_lock(&q->lock);
	for (i = 0; i < c->nrxqs && c->rxqs[i] != q; i++)
		;
	if (i < c->nrxqs)
		goto out;
	if (c->nrxqs == HML_CQ_RXQS || q->ncqs == HML_CQ_RXQS) {
		ok = false;
		goto out;
	}
	q->cqs[q->ncqs++] = c;
	c->rxqs[c->nrxqs] = q;
	__atomic_store_n(&c->nrxqs, c->nrxqs + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&q->lock);
	hml_pump_unlock(c);
	return ok;
}

/* One of the two is closing: neither lists the other any more. */
void hml_rx_unwatch(struct hml_cq *c, struct hml_rxq *q)
{
	hml_pump_lock(c);
	pthread_mutex_lock(&q->lock);
	for (int i = 0; i < c->nrxqs; i++) {
		if (c->rxqs[i] == q) {
			c->rxqs[i] = c->rxqs[c->nrxqs - 1];
			__atomic_store_n(&c->nrxqs, c->nrxqs - 1,
					 __ATOMIC_RELEASE);
			break;
		}
	}
	for (int i = 0; i < q->ncqs; i++) {
		if (q->cqs[i] == c) {
			q->cqs[i] = q->cqs[--q->ncqs];
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	hml_pump_unlock(c);
}
