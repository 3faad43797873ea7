/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Messages between endpoints of this process. The send side (msg.c,
 * reached through send.c's calls) brings a message to a receive the
 * application posted; the receive side (recv.c) records those receives
 * and maps the application's fi_cancel; the receive queue (rxq.c) holds
 * the records and the messages staged for them; the take-back
 * (takeback.c) gets a receive back from the provider and reads the CQs
 * its receives complete on; track.c says which endpoints' receives are
 * recorded. None calls back up: send.c calls msg.c; msg.c, recv.c and
 * track.c call takeback.c and rxq.c, takeback.c calls rxq.c, cq.c calls
 * takeback.c, and rxq.c calls none of them.
 *
 * What identifies a receive: its record (struct hml_rx). Every receive the
 * shim records is handed to the provider with the record's own context
 * (hml_rx.ctx, room for FI_CONTEXT and FI_CONTEXT2), never the
 * application's, so every entry the provider writes for it names the
 * record exactly, whatever the application's contexts are (shared, NULL,
 * or a send's too) and whatever the CQ's format. An entry's context is
 * looked up by address among the live records of the queues whose
 * receives complete on that CQ; the application's own contexts are never
 * dereferenced. Each entry is given back the application's context before
 * any read returns it, and the application's fi_cancel is mapped to the
 * record's (hml_rx_cancel): to the oldest live record with its context.
 * A receive posted where no CQ reports it (a receive counter alone,
 * hml_rxq_unseen) is answered by the provider's fi_cancel return alone.
 *
 * A directed untagged receive whose source is an endpoint of this process
 * is never given to the provider: only this process can fill it, and
 * libfabric 2.x crashes cancelling a directed untagged receive
 * (util_cancel_src in util_srx.c). The shim keeps it, fills it, and
 * completes the application's cancel of it. The shim never cancels a
 * directed untagged receive the provider holds.
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
 * waited for. A record is linked (in posting order and by &ctx) from
 * POSTING until it is DONE, RECLAIMED, cancelled or taken. Where no CQ
 * reports a queue's receives (hml_rxq_unseen), the provider's fi_cancel
 * return decides at once: CANCELING -> RECLAIMED, or the record is
 * dropped (completed unseen); APP_CANCELING -> dropped.
 *
 * Lock order: track.c's share_lock, then a CQ's pump_lock (takeback.c),
 * then a queue's lock; a CQ's lock (its shim entries) is never taken under
 * a queue's lock. No provider call is made under a queue's lock.
 */
#ifndef HML_MSG_H
#define HML_MSG_H

#include "hml_xfer.h"

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
};

/* A recorded receive: the provider holds it, or the shim keeps it. */
struct hml_rx {
	struct hml_rx *prev, *next;	/* posting order; NULL when unlinked */
	struct hml_rx *hnext;		/* by ctx's address */
	struct fi_context2 ctx;		/* the provider's context for it */
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
	size_t used;			/* FI_MULTI_RECV: bytes taken */
	size_t min_multi;
	size_t count;
	struct iovec *iov;
	void **desc;
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
	bool no_cancel;
	bool pass;			/* atomic: a CQ it completes on could
					 * not be watched: messages to it
					 * pass through */
	struct hml_rx posted[2];	/* list heads, by HML_(UN)TAGGED */
	struct hml_rx **by_ctx;		/* live records, by &ctx */
	struct hml_unexp *unexp[2];	/* messages waiting, oldest first */
	struct hml_unexp **unexp_tail[2];
	size_t nunexp, max_unexp;	/* at most the owner's rx_size */
	bool closed;			/* its endpoint is closed */
	bool prov_msgs;			/* the provider may hold messages
					 * from this process (msg.c) */
	struct hml_rx *orphans;		/* taken back, sender gone */
	struct hml_cq *cqs[HML_CQ_RXQS];/* where its completions appear */
	int ncqs;
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

/* rxq.c: the queue */
struct hml_rxq *hml_rxq_new(struct hml_ep *o, struct hml_ep *t);
void hml_rxq_destroy(struct hml_rxq *q);
bool hml_rxq_unseen(const struct hml_rxq *q);
struct hml_rx *hml_rx_new(struct hml_rxq *q, struct fid_ep *fid,
			  const struct fi_msg_tagged *m, uint64_t flags,
			  int tagged);
void hml_rx_link(struct hml_rxq *q, struct hml_rx *r);
void hml_rx_unlink(struct hml_rxq *q, struct hml_rx *r);
struct hml_rx *hml_rx_named(struct hml_rxq *q, const void *ctx);
bool hml_rx_directed(const struct hml_rxq *q, const struct hml_rx *r);
bool hml_rx_matches(const struct hml_rxq *q, const struct hml_rx *r,
		    fi_addr_t src, uint64_t tag);
bool hml_rx_multi_left(const struct hml_rx *r);
struct hml_op;
int hml_rx_deliver(struct hml_ep *t, struct hml_rx *r,
		   const struct hml_side *src, const struct hml_msgin *in,
		   struct hml_op *op);
ssize_t hml_rx_prov(struct hml_ep *o, struct fid_ep *fid,
		    const struct fi_msg_tagged *m, uint64_t flags, int tagged);
bool hml_rx_take_waiting(struct hml_rxq *q, struct hml_rx *r);
ssize_t hml_rx_post(struct hml_rxq *q, struct hml_rx *r);
void hml_rx_repost(struct hml_rxq *q, struct hml_rx *r);
/* its staged messages */
struct hml_unexp *hml_rx_stage(struct hml_ep *t, const struct hml_side *src,
			       const struct hml_msgin *in, int *err);
void hml_rx_unstage(struct hml_unexp *u);
bool hml_rx_room(const struct hml_rxq *q);
bool hml_rx_hold(struct hml_rxq *q, struct hml_unexp *u, int tagged);
void hml_rxq_drop(struct hml_rxq *q, struct hml_ep *t);

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
void hml_rx_pump(struct hml_cq *cq);
ssize_t hml_rx_refilter(struct hml_cq *cq, void *buf, ssize_t n,
			fi_addr_t *src);
bool hml_rx_watch(struct hml_cq *cq, struct hml_rxq *q);
void hml_rx_unwatch(struct hml_cq *cq, struct hml_rxq *q);

/* msg.c: a send to t, an endpoint of this process; HML_PASS leaves it
 * to the provider, otherwise *res is the call's answer. */
enum hml_verdict hml_msg_send(struct hml_ep *e, struct hml_ep *t,
			      const struct fi_msg_tagged *m, uint64_t flags,
			      int tagged, bool inject, ssize_t *res);

/* recv.c */
void hml_recv_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged);

/* track.c */
void hml_rx_drop_target(struct hml_ep *t);

#endif
