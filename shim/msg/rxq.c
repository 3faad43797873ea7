/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The receive queue of an endpoint or shared receive context: the records
 * of the receives the shim tracks, in posting order and by the address of
 * their provider context, and the messages from this process that wait,
 * staged, for a receive. Delivering a message into a record, and giving a
 * record to the provider, are done here; the protocol that takes records
 * back from the provider is takeback.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_op.h"
#include "hml_stats.h"

#define BUCKETS 1024
/* Messages staged for an owner whose provider gives no rx_size. */
#define UNEXP_DEFAULT 1024

/* Do q's receives complete on no CQ, only on a receive counter? (An
 * SRX's complete on its endpoints' CQs.) */
bool hml_rxq_unseen(const struct hml_rxq *q)
{
	return q->owner->h.fid->fclass != FI_CLASS_SRX_CTX && !q->owner->rx_cq;
}

static struct hml_rx **bucket(struct hml_rxq *q, const void *ctx)
{
	return &q->by_ctx[((uintptr_t) ctx >> 6) % BUCKETS];
}

/* The live record a provider's context names, if it names one: compared
 * by address only, so an application's context is never read. */
struct hml_rx *hml_rx_named(struct hml_rxq *q, const void *ctx)
{
	struct hml_rx *r;

	for (r = *bucket(q, ctx); r && &r->ctx != ctx; r = r->hnext)
		;
	return r;
}

void hml_rx_link(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_rx *head = &q->posted[r->tagged];

	r->next = head;
	r->prev = head->prev;
	head->prev->next = r;
	head->prev = r;
	r->hnext = *bucket(q, &r->ctx);
	*bucket(q, &r->ctx) = r;
}

void hml_rx_unlink(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_rx **p;

	if (!r->next)
		return;
	r->prev->next = r->next;
	r->next->prev = r->prev;
	r->next = r->prev = NULL;
	for (p = bucket(q, &r->ctx); *p != r; p = &(*p)->hnext)
		;
	*p = r->hnext;
}

struct hml_rx *hml_rx_new(struct hml_rxq *q, struct fid_ep *fid,
			  const struct fi_msg_tagged *m, uint64_t flags,
			  int tagged)
{
	struct hml_rx *r = calloc(1, sizeof(*r) + m->iov_count *
				  (sizeof(struct iovec) + sizeof(void *)));

	if (!r)
		return NULL;
	r->fid = fid;
	r->context = m->context;
	r->flags = flags;
	r->src = m->addr;
	r->tag = m->tag;
	r->ignore = m->ignore;
	r->tagged = tagged;
	r->min_multi = q->min_multi_recv;
	/* A receive that completes without an entry would stay recorded
	 * for ever: ask for the entry, and swallow it (takeback.c). */
	if ((q->owner_rx_cq_flags & FI_SELECTIVE_COMPLETION) &&
	    !(flags & FI_COMPLETION)) {
		r->silent = true;
		r->flags |= FI_COMPLETION;
	}
	r->count = m->iov_count;
	r->iov = (struct iovec *) (r + 1);
	r->desc = (void **) (r->iov + r->count);
	memcpy(r->iov, m->msg_iov, r->count * sizeof(*r->iov));
	if (m->desc)
		memcpy(r->desc, m->desc, r->count * sizeof(*r->desc));
	return r;
}

/* Does a receive take messages from one source only? */
bool hml_rx_directed(const struct hml_rxq *q, const struct hml_rx *r)
{
	return (q->caps & FI_DIRECTED_RECV) && r->src != FI_ADDR_UNSPEC;
}

/* Does a receive take a message from src with tag? */
bool hml_rx_matches(const struct hml_rxq *q, const struct hml_rx *r,
		    fi_addr_t src, uint64_t tag)
{
	if (hml_rx_directed(q, r) && r->src != src)
		return false;
	return !r->tagged || !((r->tag ^ tag) & ~r->ignore);
}

bool hml_rx_multi_left(const struct hml_rx *r)
{
	return r->used < r->iov[0].iov_len &&
	       r->iov[0].iov_len - r->used >= r->min_multi;
}

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

ssize_t hml_rx_prov(struct hml_ep *o, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags, int tagged)
{
	if (tagged)
		return o->prov_tagged->recvmsg(fid, m, flags);
	return o->prov_msg->recvmsg(fid, &(struct fi_msg) {
		m->msg_iov, m->desc, m->iov_count, m->addr, m->context, 0 },
		flags);
}

/* Hand a receive to the provider, as the application asked for it (what
 * is left of it, for a multi-receive buffer), under the record's context. */
static ssize_t post_prov(struct hml_rxq *q, struct hml_rx *r)
{
	struct iovec left;
	struct fi_msg_tagged m = {
		.msg_iov = r->iov, .desc = r->desc, .iov_count = r->count,
		.addr = r->src, .tag = r->tag, .ignore = r->ignore,
		.context = &r->ctx,
	};

	if (r->used) {
		left.iov_base = (char *) r->iov[0].iov_base + r->used;
		left.iov_len = r->iov[0].iov_len - r->used;
		m.msg_iov = &left;
	}
	return hml_rx_prov(q->owner, r->fid, &m, r->flags, r->tagged);
}

static struct hml_unexp *take_unexp(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_unexp **p, *u;

	for (p = &q->unexp[r->tagged]; (u = *p); p = &u->next) {
		if (hml_rx_matches(q, r, u->in.src, u->in.tag)) {
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

	while ((u = take_unexp(q, r))) {
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

/* Give a receive to the provider, recorded: called with the queue locked,
 * returns with it unlocked. The record is linked before the provider has
 * the receive, so that no completion can come first; it is POSTING until
 * then, and no sender takes it. */
ssize_t hml_rx_post(struct hml_rxq *q, struct hml_rx *r)
{
	ssize_t ret;

	r->state = HML_RX_POSTING;
	hml_rx_link(q, r);
	pthread_mutex_unlock(&q->lock);

	ret = post_prov(q, r);

	pthread_mutex_lock(&q->lock);
	if (ret || r->state == HML_RX_DONE) {
		hml_rx_unlink(q, r);
		free(r);
	} else {
		r->state = HML_RX_POSTED;
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
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
		pthread_mutex_unlock(&q->lock);
		free(r);
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

/* A copy of a message no receive was posted for: device payloads wait in
 * device memory, on the sender's device. */
struct hml_unexp *hml_rx_stage(struct hml_ep *t, const struct hml_side *src,
			       const struct hml_msgin *in, int *err)
{
	struct hml_unexp *u = calloc(1, sizeof(*u));
	size_t size = src->len ? src->len : 1;
	void *buf = NULL;

	/* Out of memory to stage it: the sender is pushed back, as a
	 * provider out of buffers does. */
	*err = -FI_EAGAIN;
	if (!u)
		return NULL;
	u->target = t;
	u->in = *in;
	u->side.count = 1;
	u->side.len = src->len;
	u->side.mem[0] = (struct hml_mem) { .type = HML_MEM_HOST };
	if (src->device) {
		u->side.mem[0] = *hml_side_device(src);
		u->side.device = true;
		if (!hml_cuda_alloc(&u->side.mem[0], size, &buf)) {
			u->side.mem[0].start = (CUdeviceptr) (uintptr_t) buf;
			u->side.mem[0].end = u->side.mem[0].start + size;
			*err = 0;
		}
	} else if ((buf = malloc(size))) {
		*err = 0;
	}
	u->side.iov[0] = (struct iovec) { buf, src->len };
	if (!*err)
		*err = hml_move(&u->side, src, src->len, NULL);
	if (*err) {
		hml_rx_unstage(u);
		return NULL;
	}
	return u;
}

void hml_rx_unstage(struct hml_unexp *u)
{
	void *buf = u->side.iov[0].iov_base;

	if (u->side.device && buf)
		hml_cuda_free(&u->side.mem[0], buf);
	else
		free(buf);
	free(u);
}

/* May one more message wait? The queue is locked. As many as the owner
 * could take receives for: a provider's unexpected messages are bounded
 * too, and it pushes senders back with -FI_EAGAIN beyond. */
bool hml_rx_room(const struct hml_rxq *q)
{
	return q->nunexp < q->max_unexp;
}

/* Queue a staged message: the queue is locked, and has no posted receive
 * that matches it. False, and nothing queued, when it is full. */
bool hml_rx_hold(struct hml_rxq *q, struct hml_unexp *u, int tagged)
{
	if (!hml_rx_room(q))
		return false;
	*q->unexp_tail[tagged] = u;
	q->unexp_tail[tagged] = &u->next;
	q->nunexp++;
	HML_STAT(staged);
	return true;
}

struct hml_rxq *hml_rxq_new(struct hml_ep *o, struct hml_ep *t)
{
	struct hml_rxq *q = calloc(1, sizeof(*q));
	size_t min = 0, len = sizeof(min);

	if (!q || !(q->by_ctx = calloc(BUCKETS, sizeof(*q->by_ctx)))) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->owner = o;
	q->av = hml_ep_av(t->base);
	q->caps = t->base->caps;
	q->owner_rx_cq_flags = t->base->rx_cq_flags;
	for (int i = 0; i < 2; i++) {
		q->posted[i].next = q->posted[i].prev = &q->posted[i];
		q->unexp_tail[i] = &q->unexp[i];
	}
	q->max_unexp = o->rx_size ? o->rx_size :
		       t->base->rx_size ? t->base->rx_size : UNEXP_DEFAULT;
	/* Taking a multi-receive buffer, the shim releases it as the
	 * provider would: when less than this is left. */
	if (!fi_getopt(&o->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
		       &min, &len))
		q->min_multi_recv = min;
	return q;
}

/* Messages sent to t, which is closing, that wait in its shared receive
 * context are lost (fi_endpoint(3)). */
void hml_rxq_drop(struct hml_rxq *q, struct hml_ep *t)
{
	struct hml_unexp **p, *u, *gone = NULL;

	pthread_mutex_lock(&q->lock);
	for (int i = 0; i < 2; i++) {
		q->unexp_tail[i] = &q->unexp[i];
		for (p = &q->unexp[i]; (u = *p);) {
			if (u->target == t) {
				*p = u->next;
				u->next = gone;
				gone = u;
				q->nunexp--;
			} else {
				q->unexp_tail[i] = &u->next;
				p = &u->next;
			}
		}
	}
	pthread_mutex_unlock(&q->lock);
	while ((u = gone)) {
		gone = u->next;
		hml_rx_unstage(u);
	}
}

/* The queue, watched by no CQ any more, and all it holds. */
void hml_rxq_destroy(struct hml_rxq *q)
{
	struct hml_unexp *u;
	struct hml_rx *r;

	for (int i = 0; i < 2; i++) {
		while ((r = q->posted[i].next) != &q->posted[i]) {
			hml_rx_unlink(q, r);
			free(r);
		}
		/* fi_endpoint(3): messages not yet received are lost. */
		while ((u = q->unexp[i])) {
			q->unexp[i] = u->next;
			hml_rx_unstage(u);
		}
	}
	while ((r = q->orphans)) {
		q->orphans = r->next;
		free(r);
	}
	pthread_mutex_destroy(&q->lock);
	free(q->by_ctx);
	free(q);
}
