/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An operation the shim does, from its post to its completions
 * (inflight.c). Its copy is posted on a stream and not waited for; the
 * completions its initiator, its RMA target or its receive report are
 * made when some thread progresses (a CQ or counter read, a blocking
 * wait, fi_trywait, a close) and finds the copy landed. Each initiating
 * endpoint completes its operations in the order they were posted.
 *
 * Lock: an endpoint's in-flight lock is taken before a CQ's lock and an
 * MR map's; completions, and the provider's fi_cntr_add, run under it. A
 * thread may wait for a stream under it: streams run copies only.
 */
#ifndef HML_OP_H
#define HML_OP_H

#include "hml_config.h"
#include "hml_xfer.h"

struct hml_op {
	struct hml_op *next;
	struct hml_ticket ticket;	/* its copy; empty once landed */
	struct hml_ep *e;		/* the initiator */
	uint64_t flags;
	bool inject;
	bool wait;			/* its copy is over before the call
					 * returns (a staged source) */
	int cntr;			/* the initiator's counter */
	struct hml_cqe tx;

	/* RMA: what the target reports once the bytes are there */
	struct hml_ep *t;
	bool target;
	bool read;
	uint64_t data;
	size_t nmrs;			/* the regions it holds */
	struct hml_mr *mrs[HML_IOV_MAX];

	/* A message: its receive's completion */
	bool recv;
	bool asked;
	struct hml_cqe rx;
};

/* Is its completion left for later? An inject's source is free when the
 * call returns, and with HMEMLOOP_ASYNC=0 every copy is over then. */
static inline bool hml_op_deferred(const struct hml_op *op)
{
	return hml_config.async && !op->wait && !op->inject &&
	       !(op->flags & FI_INJECT);
}

/* Operations in flight in the process: nothing to progress while 0. */
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

/* completion.c */
void hml_complete_op(struct hml_op *op, int err);
bool hml_op_cntr_watched(const struct hml_op *op);

#endif
