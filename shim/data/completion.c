/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The completion rules: which entries and counter events an operation the
 * shim did reports, at the initiator, at an RMA target and at a receive,
 * as a provider reports them. The entries go on the CQs' queues
 * (cqueue.c).
 */
#include "hml_op.h"
#include "hml_stats.h"

/*
 * The initiator's completion, in the place taken on its transmit CQ: an
 * entry unless the operation asked for none (an inject, or no
 * FI_COMPLETION on an endpoint bound with FI_SELECTIVE_COMPLETION); errors
 * always. Counters count both, unless the provider counted the operation
 * (HML_CNTR_NONE).
 */
void hml_complete_tx(struct hml_ep *e, const struct hml_cqe *c, uint64_t flags,
		     bool inject, int cntr)
{
	struct hml_ep *b = e->base;
	bool report = c->err || (!inject &&
		(!(b->tx_cq_flags & FI_SELECTIVE_COMPLETION) ||
		 (flags & FI_COMPLETION)));

	if (report && b->tx_cq)
		hml_cq_push_reserved(b->tx_cq, c);
	else
		hml_cq_unreserve(b->tx_cq);
	if (cntr != HML_CNTR_NONE)
		hml_cntr_bump(b->cntr[cntr], c->len, c->err);
	hml_stat_error(c->err);
}

/* What the target of a successful RMA operation sees: counters bound to it
 * and to its regions, and remote CQ data, in the place the operation took
 * on its CQ. */
static void complete_target(const struct hml_op *op, size_t len)
{
	bool read = op->kind == HML_READ;
	uint64_t event = read ? FI_REMOTE_READ : FI_REMOTE_WRITE;
	struct hml_ep *b = op->t->base;

	hml_cntr_bump(b->cntr[read ? HML_CNTR_REMOTE_READ :
				     HML_CNTR_REMOTE_WRITE], len, false);
	for (size_t i = 0; i < op->nmrs; i++) {
		bool seen = false;

		for (size_t j = 0; j < i; j++)
			seen |= op->mrs[j] == op->mrs[i];
		if (!seen && (op->mrs[i]->cntr_flags & event))
			hml_cntr_bump(op->mrs[i]->cntr, len, false);
	}
	if (!read && (op->flags & FI_REMOTE_CQ_DATA) && b->rx_cq) {
		struct hml_cqe c = {
			.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
			.len = len,
			.data = op->data,
			.src_addr = FI_ADDR_NOTAVAIL,
		};

		hml_cq_push_reserved(b->rx_cq, &c);
	}
}

/* May someone sleep on a counter the operation adds to without reading it
 * (cntradd.c)? The initiator's, the target's and its regions', or the
 * receive's, as above. */
bool hml_op_cntr_watched(const struct hml_op *op)
{
	bool read = op->kind == HML_READ;
	uint64_t event = read ? FI_REMOTE_READ : FI_REMOTE_WRITE;
	struct hml_ep *t = op->t ? op->t->base : NULL;

	if (op->cntr != HML_CNTR_NONE &&
	    hml_cntr_watched(op->e->base->cntr[op->cntr]))
		return true;
	if (op->recv)
		return hml_cntr_watched(t->cntr[HML_CNTR_RECV]);
	if (!op->target)
		return false;
	if (hml_cntr_watched(t->cntr[read ? HML_CNTR_REMOTE_READ :
					  HML_CNTR_REMOTE_WRITE]))
		return true;
	for (size_t i = 0; i < op->nmrs; i++)
		if ((op->mrs[i]->cntr_flags & event) &&
		    hml_cntr_watched(op->mrs[i]->cntr))
			return true;
	return false;
}

/*
 * The receive's completion of a message the shim delivered: an entry for
 * an error, for a multi-receive buffer's release (always reported,
 * fi_msg(3)) and otherwise unless the endpoint is bound with
 * FI_SELECTIVE_COMPLETION and the receive asked for none (asked); the
 * receive counter counts both.
 */
void hml_complete_rx(struct hml_ep *t, const struct hml_cqe *c, bool asked)
{
	struct hml_ep *b = t->base;

	if (b->rx_cq && (c->err || (c->flags & FI_MULTI_RECV) ||
			 !(b->rx_cq_flags & FI_SELECTIVE_COMPLETION) || asked))
		hml_cq_push(b->rx_cq, c);
	hml_cntr_bump(b->cntr[HML_CNTR_RECV], c->len, c->err);
}

/*
 * An operation whose copy has landed, or failed (err): what its target or
 * its receive reports, then its initiator, as the provider orders them. A
 * failed copy is the operation's error, at both ends of a message; an RMA
 * target sees nothing of it.
 */
void hml_complete_op(struct hml_op *op, int err)
{
	if (err) {
		op->tx.err = -err;
		op->tx.len = 0;
		op->rx.err = -err;
		op->rx.len = 0;
	}
	if (op->recv)
		hml_complete_rx(op->t, &op->rx, op->asked);
	else if (op->target && !op->tx.err)
		complete_target(op, op->tx.len);
	else if (op->target && op->kind == HML_WRITE &&
		 (op->flags & FI_REMOTE_CQ_DATA))
		hml_cq_unreserve(op->t->base->rx_cq);
	hml_complete_tx(op->e, &op->tx, op->flags, op->inject, op->cntr);
	for (size_t i = 0; i < op->nmrs; i++)
		hml_mr_put(op->mrs[i]);
}
