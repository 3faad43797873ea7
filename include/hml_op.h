/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One operation hmemloop does, RMA or message, from its call to its
 * completions. The router (route/) judges it, decides whose it is, takes
 * the places its entries need and starts it; data/ moves its bytes and
 * keeps it in flight until some thread progresses (a CQ or counter read,
 * a blocking wait, fi_trywait, a close) and finds its copy landed, then
 * makes the completions its initiator, its RMA target or its receive
 * report. Each initiating endpoint completes its operations in the order
 * they were posted.
 *
 * Lock: an endpoint's in-flight lock is taken before a CQ's lock and an
 * MR map's; completions, and the provider's fi_cntr_add, run under it. A
 * thread may wait for a stream under it: streams run copies only.
 */
#ifndef HML_OP_H
#define HML_OP_H

#include "hml.h"
#include "hml_config.h"

#define HML_IOV_MAX 64

/* The buffers of one side of an operation, taken end to end, each with
 * where it lives. */
struct hml_side {
	size_t count;
	size_t len;
	bool device;			/* some buffer is device memory */
	struct iovec iov[HML_IOV_MAX];
	struct hml_mem mem[HML_IOV_MAX];
};

/* What an operation is: the statistics count by it. */
enum hml_kind { HML_WRITE, HML_READ, HML_SEND, HML_TSEND, HML_KINDS };

struct hml_op {
	struct hml_op *next;		/* in its initiator's list */
	struct hml_ep *e;		/* the initiator */
	struct hml_ep *t;		/* the endpoint of this process it reaches */
	int kind;			/* enum hml_kind */
	uint64_t flags;			/* its operation flags */
	bool inject;			/* an inject call: no entry on success */
	int reason;			/* why it is hmemloop's (hml_route.h) */

	bool wait;			/* its copy is over before the call
					 * returns (a staged source) */
	bool ordered;			/* its copy follows every earlier one
					 * of its initiator (FI_FENCE): never
					 * in a batch */
	struct hml_ticket ticket;	/* its copy; empty once landed */

	int cntr;			/* the initiator's counter */
	struct hml_cqe tx;		/* the initiator's entry */

	/* A message: its receive's entry */
	bool recv;
	bool asked;
	struct hml_cqe rx;

	/* RMA: what the target reports once the bytes are there */
	bool target;
	uint64_t data;
	size_t nmrs;			/* the regions it holds, */
	struct hml_mr *mrs[HML_IOV_MAX];	/* last: not cleared */
};

/* Is its completion left for later? An inject's source is free when the
 * call returns, and with HMEMLOOP_ASYNC=0 every copy is over then. */
#define hml_op_deferred(op) (hml_config.async && !(op)->wait &&	\
			     !(op)->inject && !((op)->flags & FI_INJECT))

/* side.c: a side's buffers, classified */
int hml_side_local(struct hml_side *s, struct hml_domain *d,
		   const struct iovec *iov, void **desc, size_t count);
int hml_side_target(struct hml_side *s, struct hml_ep *t,
		    const struct fi_rma_iov *riov, size_t count,
		    uint64_t access, struct hml_mr **mrs);
const struct hml_mem *hml_side_device(const struct hml_side *s);
void hml_side_put(struct hml_mr **mrs, size_t count);

/* side.c: len bytes from src's buffers to dst's, for op (NULL: now) */
int hml_move(const struct hml_side *dst, const struct hml_side *src,
	     size_t len, struct hml_op *op);

/* inflight.c: operations in flight in the process; nothing to progress
 * while 0. */
extern unsigned long hml_inflight;

static inline bool hml_inflight_any(void)
{
	return __atomic_load_n(&hml_inflight, __ATOMIC_ACQUIRE);
}

void hml_inflight_init(struct hml_ep *e);
void hml_inflight_fini(struct hml_ep *e);
void hml_inflight_add(struct hml_op *op);
void hml_inflight_order(struct hml_ep *e, const struct hml_copy *c);
void hml_inflight_wait(struct hml_ep *e);
void hml_inflight_progress(void);
void hml_inflight_drain(void);
void hml_inflight_sleep(int delta);
void hml_inflight_watch(int delta);

/* completion.c */
void hml_complete_op(struct hml_op *op, int err);
bool hml_op_cntr_watched(const struct hml_op *op);

#endif
