/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The data path: one same-process transfer, RMA or message (xfer.c).
 *
 * A transfer is built once from the operation (hml_xfer_rma,
 * hml_xfer_send). Building it classifies the initiator's buffers (and, for
 * RMA, the target's regions) and decides, in one place, whether hmemloop
 * does the operation, refuses it at the call, or passes it to the
 * provider. The caller then runs the copy (hml_xfer_copy) and reports the
 * completions, and ends the transfer (hml_xfer_end), which releases the
 * regions it holds.
 */
#ifndef HML_XFER_H
#define HML_XFER_H

#include "hml_av.h"

#define HML_IOV_MAX 64

/* The buffers of one side, taken end to end. */
struct hml_side {
	size_t count;
	size_t len;
	bool device;			/* some buffer is device memory */
	struct iovec iov[HML_IOV_MAX];
	struct hml_mem mem[HML_IOV_MAX];
};

/* What becomes of an operation. */
enum hml_verdict {
	HML_PASS,	/* not ours: the provider's to do */
	HML_REFUSE,	/* refused at the call with hml_xfer.err; nothing
			 * moves, nothing is reported */
	HML_DO,		/* ours: hml_xfer.err, if set, is its error
			 * completion */
};

struct hml_xfer {
	struct hml_ep *e;		/* the initiator */
	struct hml_ep *t;		/* the endpoint it reaches */
	uint64_t flags;
	bool inject;
	bool all;			/* HMEMLOOP_SELF=all: host memory too */
	int err;			/* negative FI_E* code, or 0 */
	struct hml_side mine;		/* the initiator's buffers */
	struct hml_side theirs;		/* RMA: the target's regions */
	size_t nmrs;			/* RMA: regions held, in mrs */
	struct hml_mr *mrs[HML_IOV_MAX];
};

enum hml_verdict hml_xfer_rma(struct hml_xfer *x, struct hml_ep *e,
			      struct hml_ep *t, const struct fi_msg_rma *msg,
			      uint64_t flags, uint64_t access, bool inject);
bool hml_xfer_msg_ok(const struct hml_ep *e, const struct hml_ep *t);
enum hml_verdict hml_xfer_send(struct hml_xfer *x, struct hml_ep *e,
			       struct hml_ep *t, const struct iovec *iov,
			       void **desc, size_t count, uint64_t flags,
			       bool inject);
bool hml_xfer_host(const struct hml_xfer *x, struct hml_domain *d,
		   const struct iovec *iov, void **desc, size_t count);
struct hml_op;
int hml_xfer_copy(struct hml_xfer *x, bool read, struct hml_op *op);
void hml_xfer_end(struct hml_xfer *x);

/* The sides themselves, for the message path's receives and staged
 * copies. */
int hml_side_local(struct hml_side *s, struct hml_domain *d,
		   const struct iovec *iov, void **desc, size_t count);
int hml_move(const struct hml_side *dst, const struct hml_side *src,
	     size_t len, struct hml_op *op);
const struct hml_mem *hml_side_device(const struct hml_side *s);

#endif
