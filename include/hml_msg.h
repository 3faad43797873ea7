/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Messages between endpoints of this process. Once an endpoint is known
 * to be this process's (it is in an address vector of this process),
 * hmemloop records every receive posted on it, or on its shared receive
 * context, in the queue of that owner (rxq.c): in posting order, until the
 * receive completes. Every same-process message to the endpoint finds its
 * receive there, and only there (match.c): one matcher for host and
 * device messages alike. A receive the provider holds is taken back from
 * it first (takeback.c), and the message delivered into it (deliver.c).
 * A message no receive takes waits, staged in the queue, for the next one
 * posted, where FI_PEEK and FI_CLAIM find it (peek.c). recv.c has the
 * receive calls and the application's fi_cancel; filter.c passes the
 * provider's CQ entries through the records; track.c says which
 * endpoints' receives are recorded. None calls back up: recv.c, match.c
 * and peek.c call takeback.c, deliver.c and rxq.c; takeback.c calls
 * filter.c, which calls deliver.c (a receive given back) and rxq.c;
 * deliver.c calls rxq.c.
 *
 * What identifies a receive: its record (struct hml_rx). Every receive
 * hmemloop records is handed to the provider with the record's own
 * context (hml_rx.ctx, room for FI_CONTEXT and FI_CONTEXT2), never the
 * application's, so every entry the provider writes for it names the
 * record exactly, whatever the application's contexts are (shared, NULL,
 * or a send's too) and whatever the CQ's format. Records live in one
 * arena (rxq.c): an entry's context is the record's where it lies in the
 * arena, which costs a read of the provider's entries two comparisons; the
 * application's own contexts are never dereferenced. Each entry is given
 * back the application's context before any read returns it, and the
 * application's fi_cancel is mapped to the record's (hml_rx_cancel): to
 * the oldest live record with its context. A receive posted where no CQ
 * reports it (a receive counter alone, hml_rxq_unseen) is answered by the
 * provider's fi_cancel return alone.
 *
 * A directed untagged receive whose source is an endpoint of this process
 * is never given to the provider: only this process can fill it, and
 * libfabric 2.x crashes cancelling a directed untagged receive
 * (util_cancel_src in util_srx.c). hmemloop keeps it, fills it, and
 * completes the application's cancel of it. It never cancels a directed
 * untagged receive the provider holds.
 *
 * States (enum hml_rx_state), under the queue's lock: POSTING -> POSTED;
 * POSTED -> CANCELING (a sender takes it back) -> RECLAIMED, or back to
 * POSTED if the provider refuses or the receive is directed untagged;
 * POSTED -> APP_CANCELING (the application's fi_cancel is with the
 * provider) -> APP_CANCELED (its entry goes to the application), or back
 * to POSTED if the provider refuses; any of them -> DONE when the
 * provider's entry for it comes while someone else is busy with it, who
 * then frees it. KEPT receives stay KEPT until a sender or the
 * application's cancel unlinks them. Only POSTED and KEPT receives are
 * taken by senders or by the application's cancel; POSTING ones are
 * waited for. A record is linked (in posting order) from POSTING until it
 * is DONE, RECLAIMED, cancelled or taken. Where no CQ reports a queue's
 * receives (hml_rxq_unseen), the provider's fi_cancel return decides at
 * once: CANCELING -> RECLAIMED, or the record is dropped (completed
 * unseen); APP_CANCELING -> dropped.
 *
 * Lock order: track.c's share_lock, then a CQ's pump lock (filter.c),
 * then a queue's lock; a CQ's lock (its hmemloop entries) is never taken
 * under a queue's lock. No provider call is made under a queue's lock.
 */
#ifndef HML_MSG_H
#define HML_MSG_H

#include <sched.h>

#include "hml_av.h"
#include "hml_op.h"

enum {
	HML_UNTAGGED,
	HML_TAGGED,
};

enum hml_rx_state {
	HML_RX_POSTING,			/* being handed to the provider */
	HML_RX_POSTED,			/* the provider has it */
	HML_RX_CANCELING,		/* a sender is taking it back */
	HML_RX_RECLAIMED,		/* taken back: the sender's now */
	HML_RX_DONE,			/* completed by the provider */
	HML_RX_APP_CANCELING,		/* the application cancels it */
	HML_RX_APP_CANCELED,		/* its cancel is the application's */
	HML_RX_KEPT,			/* never given to the provider */
	HML_RX_HELD,			/* not given to the provider yet */
};

/* Buffers a record holds in itself; more are allocated. */
#define HML_RX_IOVS 4

/* A recorded receive: the provider holds it, or hmemloop keeps it. */
struct hml_rx {
	struct hml_rx *prev, *next;	/* posting order; NULL when unlinked */
	struct fi_context2 ctx;		/* the provider's context for it */
	struct hml_rxq *q;		/* its queue */
	struct fid_ep *fid;		/* the endpoint or SRX it was posted on */
	void *context;			/* the application's */
	uint64_t flags;
	fi_addr_t src;			/* for FI_DIRECTED_RECV */
	uint64_t tag, ignore;
	int tagged;
	int state;			/* enum hml_rx_state, under the lock */
	bool abandoned;			/* its sender stopped waiting */
	bool silent;			/* FI_COMPLETION added: swallow it */
	bool in_use;			/* multi-receive the provider fills */
	bool unclaimable;		/* the provider refused its cancel */
	bool stay;			/* taken back to go again in place */
	size_t used;			/* FI_MULTI_RECV: bytes taken */
	size_t min_multi;
	size_t count;
	struct iovec *iov;
	void **desc;
	struct iovec iov_in[HML_RX_IOVS];
	void *desc_in[HML_RX_IOVS];
};

/* A message as the receiver sees it. */
struct hml_msgin {
	uint64_t flags;			/* FI_REMOTE_CQ_DATA, if data */
	uint64_t data;
	uint64_t tag;
	fi_addr_t src;			/* the sender, in the receiver's AV */
};

/* A message from this process no receive was posted for yet. */
struct hml_unexp {
	struct hml_unexp *next;
	struct hml_ep *target;		/* the endpoint it was sent to */
	struct hml_msgin in;
	void *claim;			/* FI_CLAIM: the context it is kept for */
	struct hml_side side;		/* one buffer: the staged copy */
};

/* The receives of an endpoint or shared receive context. */
struct hml_rxq {
	pthread_mutex_t lock;
	struct hml_ep *owner;
	struct hml_av *av;		/* the one its directed receives name */
	uint64_t caps;
	uint64_t owner_rx_cq_flags;	/* FI_SELECTIVE_COMPLETION? */
	size_t min_multi_recv;
	bool no_cancel;			/* atomic: the provider cannot cancel */
	bool pass;			/* atomic: a CQ it completes on could
					 * not be watched: messages to it
					 * pass through */
	struct hml_rx posted[2];	/* list heads, by HML_(UN)TAGGED */
	struct hml_rx *free;		/* records to reuse */
	struct hml_unexp *unexp[2];	/* messages waiting, oldest first */
	struct hml_unexp **unexp_tail[2];
	struct hml_unexp *claimed;	/* FI_CLAIM: kept for a receive */
	size_t nunexp, max_unexp;	/* at most the owner's rx_size */
	bool closed;			/* its endpoint is closed */
	bool prov_msgs;			/* atomic: the provider may hold
					 * messages from this process */
	struct hml_rx *orphans;		/* taken back, sender gone */
	struct hml_cq *cqs[HML_CQ_RXQS];/* where its completions appear */
	int ncqs;
	size_t nheld;			/* hold.c: records HELD */
	struct hml_rxq *next_in_domain;	/* hold.c: its owner's domain's */
};

/* Where an endpoint's receives are posted: on itself, or on the shared
 * receive context bound to it. */
static inline struct hml_ep *hml_rx_owner(struct hml_ep *e)
{
	return e->base->srx ? e->base->srx : e->base;
}

static inline struct hml_rxq *hml_rxq_any(struct hml_ep *e)
{
	return __atomic_load_n(&hml_rx_owner(e)->rxq, __ATOMIC_ACQUIRE);
}

/* The queue of e's receives; NULL while messages to e pass through. */
static inline struct hml_rxq *hml_rxq_of(struct hml_ep *e)
{
	struct hml_rxq *q = hml_rxq_any(e);

	return q && !__atomic_load_n(&q->pass, __ATOMIC_RELAXED) ? q : NULL;
}

/* The provider cannot give the queue's receives back. */
static inline bool hml_rxq_no_cancel(const struct hml_rxq *q)
{
	return __atomic_load_n(&q->no_cancel, __ATOMIC_RELAXED);
}

/* The provider may hold what a message to the queue should match first:
 * receives posted before the queue was recorded, or messages of this
 * process it carried. */
static inline bool hml_rxq_early(const struct hml_rxq *q)
{
	return __atomic_load_n(&q->owner->early_rx, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&q->prov_msgs, __ATOMIC_RELAXED);
}

/* rxq.c: the queue and its records */
struct hml_rxq *hml_rxq_new(struct hml_ep *o, struct hml_ep *t);
void hml_rxq_destroy(struct hml_rxq *q);
bool hml_rxq_unseen(const struct hml_rxq *q);
struct hml_rx *hml_rx_new(struct hml_rxq *q, struct fid_ep *fid,
			  const struct fi_msg_tagged *m, uint64_t flags,
			  int tagged);
void hml_rx_free(struct hml_rx *r);
struct hml_rx *hml_rx_named(const void *ctx);
void hml_rx_link(struct hml_rxq *q, struct hml_rx *r);
void hml_rx_unlink(struct hml_rxq *q, struct hml_rx *r);
bool hml_rx_directed(const struct hml_rxq *q, const struct hml_rx *r);
bool hml_rx_matches(const struct hml_rxq *q, const struct hml_rx *r,
		    fi_addr_t src, uint64_t tag);
bool hml_rx_multi_left(const struct hml_rx *r);
ssize_t hml_rx_prov(struct hml_ep *o, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags, int tagged);
ssize_t hml_rx_post(struct hml_rxq *q, struct hml_rx *r);
ssize_t hml_rx_submit(struct hml_rxq *q, struct hml_rx *r);

/* hold.c: receives kept from the provider while no one can tell */

/* Capabilities whose calls hmemloop does not wrap: a domain opened with
 * them, or with an endpoint opened with them, holds no receive. */
#define HML_HOLD_NEVER (FI_ATOMIC | FI_COLLECTIVE)

void hml_hold_domain(struct hml_domain *d, const struct fi_info *info);
void hml_hold_caps(struct hml_domain *d, uint64_t caps);
void hml_hold_domain_fini(struct hml_domain *d);
bool hml_hold_may(const struct hml_rxq *q, uint64_t flags);
void hml_hold(struct hml_rxq *q, struct hml_rx *r);
void hml_hold_taken(struct hml_rxq *q, struct hml_rx *r);
void hml_hold_flush_all(struct hml_domain *d);
void hml_hold_flush_every(void);
void hml_hold_off(struct hml_domain *d, int delta);
void hml_hold_queue(struct hml_rxq *q, bool join);

/* Before a call that may drive the provider's progress on d: what d's
 * queues hold goes to the provider. A load where nothing is held. */
static inline void hml_hold_flush(struct hml_domain *d)
{
	if (d && __atomic_load_n(&d->held, __ATOMIC_SEQ_CST))
		hml_hold_flush_all(d);
}

/* rxq.c: messages staged until a receive comes */
struct hml_unexp *hml_rx_stage(struct hml_ep *t, const struct hml_side *src,
			       const struct hml_msgin *in, int *err);
void hml_rx_unstage(struct hml_unexp *u);
bool hml_rx_room(const struct hml_rxq *q);
bool hml_rx_hold(struct hml_rxq *q, struct hml_unexp *u, int tagged);
void hml_rxq_drop(struct hml_rxq *q, struct hml_ep *t);

/* deliver.c: a message into a receive */
int hml_rx_deliver(struct hml_ep *t, struct hml_rx *r,
		   const struct hml_side *src, const struct hml_msgin *in,
		   struct hml_op *op);
bool hml_rx_take_waiting(struct hml_rxq *q, struct hml_rx *r);
void hml_rx_repost(struct hml_rxq *q, struct hml_rx *r);

/* filter.c: the provider's entries through the records */

/* One reader of a CQ's provider entries at a time, so that a record's
 * entries are seen in the provider's order. Held for a provider read and
 * the records' pass over what it returned, a short while: a waiter
 * yields. A flag, not a mutex: every read of a CQ that records filter
 * takes it. */
static inline void hml_pump_lock(struct hml_cq *c)
{
	while (__atomic_exchange_n(&c->pumping, true, __ATOMIC_ACQUIRE))
		sched_yield();
}

static inline void hml_pump_unlock(struct hml_cq *c)
{
	__atomic_store_n(&c->pumping, false, __ATOMIC_RELEASE);
}

void hml_rx_pump(struct hml_cq *cq);
ssize_t hml_rx_filter(struct hml_cq *cq, void *buf, ssize_t n,
		      fi_addr_t *src);
bool hml_rx_watch(struct hml_cq *cq, struct hml_rxq *q);
void hml_rx_unwatch(struct hml_cq *cq, struct hml_rxq *q);

/* takeback.c: what a sender's fi_cancel of a receive came to */
enum hml_take {
	HML_WON,	/* the receive is the sender's */
	HML_LOST,	/* it completed first; the record is the sender's to free */
	HML_REFUSED,	/* the provider would not cancel it: try the next */
	HML_GAVE_UP,	/* no answer: the record is the filter's now */
	HML_BUSY,	/* a multi-receive buffer the provider is filling */
	HML_NO_CANCEL,	/* the provider cannot cancel receives */
	HML_UNSAFE,	/* directed untagged: libfabric 2.x crashes */
};

enum hml_take hml_rx_reclaim(struct hml_rxq *q, struct hml_rx *r,
			     struct hml_ep *t);
void hml_rx_requeue(struct hml_rxq *q, struct hml_rx *r, struct hml_ep *t);

/* match.c: a same-process message to q's owner, op's, whose initiator's
 * buffers are src; hold: stage it even where the provider may hold its
 * match. 0 with op completed (or in flight), a negative FI_E* code with
 * nothing reported, or HML_MSG_* for the router to decide again. */
#define HML_MSG_NO_CANCEL	1	/* the provider cannot give receives
					 * back */
#define HML_MSG_EARLY		2	/* no recorded receive takes it, and
					 * the provider may hold one */
ssize_t hml_msg_send(struct hml_op *op, struct hml_rxq *q,
		     const struct fi_msg_tagged *m, bool tagged,
		     const struct hml_side *src, bool hold);
fi_addr_t hml_msg_source(struct hml_ep *e, struct hml_ep *t);
void hml_rxq_passed(struct hml_rxq *q, int tagged,
		    const struct hml_msgin *in);

/* peek.c: FI_PEEK, FI_CLAIM and FI_DISCARD on q's staged messages; false
 * when the provider's to answer. */
bool hml_msg_peek(struct hml_ep *e, struct hml_rxq *q, struct fid_ep *fid,
		  const struct fi_msg_tagged *m, uint64_t flags, ssize_t *ret);

/* recv.c */
void hml_recv_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged);
ssize_t hml_rx_cancel(fid_t fid, void *context);

/* track.c */
void hml_rx_share(struct hml_ep *e);
void hml_rx_drop_target(struct hml_ep *t);
void hml_rxq_free(struct hml_rxq *q);

#endif
