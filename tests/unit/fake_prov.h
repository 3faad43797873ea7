/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake provider for the unit tests of the message layer (shim/msg). It
 * holds the receives given to it in the order it got them, completes one
 * when a test says a message from elsewhere came (fake_arrive), and
 * answers fi_cancel as util providers do: 0 whether or not it found the
 * receive, with an FI_ECANCELED entry where it did, unless the test makes
 * it refuse or keep silent. Its CQ returns the entries it made, oldest
 * first, errors through readerr. One fake provider per process, and one
 * queue of entries: a test reads one CQ through it at a time.
 */
#ifndef FAKE_PROV_H
#define FAKE_PROV_H

#include "hml_msg.h"

#define FAKE_MAX 64

enum fake_answer {
	FAKE_ANSWER,		/* util: an FI_ECANCELED entry if found */
	FAKE_SILENT,		/* sockets' shared receive context: none */
};

struct fake_entry {
	void *ctx;
	uint64_t flags;
	size_t len;
	int err;
};

struct fake {
	void *held[FAKE_MAX];	/* the receives it holds, oldest first */
	int nheld;
	void *given[FAKE_MAX];	/* every receive given to it, in order, */
	void *given_buf[FAKE_MAX]; /* and where its first buffer starts */
	int ngiven;
	int cancels;		/* fi_cancel calls */
	int cancel_ret;		/* not 0: what fi_cancel returns */
	void *refuse;		/* fi_cancel refuses it: -FI_EBUSY */
	enum fake_answer answer;
	void (*on_cancel)(void *ctx);	/* first thing fi_cancel does */
	size_t min_multi;	/* FI_OPT_MIN_MULTI_RECV */
	struct fake_entry cq[FAKE_MAX];	/* what its CQ returns */
	int ncq, cqhead;
};

extern struct fake fake;

/* An endpoint of the fake provider, with its CQ (where it has one) and
 * the queue of its recorded receives. */
struct fake_ep {
	struct hml_ep e;
	struct fid_ep fid;
	struct hml_cq cq;
	struct fid_cq fcq;
	struct hml_rxq *q;
};

/* The fake provider forgets everything. */
void fake_reset(void);

/* A domain of the given data progress, opened with caps. */
void fake_domain(struct hml_domain *d, struct hml_fabric *f,
		 enum fi_progress progress, uint64_t caps);

/* An endpoint of d with caps, its receives recorded from now on; cq: its
 * receives complete on a CQ (else on a counter alone). */
void fake_ep_open(struct fake_ep *f, struct hml_domain *d, uint64_t caps,
		  bool cq);
void fake_ep_close(struct fake_ep *f);

/* A record for a receive of len bytes at buf posted on q, any source, tag
 * 0, nothing ignored: the test sets the record's fields it needs. */
struct hml_rx *fake_rx(struct hml_rxq *q, int tagged, void *ctx, void *buf,
		       size_t len, uint64_t flags);

/* r, linked in q in state: POSTED (given to the provider), KEPT, HELD, or
 * any other given to the provider first. */
void fake_place(struct hml_rxq *q, struct hml_rx *r, int state);

/* A message from elsewhere completes the receive the provider holds under
 * ctx; false if it holds none. */
bool fake_arrive(void *ctx, size_t len);

/* Does the provider hold the receive it was given under ctx? */
bool fake_holds(void *ctx);

/* The next entry the application reads from cq, error or not. */
bool fake_entry(struct hml_cq *cq, struct hml_cqe *e);

/* The record a context the provider was given names. */
static inline struct hml_rx *fake_rec(void *ctx)
{
	return hml_rx_named(ctx);
}

#endif
