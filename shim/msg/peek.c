/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_PEEK, FI_CLAIM and FI_DISCARD (fi_tagged(3)) on the messages from
 * this process that wait, staged, for a receive: a peek finds them as it
 * finds the provider's unexpected messages, a claim keeps one for the
 * receive that names the peek's context, a discard drops it. What hmemloop
 * does not hold is the provider's to answer: messages from other
 * processes, and FI_ENOMSG.
 */
#include "hml_log.h"
#include "hml_msg.h"

/* The first staged tagged message a peek of m takes: *p points at it. */
static struct hml_unexp **find(struct hml_rxq *q,
			       const struct fi_msg_tagged *m)
{
	struct hml_rx want = {
		.src = m->addr, .tag = m->tag, .ignore = m->ignore,
		.tagged = HML_TAGGED,
	};
	struct hml_unexp **p;

	for (p = &q->unexp[HML_TAGGED]; *p; p = &(*p)->next)
		if (hml_rx_matches(q, &want, (*p)->in.src, (*p)->in.tag))
			return p;
	return NULL;
}

/* The message claimed for context: *p points at it. */
static struct hml_unexp **claimed(struct hml_rxq *q, void *context)
{
	struct hml_unexp **p;

	for (p = &q->claimed; *p; p = &(*p)->next)
		if ((*p)->claim == context)
			return p;
	return NULL;
}

/* Take *p out of the waiting list; the queue is locked. */
static struct hml_unexp *unqueue(struct hml_rxq *q, struct hml_unexp **p)
{
	struct hml_unexp *u = *p;

	*p = u->next;
	if (q->unexp_tail[HML_TAGGED] == &u->next)
		q->unexp_tail[HML_TAGGED] = p;
	q->nunexp--;
	u->next = NULL;
	return u;
}

/* A peek's entry, and a discard's: the message's length, data and tag,
 * no buffer. */
static void report(struct hml_ep *e, void *context, const struct hml_unexp *u)
{
	struct hml_cqe c = {
		.op_context = context,
		.flags = FI_TAGGED | FI_RECV |
			 (u->in.flags & FI_REMOTE_CQ_DATA),
		.len = u->side.len,
		.data = u->in.data,
		.tag = u->in.tag,
		.src_addr = u->in.src,
	};

	hml_cq_push(e->base->rx_cq, &c);
}

/* A claimed message into the buffers of the receive that claims it, or,
 * with FI_DISCARD, dropped. */
static void receive(struct hml_ep *e, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags,
		    struct hml_unexp *u)
{
	struct hml_rx r = {
		.fid = fid,
		.context = m->context,
		.flags = flags & ~(uint64_t) FI_CLAIM,
		.tagged = HML_TAGGED,
		.count = m->iov_count,
		.iov = (struct iovec *) m->msg_iov,
		.desc = m->desc,
	};

	if (flags & FI_DISCARD)
		report(e, m->context, u);
	else
		hml_rx_deliver(e, &r, &u->side, &u->in, NULL);
	hml_rx_unstage(u);
}

bool hml_msg_peek(struct hml_ep *e, struct hml_rxq *q, struct fid_ep *fid,
		  const struct fi_msg_tagged *m, uint64_t flags, ssize_t *ret)
{
	struct hml_unexp **p, *u = NULL;

	if (!e->base->rx_cq || !(flags & (FI_PEEK | FI_CLAIM)))
		return false;
	pthread_mutex_lock(&q->lock);
	if (flags & FI_PEEK) {
		p = find(q, m);
		if (p) {
			report(e, m->context, *p);
			if (flags & (FI_CLAIM | FI_DISCARD)) {
				u = unqueue(q, p);
				u->claim = m->context;
				if (flags & FI_CLAIM) {
					u->next = q->claimed;
					q->claimed = u;
					u = NULL;
				}
			}
		}
	} else if ((p = claimed(q, m->context))) {
		u = *p;
		*p = u->next;
		pthread_mutex_unlock(&q->lock);
		receive(e, fid, m, flags, u);
		*ret = 0;
		return true;
	}
	pthread_mutex_unlock(&q->lock);
	if (u)
		hml_rx_unstage(u);
	*ret = 0;
	return p != NULL;
}
