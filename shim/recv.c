/*
 * Receives. A message from this process must land in a receive the
 * application posted, and the provider holds those. So once an endpoint is
 * in an address vector of this process, the shim records every receive
 * posted on it (or on its shared receive context), in posting order, until
 * its completion is read; the provider holds each under the record's own
 * context (hml_msg.h says why). A message from this process takes the
 * first matching receive back from the provider with fi_cancel (msg.c), or
 * waits here, staged, until a matching one is posted. A directed untagged
 * receive for an endpoint of this process is kept here, never given to
 * the provider.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "hml_log.h"
#include "hml_msg.h"

#define BUCKETS 1024
/* Messages staged for an owner whose provider gives no rx_size. */
#define UNEXP_DEFAULT 1024

/* Guards the lists of endpoints sharing a receive context; taken before
 * any CQ's or queue's lock. */
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;

static struct hml_ep *msg_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->msg, struct hml_ep, msg.ops);
}

static struct hml_ep *tagged_ep(struct fid_ep *ep)
{
	return hml_container_of(ep->tagged, struct hml_ep, tagged.ops);
}

/* Where an endpoint's receives are posted: on itself, or on the shared
 * receive context bound to it. */
static struct hml_ep *hml_rx_owner(struct hml_ep *e)
{
	return e->base->srx ? e->base->srx : e->base;
}

static struct hml_rxq *rxq_any(struct hml_ep *e)
{
	return __atomic_load_n(&hml_rx_owner(e)->rxq, __ATOMIC_ACQUIRE);
}

/* The queue of e's receives; NULL while messages to e pass through. */
struct hml_rxq *hml_rxq_of(struct hml_ep *e)
{
	struct hml_rxq *q = rxq_any(e);

	return q && !__atomic_load_n(&q->pass, __ATOMIC_RELAXED) ? q : NULL;
}

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
static struct hml_rx *rx_named(struct hml_rxq *q, const void *ctx)
{
	struct hml_rx *r;

	for (r = *bucket(q, ctx); r && &r->ctx != ctx; r = r->hnext)
		;
	return r;
}

static void link_rx(struct hml_rxq *q, struct hml_rx *r)
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

static struct hml_rx *rx_new(struct hml_rxq *q, struct fid_ep *fid,
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
	 * for ever: ask for the entry, and swallow it (filter_one). */
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
 * the message was sent to. A message longer than the receive is cut, and
 * the receive says so (FI_ETRUNC). A multi-receive buffer takes it at its
 * first free byte and is released (FI_MULTI_RECV) once what is left is
 * below the minimum. Returns the copy's error, which the sender shares.
 */
int hml_rx_deliver(struct hml_ep *t, struct hml_rx *r,
		   const struct hml_side *src, const struct hml_msgin *in)
{
	struct hml_ep *b = t->base;
	bool multi = r->flags & FI_MULTI_RECV;
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
		err = hml_move(&dst, src, c.len);
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
	/* A multi-receive buffer's release is always reported (fi_msg(3)). */
	if (b->rx_cq && (c.err || (c.flags & FI_MULTI_RECV) ||
			 !(b->rx_cq_flags & FI_SELECTIVE_COMPLETION) ||
			 ((r->flags & FI_COMPLETION) && !r->silent)))
		hml_cq_push(b->rx_cq, &c);
	hml_cntr_bump(b->cntr[HML_CNTR_RECV], c.len, c.err);
	return err;
}

static ssize_t prov_recvmsg(struct hml_ep *o, struct fid_ep *fid,
			    const struct fi_msg_tagged *m, uint64_t flags,
			    int tagged)
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
	return prov_recvmsg(q->owner, r->fid, &m, r->flags, r->tagged);
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
static bool take_waiting(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_unexp *u;

	while ((u = take_unexp(q, r))) {
		pthread_mutex_unlock(&q->lock);
		hml_rx_deliver(u->target, r, &u->side, &u->in);
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
static ssize_t post_locked(struct hml_rxq *q, struct hml_rx *r)
{
	ssize_t ret;

	r->state = HML_RX_POSTING;
	link_rx(q, r);
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

/* A receive the shim does not record: should the endpoint be tracked
 * later, messages from this process must not wait for a recorded receive
 * while the provider may hold a matching one (msg.c). A store once. */
static struct hml_ep *untracked(struct hml_ep *o)
{
	if (!__atomic_load_n(&o->early_rx, __ATOMIC_RELAXED))
		__atomic_store_n(&o->early_rx, true, __ATOMIC_RELAXED);
	return o;
}

/* A directed untagged receive for an endpoint of this process whose sends
 * all come through the shim (msg.c passes none to the provider). */
static bool keep(struct hml_rxq *q, const struct hml_rx *r)
{
	struct hml_ep *s;

	if (r->tagged || !hml_rx_directed(q, r) || !q->av)
		return false;
	s = hml_av_target(q->av, r->src);
	return s && !s->base->opaque && !s->base->cuda_forbidden &&
	       !q->owner->base->cuda_forbidden;
}

static ssize_t post(struct hml_rxq *q, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags, int tagged)
{
	struct hml_rx *r = rx_new(q, fid, m, flags, tagged);

	if (!r) {
		hml_warn("out of memory: a receive (context %p) is not "
			 "recorded; a same-process message cannot take it",
			 m->context);
		/* Unrecorded, so under the application's own context. */
		return prov_recvmsg(untracked(q->owner), fid, m, flags,
				    tagged);
	}
	pthread_mutex_lock(&q->lock);
	if (!take_waiting(q, r)) {
		pthread_mutex_unlock(&q->lock);
		free(r);
		return 0;
	}
	if (keep(q, r)) {
		r->state = HML_RX_KEPT;
		link_rx(q, r);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	return post_locked(q, r);
}

/* A receive taken back for a sender that gave up waiting for the cancel, or
 * a multi-receive buffer with room left: it goes to what waits for it, or
 * back to the provider (or, kept, to the end of the queue). */
void hml_rx_repost(struct hml_rxq *q, struct hml_rx *r)
{
	void *context = r->context;

	pthread_mutex_lock(&q->lock);
	r->abandoned = false;
	if (!take_waiting(q, r)) {
		pthread_mutex_unlock(&q->lock);
		free(r);
		return;
	}
	if (r->state == HML_RX_KEPT) {
		link_rx(q, r);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	if (post_locked(q, r))
		hml_warn("a receive (context %p) taken back from the provider "
			 "could not be given back: it will not complete",
			 context);
}

void hml_rx_orphans(struct hml_cq *cq)
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
		if (!hml_cuda_alloc(&u->side.mem[0], size, &buf))
			*err = 0;
	} else if ((buf = malloc(size))) {
		*err = 0;
	}
	u->side.iov[0] = (struct iovec) { buf, src->len };
	if (!*err)
		*err = hml_move(&u->side, src, src->len);
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
	return true;
}

/* The receive wrappers: for an endpoint that is in no address vector of
 * this process, two loads more than the provider's call. The message is
 * put in fi_msg_tagged form only for one that is. */
#define RECV(e, table, fid, flags, tagged, call, ...) ({		\
	struct hml_rxq *q_ = hml_rxq_of(e);				\
	!q_ ? untracked(hml_rx_owner(e))->prov_##table->call :		\
	      post(q_, fid, &(struct fi_msg_tagged) { __VA_ARGS__ },	\
		   flags, tagged); })

static ssize_t hml_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, e->rx_op_flags, HML_UNTAGGED,
		    recv(ep, buf, len, desc, src, ctx),
		    HML_IOV(buf, len), &desc, 1, src, 0, 0, ctx, 0);
}

static ssize_t hml_recvv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t src, void *ctx)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, e->rx_op_flags, HML_UNTAGGED,
		    recvv(ep, iov, desc, count, src, ctx),
		    iov, desc, count, src, 0, 0, ctx, 0);
}

static ssize_t hml_recvmsg(struct fid_ep *ep, const struct fi_msg *msg,
			   uint64_t flags)
{
	struct hml_ep *e = msg_ep(ep);

	return RECV(e, msg, ep, flags, HML_UNTAGGED, recvmsg(ep, msg, flags),
		    msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0, 0,
		    msg->context, 0);
}

static ssize_t hml_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			 fi_addr_t src, uint64_t tag, uint64_t ignore,
			 void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);

	return RECV(e, tagged, ep, e->rx_op_flags, HML_TAGGED,
		    recv(ep, buf, len, desc, src, tag, ignore, ctx),
		    HML_IOV(buf, len), &desc, 1, src, tag, ignore, ctx, 0);
}

static ssize_t hml_trecvv(struct fid_ep *ep, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t src,
			  uint64_t tag, uint64_t ignore, void *ctx)
{
	struct hml_ep *e = tagged_ep(ep);

	return RECV(e, tagged, ep, e->rx_op_flags, HML_TAGGED,
		    recvv(ep, iov, desc, count, src, tag, ignore, ctx),
		    iov, desc, count, src, tag, ignore, ctx, 0);
}

/* FI_PEEK, FI_CLAIM and FI_DISCARD ask the provider about the messages it
 * holds: they pass through, and do not see the shim's. */
static ssize_t hml_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			    uint64_t flags)
{
	struct hml_ep *e = tagged_ep(ep);

	if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD))
		return hml_rx_owner(e)->prov_tagged->recvmsg(ep, msg, flags);
	return RECV(e, tagged, ep, flags, HML_TAGGED, recvmsg(ep, msg, flags),
		    msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
		    msg->tag, msg->ignore, msg->context, 0);
}

void hml_recv_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged)
{
	if (msg) {
		hml_table_set(msg, recv, hml_recv);
		hml_table_set(msg, recvv, hml_recvv);
		hml_table_set(msg, recvmsg, hml_recvmsg);
	}
	if (tagged) {
		hml_table_set(tagged, recv, hml_trecv);
		hml_table_set(tagged, recvv, hml_trecvv);
		hml_table_set(tagged, recvmsg, hml_trecvmsg);
	}
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
	struct hml_rx *r = rx_named(q, e->op_context);
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

bool hml_rx_filter(struct hml_cq *cq, struct hml_cqe *e)
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

static struct hml_rxq *rxq_new(struct hml_ep *o, struct hml_ep *t)
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

/* A CQ t's receives complete on is read through q's records, or, where
 * it cannot be, messages to q pass through. */
static void watch(struct hml_rxq *q, struct hml_ep *t)
{
	if (t->base->rx_cq && !hml_cq_watch(t->base->rx_cq, q) &&
	    !__atomic_exchange_n(&q->pass, true, __ATOMIC_RELAXED))
		hml_warn("endpoint %p: its CQ serves %d tracked endpoints, or "
			 "its shared receive context %d CQs: same-process "
			 "messages to it pass through", t->ep, HML_CQ_RXQS,
			 HML_CQ_RXQS);
}

/* The first receive posted with the application's context that no sender
 * is taking; *busy if it is still being handed to the provider. Rare:
 * a walk. */
static struct hml_rx *app_rx(struct hml_rxq *q, void *context, bool *busy)
{
	for (int i = 0; i < 2; i++) {
		struct hml_rx *head = &q->posted[i];

		for (struct hml_rx *r = head->next; r != head; r = r->next) {
			if (r->context != context ||
			    (r->state != HML_RX_POSTED &&
			     r->state != HML_RX_POSTING &&
			     r->state != HML_RX_KEPT))
				continue;
			*busy = r->state == HML_RX_POSTING;
			return r;
		}
	}
	return NULL;
}

/* A kept receive the application cancels, unlinked: completed with
 * FI_ECANCELED as util providers complete one they hold. */
static void cancel_kept(struct hml_rx *r, struct hml_cq *cq)
{
	struct hml_cqe c = {
		.op_context = r->context,
		.flags = FI_MSG | FI_RECV | (r->flags & FI_MULTI_RECV),
		.src_addr = FI_ADDR_NOTAVAIL,
		.err = FI_ECANCELED,
		.prov_errno = -FI_ECANCELED,
	};

	if (cq)
		hml_cq_push(cq, &c);
	free(r);
}

/*
 * fi_cancel. A recorded receive the provider knows by its record's
 * context: the application's is mapped to it, senders leave the receive
 * alone from then on, and the FI_ECANCELED entry reaches the application
 * with its own context (filter_one). A kept receive the provider never
 * saw is cancelled here. Any other context (a send's, a receive the shim
 * did not record) is the provider's to find.
 */
ssize_t hml_rx_cancel(fid_t fid, void *context)
{
	struct fid_ep *ep = hml_container_of(fid, struct fid_ep, fid);
	struct hml_ep *e = hml_container_of(ep->ops, struct hml_ep, ops.ops);
	struct hml_rxq *q = rxq_any(e);
	struct hml_cq *cq;
	struct hml_rx *r;
	bool busy = false;
	ssize_t ret;

	if (!q)
		return e->prov_ops->cancel(fid, context);
	pthread_mutex_lock(&q->lock);
	while ((r = app_rx(q, context, &busy)) && busy) {
		pthread_mutex_unlock(&q->lock);
		sched_yield();
		pthread_mutex_lock(&q->lock);
	}
	if (!r) {
		pthread_mutex_unlock(&q->lock);
		return e->prov_ops->cancel(fid, context);
	}
	if (r->state == HML_RX_KEPT) {
		hml_rx_unlink(q, r);
		cq = q->ncqs ? q->cqs[0] : NULL;
		pthread_mutex_unlock(&q->lock);
		cancel_kept(r, cq);
		return 0;
	}
	r->state = HML_RX_APP_CANCELING;
	pthread_mutex_unlock(&q->lock);

	ret = e->prov_ops->cancel(fid, &r->ctx);

	pthread_mutex_lock(&q->lock);
	if (r->state == HML_RX_DONE) {
		free(r);
	} else if (hml_rxq_unseen(q)) {
		/* No CQ will say more: cancelled or completed unseen, it is
		 * gone from the provider. */
		hml_rx_unlink(q, r);
		free(r);
	} else {
		r->state = ret ? HML_RX_POSTED : HML_RX_APP_CANCELED;
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

/*
 * Start recording the receives of an endpoint that is now in an address
 * vector of this process. The CQs they may complete on are watched before
 * the queue is published, so that no receive goes to the provider under
 * the shim's context before those CQs' entries pass the records: for a
 * shared receive context, the CQs of every endpoint enabled on it, in an
 * address vector or not.
 */
void hml_rx_track(struct hml_ep *t)
{
	struct hml_ep *o = hml_rx_owner(t);
	struct hml_rxq *q;

	pthread_mutex_lock(&share_lock);
	q = rxq_any(t);
	if (!q && (q = rxq_new(o, t))) {
		for (struct hml_ep *s = o->sharers; s; s = s->share_next)
			watch(q, s);
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
	if ((q = rxq_any(e)))
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
	struct hml_rxq *q = t->base->srx ? rxq_any(t) : NULL;
	struct hml_unexp **p, *u, *gone = NULL;

	if (t->base->srx)
		leave_srx(t);
	if (!q)
		return;
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

void hml_rxq_free(struct hml_rxq *q)
{
	struct hml_unexp *u;
	struct hml_rx *r;

	if (!q)
		return;
	/* Entries the provider wrote before the endpoint closed get their
	 * application's contexts while the records are there to say. */
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < q->ncqs; i++)
		hml_cq_pump(q->cqs[i]);
	while (q->ncqs)
		hml_cq_unwatch(q->cqs[0], q);
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
