/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The receive queue of an endpoint or shared receive context: the records
 * of the receives hmemloop tracks, in posting order, how a record is
 * given to the provider, and the messages from this process that wait,
 * staged, for a receive. Records come from one arena, reserved once, so
 * that whether a provider's entry names one costs two comparisons
 * (hml_rx_named), and are reused, never given back.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hml_log.h"
#include "hml_msg.h"
#include "hml_stats.h"

/* Messages staged for an owner whose provider gives no rx_size. */
#define UNEXP_DEFAULT 1024

/* The arena: address space reserved once (4 million records), made
 * usable a chunk at a time. */
#define ARENA_SIZE (1UL << 30)
#define CHUNK (1UL << 20)
#define REFILL 64

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static char *arena;			/* atomic once set */
static size_t arena_used, arena_ready;
static struct hml_rx *arena_free;	/* records of destroyed queues */

/* Called with arena_lock held. */
static struct hml_rx *carve(void)
{
	struct hml_rx *r;

	if (!arena) {
		void *p = mmap(NULL, ARENA_SIZE, PROT_NONE, MAP_PRIVATE |
			       MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return NULL;
		__atomic_store_n(&arena, p, __ATOMIC_RELEASE);
	}
	if (arena_used + sizeof(*r) > arena_ready) {
		if (arena_ready + CHUNK > ARENA_SIZE ||
		    mprotect(arena + arena_ready, CHUNK,
			     PROT_READ | PROT_WRITE))
			return NULL;
		arena_ready += CHUNK;
	}
	r = (struct hml_rx *) (arena + arena_used);
	arena_used += sizeof(*r);
	return r;
}

/* Records for q's free list: q is locked. */
static void refill(struct hml_rxq *q)
{
	pthread_mutex_lock(&arena_lock);
	for (int i = 0; i < REFILL; i++) {
		struct hml_rx *r = arena_free;

		if (r)
			arena_free = r->next;
		else if (!(r = carve()))
			break;
		r->next = q->free;
		q->free = r;
	}
	pthread_mutex_unlock(&arena_lock);
}

/* The record a provider's context names, if it names one: an address
 * compared, the application's contexts never read. */
struct hml_rx *hml_rx_named(const void *ctx)
{
	const char *a = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t) ctx - (uintptr_t) a;

	if (!a || off >= ARENA_SIZE ||
	    off % sizeof(struct hml_rx) != offsetof(struct hml_rx, ctx))
		return NULL;
	return hml_container_of(ctx, struct hml_rx, ctx);
}

/* Do q's receives complete on no CQ, only on a receive counter? (An
 * SRX's complete on its endpoints' CQs.) */
bool hml_rxq_unseen(const struct hml_rxq *q)
{
	return q->owner->h.fid->fclass != FI_CLASS_SRX_CTX && !q->owner->rx_cq;
}

void hml_rx_link(struct hml_rxq *q, struct hml_rx *r)
{
	struct hml_rx *head = &q->posted[r->tagged];

	r->next = head;
	r->prev = head->prev;
	head->prev->next = r;
	head->prev = r;
}

void hml_rx_unlink(struct hml_rxq *q, struct hml_rx *r)
{
	(void) q;
	if (!r->next)
		return;
	r->prev->next = r->next;
	r->next->prev = r->prev;
	r->next = r->prev = NULL;
}

/* A record for a receive, or NULL where memory is out: q is locked. */
struct hml_rx *hml_rx_new(struct hml_rxq *q, struct fid_ep *fid,
			  const struct fi_msg_tagged *m, uint64_t flags,
			  int tagged)
{
	struct hml_rx *r;
	struct iovec *iov = NULL;

	if (m->iov_count > HML_RX_IOVS &&
	    !(iov = malloc(m->iov_count * (sizeof(*iov) + sizeof(void *)))))
		return NULL;
	if (!q->free)
		refill(q);
	if (!(r = q->free)) {
		free(iov);
		return NULL;
	}
	q->free = r->next;
	memset(r, 0, offsetof(struct hml_rx, iov_in));
	r->q = q;
	r->iov = iov ? iov : r->iov_in;
	r->desc = iov ? (void **) (iov + m->iov_count) : r->desc_in;
	r->fid = fid;
	r->context = m->context;
	r->flags = flags;
	r->src = m->addr;
	r->tag = m->tag;
	r->ignore = m->ignore;
	r->tagged = tagged;
	r->min_multi = q->min_multi_recv;
	/* A receive that completes without an entry would stay recorded
	 * for ever: ask for the entry, and swallow it (filter.c). */
	if ((q->owner_rx_cq_flags & FI_SELECTIVE_COMPLETION) &&
	    !(flags & FI_COMPLETION)) {
		r->silent = true;
		r->flags |= FI_COMPLETION;
	}
	r->count = m->iov_count;
	memcpy(r->iov, m->msg_iov, r->count * sizeof(*r->iov));
	if (m->desc)
		memcpy(r->desc, m->desc, r->count * sizeof(*r->desc));
	else
		memset(r->desc, 0, r->count * sizeof(*r->desc));
	return r;
}

/* A record done with, back to its queue's free list: its queue is
 * locked. */
void hml_rx_free(struct hml_rx *r)
{
	struct hml_rxq *q = r->q;

	if (r->iov != r->iov_in)
		free(r->iov);
	r->prev = NULL;
	r->next = q->free;
	q->free = r;
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

/* Give a receive to the provider, recorded: called with the queue locked,
 * returns with it unlocked. The record is linked before the provider has
 * the receive, so that it keeps its place; it is POSTING until then, and
 * no sender takes it. */
ssize_t hml_rx_post(struct hml_rxq *q, struct hml_rx *r)
{
	hml_rx_link(q, r);
	return hml_rx_submit(q, r);
}

/* The same for a record linked already (a held one keeps its place). */
ssize_t hml_rx_submit(struct hml_rxq *q, struct hml_rx *r)
{
	ssize_t ret;

	r->state = HML_RX_POSTING;
	pthread_mutex_unlock(&q->lock);

	ret = post_prov(q, r);

	pthread_mutex_lock(&q->lock);
	if (ret || r->state == HML_RX_DONE) {
		hml_rx_unlink(q, r);
		hml_rx_free(r);
	} else {
		r->state = HML_RX_POSTED;
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
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

/* Moves the messages sent to t from *p onto *gone; the new tail. */
static struct hml_unexp **drop_from(struct hml_unexp **p, struct hml_ep *t,
				    struct hml_unexp **gone, size_t *n)
{
	struct hml_unexp *u, **tail = p;

	while ((u = *p)) {
		if (u->target == t) {
			*p = u->next;
			u->next = *gone;
			*gone = u;
			(*n)++;
		} else {
			p = &u->next;
			tail = p;
		}
	}
	return tail;
}

/* Messages sent to t, which is closing, that wait in its shared receive
 * context are lost (fi_endpoint(3)). */
void hml_rxq_drop(struct hml_rxq *q, struct hml_ep *t)
{
	struct hml_unexp *u, *gone = NULL;
	size_t n = 0, claimed = 0;

	pthread_mutex_lock(&q->lock);
	for (int i = 0; i < 2; i++)
		q->unexp_tail[i] = drop_from(&q->unexp[i], t, &gone, &n);
	drop_from(&q->claimed, t, &gone, &claimed);
	q->nunexp -= n;
	pthread_mutex_unlock(&q->lock);
	while ((u = gone)) {
		gone = u->next;
		hml_rx_unstage(u);
	}
}

struct hml_rxq *hml_rxq_new(struct hml_ep *o, struct hml_ep *t)
{
	struct hml_rxq *q = calloc(1, sizeof(*q));
	size_t min = 0, len = sizeof(min);

	if (!q)
		return NULL;
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
	/* Taking a multi-receive buffer, hmemloop releases it as the
	 * provider would: when less than this is left. */
	if (!fi_getopt(&o->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
		       &min, &len))
		q->min_multi_recv = min;
	return q;
}

static void drop_records(struct hml_rx *r)
{
	while (r) {
		struct hml_rx *next = r->next;

		hml_rx_free(r);
		r = next;
	}
}

/* The queue, watched by no CQ any more, and all it holds; its records go
 * back to the arena. */
void hml_rxq_destroy(struct hml_rxq *q)
{
	struct hml_rx *r, *last;

	for (int i = 0; i < 2; i++) {
		while ((r = q->posted[i].next) != &q->posted[i]) {
			hml_rx_unlink(q, r);
			hml_rx_free(r);
		}
		/* fi_endpoint(3): messages not yet received are lost. */
		while (q->unexp[i]) {
			struct hml_unexp *u = q->unexp[i];

			q->unexp[i] = u->next;
			hml_rx_unstage(u);
		}
	}
	while (q->claimed) {
		struct hml_unexp *u = q->claimed;

		q->claimed = u->next;
		hml_rx_unstage(u);
	}
	drop_records(q->orphans);
	q->orphans = NULL;
	if ((r = q->free)) {
		for (last = r; last->next; last = last->next)
			;
		pthread_mutex_lock(&arena_lock);
		last->next = arena_free;
		arena_free = r;
		pthread_mutex_unlock(&arena_lock);
	}
	pthread_mutex_destroy(&q->lock);
	free(q);
}
