/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The take-back (shim/msg/takeback.c, filter.c), on a fake provider whose
 * fi_cancel and CQ the rows choose: each outcome of hml_rx_reclaim, from
 * what the provider answers and in which order its entries come, and what
 * the record and the application's CQ are left with; then hml_rx_requeue:
 * a multi-receive buffer taken back goes back to the provider in its
 * place, the receives given after it taken back and given again after it,
 * in posting order. A sender that gives up after 5 s of silence
 * (HML_GAVE_UP) is left to the shim tests: no row waits that long. A
 * failure names the rule broken.
 */
#include <string.h>

#include "fake_prov.h"
#include "unit.h"

enum setup {
	PLAIN,			/* a tagged receive, on a CQ */
	ARRIVED,		/* a message from elsewhere completed it */
	LATE,			/* it completes during the cancel */
	IN_USE,			/* a multi-receive buffer being filled */
	DIRECTED,		/* untagged, from one source */
	UNSEEN,			/* on a receive counter alone */
	SRX,			/* on a shared receive context */
};

static const struct row {
	const char *rule;
	enum setup setup;
	int cancel_ret;		/* what fi_cancel returns, if not 0 */
	enum fake_answer answer;
	enum hml_take want;
	int state;		/* the record's after */
	bool linked;		/* still in its queue */
	bool unclaimable, no_cancel;
	int cancels;		/* fi_cancel calls */
	bool entry;		/* the application gets its completion */
} rows[] = {
	{ "the cancel's FI_ECANCELED entry makes the receive the sender's, "
	  "and the application never sees it",
	  PLAIN, 0, FAKE_ANSWER, HML_WON, HML_RX_RECLAIMED, .cancels = 1 },
	{ "its own completion, come first, makes it the other message's, "
	  "which the application reads with its context",
	  ARRIVED, 0, FAKE_ANSWER, HML_LOST, HML_RX_DONE, .cancels = 1,
	  .entry = true },
	{ "a cancel refused leaves it the provider's, and no sender tries "
	  "it again", PLAIN, -FI_EBUSY, FAKE_ANSWER, HML_REFUSED,
	  HML_RX_POSTED, .linked = true, .unclaimable = true, .cancels = 1 },
	{ "a cancel refused because it has just completed: lost",
	  LATE, -FI_EBUSY, FAKE_ANSWER, HML_LOST, HML_RX_DONE, .cancels = 1,
	  .entry = true },
	{ "a multi-receive buffer the provider is filling: busy, and "
	  "claimable once released", IN_USE, -FI_EBUSY, FAKE_ANSWER, HML_BUSY,
	  HML_RX_POSTED, .linked = true, .cancels = 1 },
	{ "-FI_ENOSYS: the provider cannot cancel the queue's receives",
	  PLAIN, -FI_ENOSYS, FAKE_ANSWER, HML_NO_CANCEL, HML_RX_POSTED,
	  .linked = true,
	  .no_cancel = true, .cancels = 1 },
	{ "a directed untagged receive is never cancelled (libfabric 2.x "
	  "crashes)", DIRECTED, 0, FAKE_ANSWER, HML_UNSAFE, HML_RX_POSTED,
	  .linked = true },
	{ "with no CQ, fi_cancel's 0 says the provider found it",
	  UNSEEN, 0, FAKE_SILENT, HML_WON, HML_RX_RECLAIMED, .cancels = 1 },
	{ "with no CQ, a refused cancel says it completed unseen",
	  UNSEEN, -FI_ENOENT, FAKE_SILENT, HML_LOST, HML_RX_RECLAIMED,
	  .cancels = 1 },
	{ "a shared receive context's silence is consent",
	  SRX, 0, FAKE_SILENT, HML_WON, HML_RX_RECLAIMED, .cancels = 1 },
};

static struct hml_fabric fabric;
static struct hml_domain dom;
static struct fake_ep t;

static void open_t(uint64_t caps, bool cq)
{
	fake_reset();
	fake_ep_open(&t, &dom, caps, cq);
}

static void close_t(void)
{
	fake_reset();
	fake_ep_close(&t);
}

/* The provider completes the receive while fi_cancel looks for it, and
 * the CQ is read meanwhile, as another thread's read would. */
static void complete_now(void *ctx)
{
	fake_arrive(ctx, 3);
	hml_rx_pump(&t.cq);
}

static bool linked(struct hml_rxq *q, struct hml_rx *r)
{
	for (int l = 0; l < 2; l++)
		for (struct hml_rx *x = q->posted[l].next; x != &q->posted[l];
		     x = x->next)
			if (x == r)
				return true;
	return false;
}

/* A sender takes r back, as match.c does. */
static enum hml_take take(struct hml_rx *r, bool stay)
{
	pthread_mutex_lock(&t.q->lock);
	r->state = HML_RX_CANCELING;
	r->stay = stay;
	pthread_mutex_unlock(&t.q->lock);
	return hml_rx_reclaim(t.q, r, &t.e);
}

static void run(const struct row *w)
{
	bool directed = w->setup == DIRECTED;
	struct hml_cqe e = { 0 };
	struct hml_rx *r;
	enum hml_take how;
	char ctx, buf[16];
	bool got;

	open_t(directed ? FI_DIRECTED_RECV : 0, w->setup != UNSEEN);
	if (w->setup == SRX)
		t.fid.fid.fclass = FI_CLASS_SRX_CTX;
	r = fake_rx(t.q, directed ? HML_UNTAGGED : HML_TAGGED, &ctx, buf,
		    sizeof(buf), w->setup == IN_USE ? FI_MULTI_RECV : 0);
	r->src = directed ? 7 : FI_ADDR_UNSPEC;
	fake_place(t.q, r, HML_RX_POSTED);
	r->in_use = w->setup == IN_USE;
	fake.answer = w->answer;
	fake.cancel_ret = w->cancel_ret;
	if (w->setup == ARRIVED)
		fake_arrive(&r->ctx, 3);
	if (w->setup == LATE)
		fake.on_cancel = complete_now;

	how = take(r, false);
	u_check(how == w->want, "%s: outcome %d, expected %d", w->rule, how,
		w->want);
	u_check(r->state == w->state, "%s: state %d, expected %d", w->rule,
		r->state, w->state);
	u_check(linked(t.q, r) == w->linked, "%s: %slinked", w->rule,
		w->linked ? "not " : "");
	u_check(r->unclaimable == w->unclaimable, "%s: %sclaimable",
		w->rule, r->unclaimable ? "not " : "");
	u_check(hml_rxq_no_cancel(t.q) == w->no_cancel, "%s: no_cancel %d",
		w->rule, hml_rxq_no_cancel(t.q));
	u_check(fake.cancels == w->cancels, "%s: %d fi_cancel calls, "
		"expected %d", w->rule, fake.cancels, w->cancels);
	got = fake_entry(&t.cq, &e);
	u_check(got == w->entry && (!got || (e.op_context == &ctx && !e.err &&
					     e.len == 3)),
		"%s: the application %s", w->rule, got ? "reads an entry "
		"(its context, no error, 3 bytes?)" : "reads no entry");
	/* What is the sender's to free, as match.c does. */
	if (!w->linked) {
		pthread_mutex_lock(&t.q->lock);
		hml_rx_free(r);
		pthread_mutex_unlock(&t.q->lock);
	}
	close_t();
}

/*
 * A multi-receive buffer (0), then receives 1, 2, 3 of its list and 4 of
 * the other, as the provider got them (0, 1, 4, 2, 3); a sender takes the
 * buffer back in its place and fills 24 bytes of it; then, in a row,
 * fi_cancel refuses receive refuse, or receive arrive completes with a
 * message from elsewhere (0: none). After the requeue the provider holds
 * want, and was given ngiven receives again, the buffer first.
 */
static const struct requeue {
	const char *rule;
	int refuse, arrive;
	int want[5];
	int nwant, ngiven;
} requeues[] = {
	{ "a multi-receive buffer taken back goes back in its place: those "
	  "given after it are taken back and given again after it, in "
	  "posting order; the other list's stay", 0, 0, { 4, 0, 1, 2, 3 },
	  5, 4 },
	{ "a receive that cannot be taken back stays before the buffer, and "
	  "so do those after it", 1, 0, { 1, 4, 2, 3, 0 }, 5, 1 },
	{ "a receive completed meanwhile is the other message's; the next "
	  "is taken back", 0, 1, { 4, 0, 2, 3 }, 4, 3 },
};

static void requeue(const struct requeue *w)
{
	static const int list[] = { HML_TAGGED, HML_TAGGED, HML_TAGGED,
				    HML_TAGGED, HML_UNTAGGED };
	static const int order[] = { 0, 1, 4, 2, 3 };
	char ctx[5], buf[5][64];
	struct hml_cqe e = { 0 };
	struct hml_rx *r[5];
	void *pctx[5];
	int i;

	open_t(0, true);
	for (i = 0; i < 5; i++)
		r[i] = fake_rx(t.q, list[i], &ctx[i], buf[i], sizeof(buf[i]),
			       i ? 0 : FI_MULTI_RECV);
	for (i = 0; i < 5; i++) {
		fake_place(t.q, r[order[i]], HML_RX_POSTED);
		pctx[i] = &r[i]->ctx;
	}
	if (w->refuse)
		fake.refuse = pctx[w->refuse];

	u_check(take(r[0], true) == HML_WON && linked(t.q, r[0]),
		"%s: the buffer not taken back in its place", w->rule);
	pthread_mutex_lock(&t.q->lock);
	r[0]->state = HML_RX_POSTING;
	r[0]->used = 24;
	pthread_mutex_unlock(&t.q->lock);
	if (w->arrive)
		fake_arrive(pctx[w->arrive], 3);
	fake.ngiven = 0;
	hml_rx_requeue(t.q, r[0], &t.e);

	u_check(fake.nheld == w->nwant, "%s: the provider holds %d "
		"receives, expected %d", w->rule, fake.nheld, w->nwant);
	for (i = 0; i < w->nwant && i < fake.nheld; i++)
		u_check(fake.held[i] == pctx[w->want[i]], "%s: the provider's "
			"receive %d is not %d", w->rule, i, w->want[i]);
	u_check(fake.ngiven == w->ngiven && fake.given[0] == pctx[0] &&
		fake.given_buf[0] == buf[0] + 24, "%s: %d given again, the "
		"buffer not first, or not with what is left of it", w->rule,
		fake.ngiven);
	for (i = 0; i < w->nwant; i++)
		u_check(r[w->want[i]]->state == HML_RX_POSTED &&
			!r[w->want[i]]->stay, "%s: receive %d left in state "
			"%d", w->rule, w->want[i], r[w->want[i]]->state);
	u_check(!w->arrive == !fake_entry(&t.cq, &e) &&
		(!w->arrive || e.op_context == &ctx[w->arrive]),
		"%s: the completion of a receive filled meanwhile", w->rule);
	close_t();
}

int main(void)
{
	fake_domain(&dom, &fabric, FI_PROGRESS_MANUAL, 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(&rows[i]);
	for (size_t i = 0; i < sizeof(requeues) / sizeof(requeues[0]); i++)
		requeue(&requeues[i]);
	hml_hold_domain_fini(&dom);
	return u_done("takeback: every outcome's row, and the requeue");
}
