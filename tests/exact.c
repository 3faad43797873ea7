/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Same-process messages under uses libfabric allows that a take-back by
 * the application's context gets wrong (issue 14). Each case checks what
 * the provider alone does with host memory:
 *
 *   shared   two receives posted with one context: the first message
 *            fills the first, the second the second; nothing is cancelled
 *   format   CQs of FI_CQ_FORMAT_CONTEXT, where a receive and a send of
 *            one endpoint share a context: the send's entry is not the
 *            receive's, and a message later fills the receive
 *   cancel   the application cancels receive c2, then a message comes:
 *            c2 ends FI_ECANCELED, untouched, and c3 takes the message
 *   nocontext a receive posted without a context takes a message
 *   bounded  messages sent with no receive posted: the sender is pushed
 *            back with -FI_EAGAIN, and every message it was not is
 *            received once, intact, when receives come
 *   rxcntr   an endpoint with a receive counter and no receive CQ: the
 *            message lands and is counted once; a receive the
 *            application cancels counts an error, and the next message
 *            goes to the next receive
 *   txcntr   an endpoint with a send counter and no send CQ: the send is
 *            counted once
 *   kept     a directed untagged receive hmemloop keeps and one the
 *            provider holds, with one context: filled in posting order;
 *            the application cancels either (see kept())
 *   order    an inject over inject_size from host memory, which the
 *            provider carries, then a small send: with no receive posted
 *            yet, the first receive takes the inject (FI_ORDER_SAS)
 *
 * By default on device memory: without hmemloop the provider touches it
 * and the run fails. With -H on host memory. Either way it traces what it
 * sees (t_trace_on), and the harness (kind diff) compares the traces of
 * device memory and of host memory through hmemloop with the provider alone's on host memory. "-c NAME,..." runs only those.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN		1000		/* a message of shared, format, cancel */
#define SLOT		4096
#define NSLOT		4
#define SMALL		64		/* a message of bounded */
#define MAXQ		20000		/* sends before bounded gives up */

enum { A, B, C, D, NEP };	/* c, d: CQs of FI_CQ_FORMAT_CONTEXT */

static struct t_fabric fab;
static struct t_ep ep[NEP];
static fi_addr_t addr[NEP][NEP];	/* [in whose AV][whose address] */
static bool shared_ok;			/* contexts may be shared */
static char *src, *dst, *qsrc;		/* device memory unless -H */
static struct t_mr src_mr, dst_mr, qsrc_mr, hsrc_mr, hdst_mr;
static char hsrc[SLOT], hdst[SLOT];	/* host memory, always */
static uint8_t scratch[SLOT];

/* Slot i of the source holds the message seeded seed. */
static void load(int i, unsigned seed)
{
	t_fill(scratch, LEN, seed);
	t_mem_put(src + i * SLOT, scratch, LEN);
}

/* Slot i of the destination: poisoned, or checked to hold seed's bytes. */
static void poison(int i)
{
	memset(scratch, 0xa5, SLOT);
	t_mem_put(dst + i * SLOT, scratch, SLOT);
}

static bool holds(int i, unsigned seed)
{
	t_mem_get(scratch, dst + i * SLOT, LEN);
	return t_check(scratch, LEN, seed);
}

static bool poisoned(int i)
{
	t_mem_get(scratch, dst + i * SLOT, SLOT);
	for (size_t k = 0; k < SLOT; k++)
		if (scratch[k] != 0xa5)
			return false;
	return true;
}

static void recv_slot(int e, int i, void *ctx)
{
	t_post(ep[e].cq, fi_recv(ep[e].ep, dst + i * SLOT, SLOT, dst_mr.desc,
				 FI_ADDR_UNSPEC, ctx));
}

static void send_slot(int from, int to, int i, void *ctx)
{
	t_post(ep[from].cq, fi_send(ep[from].ep, src + i * SLOT, LEN,
				    src_mr.desc, addr[from][to], ctx));
}

/* The next entry of e's CQ, success or error, within the wait. */
struct ent {
	void *ctx;
	int err;
	size_t len;
	uint64_t flags;
};

static struct ent next_on(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry t = { 0 };
	struct fi_cq_err_entry x = { 0 };
	int ret = t_wait(cq, &t, &x);

	t_assert(ret >= 0, "%s: no completion in %.0f s", what, t_wait_s());
	if (ret)
		return (struct ent) { x.op_context, x.err, x.len, x.flags };
	return (struct ent) { t.op_context, 0, t.len, t.flags };
}

static struct ent next(int e, const char *what)
{
	return next_on(ep[e].cq, what);
}

static void quiet(int e, const char *what)
{
	t_assert(t_quiet(ep[e].cq, 50), "%s: a completion more", what);
}

static void tx_done(int e, void *ctx, const char *what)
{
	struct ent g = next(e, what);

	t_assert(g.ctx == ctx && !g.err, "%s: send entry: context %p err %d, "
		 "expected %p", what, g.ctx, g.err, ctx);
}

/* Name each of n contexts for the trace: "x", "s1", ... */
static void names(int n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		const void *p = va_arg(ap, const void *);

		t_name(p, "%s", va_arg(ap, const char *));
	}
	va_end(ap);
}

/* ---- the cases ------------------------------------------------------------ */

static void shared(void)
{
	const char *what = "two receives with one context";
	struct fi_context2 x, s[2];
	struct ent g;

	if (!shared_ok) {
		t_trace("shared: not legal here (FI_CONTEXT mode)");
		return;
	}
	names(3, &x, "x", &s[0], "s1", &s[1], "s2");
	poison(0);
	poison(1);
	load(0, 11);
	load(1, 12);
	recv_slot(B, 0, &x);
	recv_slot(B, 1, &x);
	for (int i = 0; i < 2; i++) {
		send_slot(A, B, i, &s[i]);
		tx_done(A, &s[i], what);
		g = next(B, what);
		t_assert(g.ctx == &x && !g.err && g.len == LEN, "%s: receive "
			 "entry %d: context %p err %d (%s) len %zu", what,
			 i + 1, g.ctx, g.err, fi_strerror(g.err), g.len);
	}
	quiet(B, what);
	t_assert(holds(0, 11), "%s: the first buffer lacks the first message",
		 what);
	t_assert(holds(1, 12), "%s: the second buffer lacks the second "
		 "message", what);
	t_trace_bytes(dst, 2 * SLOT);
	t_trace("shared: first buffer first message, second buffer "
		"second message");
	t_ok("%s: each message in its receive, in posting order", what);
}

static void format(void)
{
	const char *what = "FI_CQ_FORMAT_CONTEXT, a send and a receive "
			   "sharing a context";
	struct fi_context2 x, y, z;
	struct ent g;

	names(3, &x, "x", &y, "y", &z, "z");
	poison(2);
	load(2, 21);
	memset(hsrc, 0x5a, LEN);
	recv_slot(D, 2, &x);
	/* d's host send to c, with the context of d's receive */
	t_post(ep[C].cq, fi_recv(ep[C].ep, hdst, SLOT, hdst_mr.desc,
				 FI_ADDR_UNSPEC, &y));
	t_post(ep[D].cq, fi_send(ep[D].ep, hsrc, LEN, hsrc_mr.desc,
				 addr[D][C], &x));
	g = next(D, what);
	t_assert(g.ctx == &x && !g.err, "%s: d's send: context %p err %d",
		 what, g.ctx, g.err);
	g = next(C, what);
	t_assert(g.ctx == &y && !g.err, "%s: c's receive: context %p err %d",
		 what, g.ctx, g.err);
	send_slot(C, D, 2, &z);
	tx_done(C, &z, what);
	g = next(D, what);
	t_assert(g.ctx == &x && !g.err, "%s: d's receive: context %p err %d",
		 what, g.ctx, g.err);
	quiet(D, what);
	t_assert(holds(2, 21), "%s: the message is not in d's receive", what);
	t_trace_bytes(dst + 2 * SLOT, SLOT);
	t_trace_bytes(hdst, LEN);
	t_trace("format: the send's entry, then the receive's, which "
		"holds the message");
	t_ok("%s: the message completes the receive", what);
}

static void cancel(void)
{
	const char *what = "the application's fi_cancel";
	struct fi_context2 c2, c3, s;
	struct ent g[2];
	ssize_t ret;
	int k;

	names(3, &c2, "c2", &c3, "c3", &s, "s");
	poison(0);
	poison(1);
	load(3, 31);
	recv_slot(B, 0, &c2);
	recv_slot(B, 1, &c3);
	ret = t_trace_ret("fi_cancel(c2)", fi_cancel(&ep[B].ep->fid, &c2));
	t_assert(!ret, "%s: fi_cancel returned %zd (%s)", what, ret,
		 fi_strerror((int) -ret));
	send_slot(A, B, 3, &s);
	tx_done(A, &s, what);
	g[0] = next(B, what);
	g[1] = next(B, what);
	quiet(B, what);
	k = g[0].ctx == &c3;
	t_assert(g[k].ctx == &c2 && g[k].err == FI_ECANCELED, "%s: c2's "
		 "entry: context %p err %d (%s), expected FI_ECANCELED", what,
		 g[k].ctx, g[k].err, fi_strerror(g[k].err));
	t_assert(g[!k].ctx == &c3 && !g[!k].err && g[!k].len == LEN, "%s: "
		 "c3's entry: context %p err %d (%s) len %zu", what,
		 g[!k].ctx, g[!k].err, fi_strerror(g[!k].err), g[!k].len);
	t_assert(poisoned(0), "%s: c2's buffer was written", what);
	t_mem_get(scratch, dst + SLOT, LEN);
	t_assert(t_check(scratch, LEN, 31), "%s: c3 lacks the message", what);
	t_trace_bytes(dst, 2 * SLOT);
	t_trace("cancel: c2 FI_ECANCELED and untouched, c3 holds the "
		"message");
	t_ok("%s: c2 ends cancelled, c3 takes the message", what);
}

static void nocontext(void)
{
	const char *what = "a receive without a context";
	struct fi_context2 s;
	struct ent g;

	t_name(&s, "s");
	poison(0);
	load(2, 41);
	recv_slot(B, 0, NULL);
	send_slot(A, B, 2, &s);
	tx_done(A, &s, what);
	g = next(B, what);
	t_assert(!g.ctx && !g.err && g.len == LEN, "%s: entry context %p err "
		 "%d (%s) len %zu", what, g.ctx, g.err, fi_strerror(g.err),
		 g.len);
	quiet(B, what);
	t_assert(holds(0, 41), "%s: the message is not in the receive", what);
	t_trace_bytes(dst, SLOT);
	t_trace("nocontext: the message in the receive");
	t_ok("%s: takes a message", what);
}

/* A send of bounded, with no progress driven on either side: the
 * provider alone pushes back once its queues are full. */
static bool pushed_back(int i, struct fi_context2 *ctx)
{
	ssize_t ret = fi_send(ep[A].ep, qsrc + (size_t) i * SMALL, SMALL,
			      qsrc_mr.desc, addr[A][B], &ctx[i]);

	if (ret == -FI_EAGAIN)
		return true;
	t_fi(ret);
	return false;
}

static void bounded(void)
{
	const char *what = "messages with no receive posted";
	struct fi_context2 *ctx = calloc(MAXQ, sizeof(*ctx)), r;
	bool *seen = calloc(MAXQ, 1);
	int n, i, id;
	struct ent g;

	/* The oracle has no bound to compare with: udp;ofi_rxd alone takes
	 * 20 000 sends, and then does not complete them all. */
	if (!strcmp(t_prov, "udp;ofi_rxd") &&
	    t_no_oracle("bounded: not compared, %s alone does not push back",
			t_prov)) {
		free(ctx);
		free(seen);
		return;
	}
	t_assert(ctx && seen, "out of memory");
	t_name(&r, "r");
	t_name_array(ctx, MAXQ, sizeof(*ctx), "ctx");
	qsrc = t_mem_alloc((size_t) MAXQ * SMALL);
	t_reg(&fab, qsrc, (size_t) MAXQ * SMALL, FI_SEND, 5, &qsrc_mr);
	for (i = 0; i < MAXQ; i++) {
		t_fill(scratch, SMALL, 1000 + i);
		memcpy(scratch, &i, sizeof(i));
		t_mem_put(qsrc + (size_t) i * SMALL, scratch, SMALL);
	}
	/* One message first: connections and peers set up. */
	recv_slot(B, 0, &r);
	send_slot(A, B, 0, &ctx[0]);
	tx_done(A, &ctx[0], what);
	g = next(B, what);
	t_assert(g.ctx == &r && !g.err, "%s: the first message", what);
	/* Where the sender is pushed back is the provider's, or hmemloop's,
	 * own: not traced until every message is in. */
	t_trace_pause(true);
	for (n = 0; n < MAXQ && !pushed_back(n, ctx); n++)
		;
	t_assert(n < MAXQ, "%s: %d sends, none pushed back", what, MAXQ);
	for (i = 0; i < n; i++)
		tx_done(A, &ctx[i], what);
	quiet(A, what);
	/* Every accepted message, once each, into one receive at a time. */
	for (i = 0; i < n; i++) {
		poison(0);
		recv_slot(B, 0, &r);
		g = next(B, what);
		t_assert(g.ctx == &r && !g.err && g.len == SMALL, "%s: receive "
			 "%d: context %p err %d (%s) len %zu", what, i, g.ctx,
			 g.err, fi_strerror(g.err), g.len);
		t_mem_get(scratch, dst, SMALL);
		memcpy(&id, scratch, sizeof(id));
		t_assert(id >= 0 && id < n && !seen[id], "%s: receive %d: "
			 "message %d", what, i, id);
		seen[id] = true;
		memcpy(scratch, &(int) { 0 }, sizeof(id));
		t_fill(scratch + SMALL, SMALL, 1000 + id);
		memcpy(scratch + SMALL, &(int) { 0 }, sizeof(id));
		t_assert(!memcmp(scratch, scratch + SMALL, SMALL), "%s: "
			 "message %d arrived corrupt", what, id);
	}
	t_trace_pause(false);
	recv_slot(B, 0, &r);
	quiet(B, what);
	t_assert(!t_trace_ret("fi_cancel(r)", fi_cancel(&ep[B].ep->fid, &r)),
		 "%s: fi_cancel", what);
	g = next(B, what);
	t_assert(g.ctx == &r && g.err == FI_ECANCELED, "%s: the last receive: "
		 "context %p err %d", what, g.ctx, g.err);
	t_fi(fi_close(&qsrc_mr.mr->fid));
	t_mem_free(qsrc);
	free(ctx);
	free(seen);
	t_trace("bounded: pushed back; every message it accepted "
		"received once, intact");
	t_ok("%s: pushed back after %d, all %d received", what, n, n);
}

/* An endpoint with a CQ for one direction only and a counter for the
 * other; false if the provider will not enable it so. */
static bool half_open(struct t_ep *e, struct fid_cntr **c, uint64_t cq_flags,
		      uint64_t cntr_flags)
{
	/* It enables one, then crashes in its first fi_recv or fi_send. */
	if (!strcmp(t_prov, "udp;ofi_rxd") ||
	    t_ep_try_open(e, &fab, &(struct t_opts) {
			.cq_bind = cq_flags, .own_cntr = { cntr_flags } }, NULL))
		return false;
	*c = e->cntr[0];
	return true;
}

/* Wait for a counter to reach want, or for more errors than errs. */
static void count_to(struct fid_cntr *c, uint64_t want, uint64_t errs,
		     const char *what)
{
	double end = t_now() + t_wait_s();

	while (fi_cntr_read(c) < want && fi_cntr_readerr(c) <= errs &&
	       t_now() < end)
		t_drive(ep[A].cq);
	t_assert(fi_cntr_read(c) == want && fi_cntr_readerr(c) == errs,
		 "%s: counter %lu, errors %lu, expected %lu and %lu", what,
		 (unsigned long) fi_cntr_read(c),
		 (unsigned long) fi_cntr_readerr(c), (unsigned long) want,
		 (unsigned long) errs);
	t_trace_cntr(c);
}

static void rxcntr(void)
{
	const char *what = "a receive counter and no receive CQ";
	struct fi_context2 r, s;
	struct fid_cntr *c;
	fi_addr_t to;
	struct t_ep e;

	if (!half_open(&e, &c, FI_TRANSMIT, FI_RECV)) {
		t_trace("rxcntr: not allowed here");
		return;
	}
	names(2, &r, "r", &s, "s");
	to = t_insert(&ep[A], e.name);
	t_insert(&e, ep[A].name);
	poison(0);
	load(1, 51);
	t_post(e.cq, fi_recv(e.ep, dst, SLOT, dst_mr.desc, FI_ADDR_UNSPEC, &r));
	t_post(ep[A].cq, fi_send(ep[A].ep, src + SLOT, LEN, src_mr.desc, to,
				 &s));
	tx_done(A, &s, what);
	count_to(c, 1, 0, what);
	t_assert(holds(0, 51), "%s: the message is not in the receive", what);
	/* The application cancels one: the provider counts an error. */
	poison(1);
	poison(2);
	t_post(e.cq, fi_recv(e.ep, dst + SLOT, SLOT, dst_mr.desc,
			     FI_ADDR_UNSPEC, &r));
	t_assert(!t_trace_ret("fi_cancel(r)", fi_cancel(&e.ep->fid, &r)),
		 "%s: fi_cancel", what);
	count_to(c, 1, 1, what);
	t_post(e.cq, fi_recv(e.ep, dst + 2 * SLOT, SLOT, dst_mr.desc,
			     FI_ADDR_UNSPEC, &r));
	load(1, 53);
	t_post(ep[A].cq, fi_send(ep[A].ep, src + SLOT, LEN, src_mr.desc, to,
				 &s));
	tx_done(A, &s, what);
	count_to(c, 2, 1, what);
	t_assert(poisoned(1), "%s: the cancelled receive was written", what);
	t_assert(holds(2, 53), "%s: the second message is not in the next "
		 "receive", what);
	t_assert(t_quiet(e.cq, 50), "%s: an entry on the send CQ", what);
	t_trace_bytes(dst, 3 * SLOT);
	t_ep_close(&e);
	t_trace("rxcntr: counted once, the message in the receive; a "
		"cancel counted as an error; the next message in the next "
		"receive");
	t_ok("%s: messages are counted and land, a cancel is counted", what);
}

static void txcntr(void)
{
	const char *what = "a send counter and no send CQ";
	struct fi_context2 r, s;
	struct fid_cntr *c;
	fi_addr_t to;
	struct t_ep e;
	struct ent g;

	if (!half_open(&e, &c, FI_RECV, FI_SEND)) {
		t_trace("txcntr: not allowed here");
		return;
	}
	names(2, &r, "r", &s, "s");
	to = t_insert(&e, ep[B].name);
	t_insert(&ep[B], e.name);
	poison(0);
	load(1, 52);
	recv_slot(B, 0, &r);
	t_post(e.cq, fi_send(e.ep, src + SLOT, LEN, src_mr.desc, to, &s));
	g = next(B, what);
	t_assert(g.ctx == &r && !g.err && g.len == LEN, "%s: receive entry: "
		 "context %p err %d (%s) len %zu", what, g.ctx, g.err,
		 fi_strerror(g.err), g.len);
	count_to(c, 1, 0, what);
	t_assert(t_quiet(e.cq, 50), "%s: an entry on the receive CQ", what);
	t_assert(holds(0, 52), "%s: the message is not in the receive", what);
	t_trace_bytes(dst, SLOT);
	t_ep_close(&e);
	t_trace("txcntr: counted once, the message in the receive");
	t_ok("%s: the send is counted", what);
}

/* ---- set-up ---------------------------------------------------------------- */

/* Messages in order, and contexts the provider may ask for. */
static const struct t_opts *hints(uint64_t caps)
{
	static struct t_opts o = { .mode = FI_CONTEXT | FI_CONTEXT2,
				   .msg_order = FI_ORDER_SAS };

	o.caps = caps;
	return &o;
}

/*
 * A directed untagged receive whose source is an endpoint of this process
 * (hmemloop keeps it from the provider) and one for any source, posted with
 * one context, in either order: messages fill them in posting order. Then
 * the application cancels a context two such receives share, and a
 * message goes to the other; where the provider alone chooses, the digest
 * says which. Then one directed receive alone is cancelled. On host
 * memory, libfabric 2.x's util_srx (shm, tcp;ofi_rxm, efa) alone crashes
 * when a message comes to a directed untagged receive and one for any
 * source, and when the application cancels a directed untagged receive:
 * nothing to compare with there.
 */
struct kept {
	struct t_fabric f;
	struct t_ep s, r;
	fi_addr_t to, from;
	struct t_mr src, dst;
};

static void kept_recv(struct kept *k, int i, bool directed, void *ctx)
{
	t_post(k->r.cq, fi_recv(k->r.ep, dst + i * SLOT, SLOT, k->dst.desc,
				directed ? k->from : FI_ADDR_UNSPEC, ctx));
}

/* A message seeded seed from s to r, which completes with ctx; the slot
 * of 0 and 1 that holds it. */
static int kept_send(struct kept *k, unsigned seed, void *ctx,
		     const char *what)
{
	struct fi_context2 sc;
	struct ent g;

	t_name(&sc, "sc");
	load(3, seed);
	t_post(k->s.cq, fi_send(k->s.ep, src + 3 * SLOT, LEN, k->src.desc,
				k->to, &sc));
	g = next_on(k->s.cq, what);
	t_assert(g.ctx == &sc && !g.err, "%s: send entry: context %p err %d",
		 what, g.ctx, g.err);
	g = next_on(k->r.cq, what);
	t_assert(g.ctx == ctx && !g.err && g.len == LEN, "%s: receive entry: "
		 "context %p err %d (%s) len %zu, expected %p", what, g.ctx,
		 g.err, fi_strerror(g.err), g.len, ctx);
	for (int i = 0; i < 2; i++)
		if (holds(i, seed))
			return i;
	t_fail("%s: the message is in neither receive", what);
}

static void kept_cancel(struct kept *k, void *ctx, const char *what)
{
	struct ent g;

	t_assert(!t_trace_ret("fi_cancel", fi_cancel(&k->r.ep->fid, ctx)),
		 "%s: fi_cancel", what);
	g = next_on(k->r.cq, what);
	t_assert(g.ctx == ctx && g.err == FI_ECANCELED, "%s: cancel entry: "
		 "context %p err %d (%s)", what, g.ctx, g.err,
		 fi_strerror(g.err));
}

/* Two receives with one context, directed first or not; messages. */
static void kept_fill(struct kept *k, bool directed_first)
{
	const char *what = "a kept and a provider's receive, one context";
	struct fi_context2 x;
	int first, second;

	t_name(&x, "x");
	poison(0);
	poison(1);
	kept_recv(k, 0, directed_first, &x);
	kept_recv(k, 1, !directed_first, &x);
	first = kept_send(k, 71, &x, what);
	second = kept_send(k, 72, &x, what);
	t_assert(first == 0 && second == 1, "%s: messages in slots %d, %d",
		 what, first, second);
	t_trace_bytes(dst, 2 * SLOT);
}

/* Two receives with one context, directed first or not; one cancelled. */
static void kept_share_cancel(struct kept *k, bool directed_first)
{
	const char *what = "a cancel of a context a kept and a provider's "
			   "receive share";
	struct fi_context2 y;
	int got;

	t_name(&y, "y");
	poison(0);
	poison(1);
	kept_recv(k, 0, directed_first, &y);
	kept_recv(k, 1, !directed_first, &y);
	kept_cancel(k, &y, what);
	got = kept_send(k, 73, &y, what);
	t_assert(poisoned(!got), "%s: the cancelled receive was written",
		 what);
	t_assert(t_quiet(k->r.cq, 50), "%s: a completion more", what);
	t_trace_bytes(dst, 2 * SLOT);
	t_trace("kept: posted %s first, the %s one cancelled",
		directed_first ? "directed" : "any-source",
		(got == 0) == directed_first ? "any-source" : "directed");
}

static void kept(void)
{
	const char *what = "kept receives";
	struct fi_context2 w;
	struct kept k;

	if (!shared_ok) {
		t_trace("kept: not legal here (FI_CONTEXT mode)");
		return;
	}
	if (FI_MAJOR(fi_version()) >= 2 && strcmp(t_prov, "sockets") &&
	    strcmp(t_prov, "udp;ofi_rxd") &&
	    t_no_oracle("kept: not compared, %s alone crashes", t_prov))
		return;
	if (t_try_open(&k.f, hints(FI_MSG | FI_DIRECTED_RECV)) ==
	    -FI_ENODATA) {
		t_trace("kept: no FI_DIRECTED_RECV here");
		return;
	}
	t_ep_open(&k.s, &k.f, NULL);
	t_ep_open(&k.r, &k.f, NULL);
	k.to = t_insert(&k.s, k.r.name);
	k.from = t_insert(&k.r, k.s.name);
	t_reg(&k.f, src, NSLOT * SLOT, FI_SEND, 6, &k.src);
	t_reg(&k.f, dst, NSLOT * SLOT, FI_RECV, 7, &k.dst);
	kept_fill(&k, true);
	kept_fill(&k, false);
	t_trace("kept: one context, messages in posting order");
	kept_share_cancel(&k, true);
	kept_share_cancel(&k, false);
	t_name(&w, "w");
	poison(0);
	kept_recv(&k, 0, true, &w);
	kept_cancel(&k, &w, what);
	t_assert(t_quiet(k.r.cq, 50), "%s: a completion more", what);
	t_assert(poisoned(0), "%s: the cancelled receive was written", what);
	t_trace_bytes(dst, SLOT);
	t_trace("kept: a directed receive cancelled");
	t_fi(fi_close(&k.src.mr->fid));
	t_fi(fi_close(&k.dst.mr->fid));
	t_ep_close(&k.s);
	t_ep_close(&k.r);
	t_close(&k.f);
	t_ok("%s: the provider's outcomes", what);
}

/* An inject over inject_size from host memory (some providers take one:
 * tcp;ofi_rxm, seed 6 of tests/fuzz), then a send of src's slot 3 no
 * longer than inject_size, into host receives: the provider holds the
 * inject, and would copy it into a device receive itself (README,
 * Limits). */
static void host_recv(int i, void *ctx)
{
	t_post(ep[B].cq, fi_recv(ep[B].ep, hdst + i * (SLOT / 2), SLOT / 2,
				 hdst_mr.desc, FI_ADDR_UNSPEC, ctx));
}

static void order(void)
{
	const char *what = "an inject over inject_size, then a send";
	size_t big = fab.info->tx_attr->inject_size + 1;
	size_t small = big - 1 < LEN ? big - 1 : LEN;
	struct fi_context2 r1, r2, s;
	struct ent g;
	ssize_t ret;

	if (big > SLOT / 2) {
		t_trace("order: inject_size %zu, no inject over it "
			"here", big - 1);
		return;
	}
	names(3, &r1, "r1", &r2, "r2", &s, "s");
	memset(hdst, 0xa5, SLOT);
	t_fill(hsrc, big, 41);
	t_fill(scratch, small, 42);
	t_mem_put(src + 3 * SLOT, scratch, small);
	/* Until the provider has connected a to b: both make progress. */
	while ((ret = fi_inject(ep[A].ep, hsrc, big, addr[A][B])) ==
	       -FI_EAGAIN) {
		(void) fi_cq_read(ep[A].cq, NULL, 0);
		(void) fi_cq_read(ep[B].cq, NULL, 0);
	}
	if (t_trace_ret("fi_inject", ret)) {
		t_trace("order: an inject over inject_size: %s",
			fi_strerror((int) -ret));
		return;
	}
	t_post(ep[A].cq, fi_send(ep[A].ep, src + 3 * SLOT, small, src_mr.desc,
				 addr[A][B], &s));
	tx_done(A, &s, what);
	host_recv(0, &r1);
	g = next(B, what);
	t_assert(g.ctx == &r1 && !g.err && g.len == big, "%s: the first "
		 "receive: context %p err %d len %zu, expected the inject's "
		 "%zu bytes (FI_ORDER_SAS)", what, g.ctx, g.err, g.len, big);
	host_recv(1, &r2);
	g = next(B, what);
	t_assert(g.ctx == &r2 && !g.err && g.len == small, "%s: the second "
		 "receive: context %p err %d len %zu, expected the send's %zu "
		 "bytes", what, g.ctx, g.err, g.len, small);
	quiet(B, what);
	t_assert(t_check(hdst, big, 41), "%s: the first receive lacks the "
		 "inject's bytes", what);
	t_assert(t_check(hdst + SLOT / 2, small, 42), "%s: the second "
		 "receive lacks the send's bytes", what);
	t_trace_bytes(hdst, SLOT);
	t_trace("order: the inject in the first receive, the send in "
		"the second");
	t_ok("%s: matched in send order", what);
}

static void open_all(void)
{
	if (t_try_open(&fab, hints(FI_MSG)) == -FI_ENODATA)
		t_skip("provider %s is not available here with FI_MSG and "
		       "FI_ORDER_SAS", t_prov);
	shared_ok = !(fab.info->mode & (FI_CONTEXT | FI_CONTEXT2));
	for (int e = 0; e < NEP; e++) {
		t_ep_open(&ep[e], &fab, &(struct t_opts) {
			.cq_format = e >= C ? FI_CQ_FORMAT_CONTEXT :
					      FI_CQ_FORMAT_TAGGED });
		t_name(ep[e].cq, "%c", 'a' + e);
	}
	for (int from = 0; from < NEP; from++)
		for (int to = 0; to < NEP; to++)
			addr[from][to] = t_insert(&ep[from], ep[to].name);
	src = t_mem_alloc(NSLOT * SLOT);
	dst = t_mem_alloc(NSLOT * SLOT);
	t_reg(&fab, src, NSLOT * SLOT, FI_SEND, 1, &src_mr);
	t_reg(&fab, dst, NSLOT * SLOT, FI_RECV, 2, &dst_mr);
	t_reg(&fab, hsrc, SLOT, FI_SEND, 3, &hsrc_mr);
	t_reg(&fab, hdst, SLOT, FI_RECV, 4, &hdst_mr);
	t_name_buf(src, NSLOT * SLOT, "src");
	t_name_buf(dst, NSLOT * SLOT, "dst");
	t_name_buf(hsrc, SLOT, "hsrc");
	t_name_buf(hdst, SLOT, "hdst");
}

static void close_all(void)
{
	struct t_mr *mrs[] = { &src_mr, &dst_mr, &hsrc_mr, &hdst_mr };

	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		t_fi(fi_close(&mrs[i]->mr->fid));
	for (int e = 0; e < NEP; e++)
		t_ep_close(&ep[e]);
	t_close(&fab);
	t_mem_free(src);
	t_mem_free(dst);
}

static const struct t_case cases[] = {
	T_CASE("shared", shared),
	T_CASE("format", format),
	T_CASE("cancel", cancel),
	T_CASE("nocontext", nocontext),
	T_CASE("bounded", bounded),
	T_CASE("rxcntr", rxcntr),
	T_CASE("txcntr", txcntr),
	T_CASE("kept", kept),
	T_CASE("order", order),
};

T_MAIN(cases, .flags = T_CUDA | T_HOST | T_TRACE, .setup = open_all,
       .teardown = close_all);
