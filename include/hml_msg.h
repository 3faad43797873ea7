/* Messages between endpoints of this process: recv.c keeps the receives,
 * msg.c brings the messages to them, cq.c sees their completions. */
#ifndef HML_MSG_H
#define HML_MSG_H

#include "hml.h"

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
	HML_RX_KEPT,			/* never given to it (recv.c) */
};

/* A receive the provider holds. */
struct hml_rx {
	struct hml_rx *prev, *next;	/* posting order; NULL when unlinked */
	struct hml_rx *hnext;		/* by context */
	struct fid_ep *fid;		/* the endpoint or SRX it was posted on */
	void *context;			/* NULL: fi_cancel cannot name it */
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
	struct hml_rx **by_ctx;
	struct hml_unexp *unexp[2];	/* messages waiting, oldest first */
	struct hml_unexp **unexp_tail[2];
	struct hml_rx *orphans;		/* taken back, sender gone */
	struct hml_cq *cqs[HML_CQ_RXQS];/* where its completions appear */
	int ncqs;
};

struct hml_rxq *hml_rxq_of(struct hml_ep *e);
bool hml_rx_directed(const struct hml_rxq *q, const struct hml_rx *r);
bool hml_rx_matches(const struct hml_rxq *q, const struct hml_rx *r,
		    fi_addr_t src, uint64_t tag);
void hml_rx_unlink(struct hml_rxq *q, struct hml_rx *r);
int hml_rx_deliver(struct hml_ep *t, struct hml_rx *r,
		   const struct hml_side *src, const struct hml_msgin *in);
void hml_rx_repost(struct hml_rxq *q, struct hml_rx *r);
bool hml_rx_multi_left(const struct hml_rx *r);
struct hml_unexp *hml_rx_stage(struct hml_ep *t, const struct hml_side *src,
			       const struct hml_msgin *in, int *err);
void hml_rx_hold(struct hml_rxq *q, struct hml_unexp *u, int tagged);
void hml_rx_unstage(struct hml_unexp *u);
void hml_rx_orphans(struct hml_cq *cq);
void hml_rx_drop_target(struct hml_ep *t);
void hml_recv_ops(struct fi_ops_msg *msg, struct fi_ops_tagged *tagged);
ssize_t hml_rx_cancel(struct hml_ep *e, void *context);

bool hml_cq_watch(struct hml_cq *cq, struct hml_rxq *q);
void hml_cq_unwatch(struct hml_cq *cq, struct hml_rxq *q);
void hml_cq_pump(struct hml_cq *cq);

#endif
