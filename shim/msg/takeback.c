/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The take-back: how a record the provider holds comes back to the shim.
 *
 * A sender takes a receive back with fi_cancel under the record's context
 * (hml_rx_reclaim). util providers' fi_cancel returns 0 whether or not it
 * found the receive, so the answer is in the CQ the receive completes on:
 * the cancel's FI_ECANCELED (the receive is the sender's), or the
 * receive's own completion (a message from elsewhere got there first).
 * While it waits, the sender pumps those CQs: the pump reads the
 * provider's entries and passes each through the records of the queues
 * whose receives complete there (filter), which retires completed
 * records, gives entries the application's contexts back and swallows the
 * cancels the shim asked for. A CQ that has such queues (hml_rx_watch) is
 * read only through the pump (cq.c). A record whose sender stopped
 * waiting is given back to the provider when its cancel comes (orphans).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hml_log.h"
#include "hml_msg.h"

#define PUMP_BATCH 16

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

/* An entry in the CQ's format, as the shim keeps entries. */
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

/*
 * An entry the provider wrote for one of the queue's receives, if its
 * context names one: it gets the application's context back, and the
 * receive is done, unless it is a multi-receive buffer not yet released,
 * or this is the cancel a sender asked for, which the application never
 * sees. False when the entry is swallowed.
 */
static bool filter_one(struct hml_rxq *q, struct hml_cqe *e)
{
	struct hml_rx *r = hml_rx_named(q, e->op_context);
	bool keep;

	if (!r)
		return true;
	e->op_context = r->context;
	if (e->err == FI_ECANCELED && r->state == HML_RX_CANCELING) {
		hml_rx_unlink(q, r);
		r->state = HML_RX_RECLAIMED;
		if (r->abandoned) {
			r->next = q->orphans;
			q->orphans = r;
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
		free(r);
	else
		r->state = HML_RX_DONE;
	return keep;
}

static bool filter(struct hml_cq *cq, struct hml_cqe *e)
{
	int n = __atomic_load_n(&cq->nrxqs, __ATOMIC_ACQUIRE);
	bool keep = true;

	for (int i = 0; keep && i < n; i++) {
		struct hml_rxq *q = cq->rxqs[i];

		pthread_mutex_lock(&q->lock);
		keep = filter_one(q, e);
		pthread_mutex_unlock(&q->lock);
	}
	return keep;
}

/* Receives whose sender stopped waiting for their cancel, which has come
 * since: back to the provider, or to what waits for them. */
static void orphans(struct hml_cq *cq)
{
	int n = __atomic_load_n(&cq->nrxqs, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++) {
		struct hml_rxq *q = cq->rxqs[i];
		struct hml_rx *r;

		pthread_mutex_lock(&q->lock);
		while (!q->closed && (r = q->orphans)) {
			q->orphans = r->next;
			r->next = NULL;
			pthread_mutex_unlock(&q->lock);
			hml_rx_repost(q, r);
			pthread_mutex_lock(&q->lock);
		}
		pthread_mutex_unlock(&q->lock);
	}
}

/* Move what the provider has completed into the shim's queue, past the
 * receive records. Under pump_lock, so that entries keep their order. */
void hml_rx_pump(struct hml_cq *c)
{
	char buf[PUMP_BATCH * sizeof(struct fi_cq_tagged_entry)];
	fi_addr_t src[PUMP_BATCH];
	struct hml_cqe e;
	size_t max;
	ssize_t n;

	pthread_mutex_lock(&c->pump_lock);
	/* No more than the CQ's size waits in the shim. */
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
		if (filter(c, &e))
			hml_cq_push(c, &e);
	}
	if (n == -FI_EAVAIL && read_err(c, &e)) {
		if (filter(c, &e))
			hml_cq_push(c, &e);
		else
			free(e.err_data);
	}
	pthread_mutex_unlock(&c->pump_lock);
	orphans(c);
}

/* Entries the provider's sread returned directly: the records see them,
 * give them the application's contexts, and swallowed ones are squeezed
 * out. */
ssize_t hml_rx_refilter(struct hml_cq *c, void *buf, ssize_t n,
			fi_addr_t *src)
{
	ssize_t kept = 0;
	struct hml_cqe e;

	for (ssize_t i = 0; i < n; i++) {
		char *entry = (char *) buf + i * c->entry_size;

		to_cqe(c, entry, src ? src[i] : FI_ADDR_NOTAVAIL, &e);
		if (!filter(c, &e))
			continue;
		/* The application's context: every format starts with it. */
		((struct fi_cq_entry *) entry)->op_context = e.op_context;
		memmove((char *) buf + kept * c->entry_size, entry,
			c->entry_size);
		if (src)
			src[kept] = src[i];
		kept++;
	}
	orphans(c);
	return kept;
}

/* From now on the receives of q complete here: read through the shim. Each
 * side lists the other. False when either list is full. */
bool hml_rx_watch(struct hml_cq *c, struct hml_rxq *q)
{
	bool ok = true;
	int i;

	pthread_mutex_lock(&c->pump_lock);
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
	pthread_mutex_unlock(&c->pump_lock);
	return ok;
}

/* One of the two is closing: neither lists the other any more. */
void hml_rx_unwatch(struct hml_cq *c, struct hml_rxq *q)
{
	pthread_mutex_lock(&c->pump_lock);
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
	pthread_mutex_unlock(&c->pump_lock);
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
	for (int i = 0; i < n; i++) {
		hml_rx_pump(cqs[i]);
		orphans(cqs[i]);
	}
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
		if (ret == -FI_ENOSYS)
			q->no_cancel = true;
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
