/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Device messages: every send and receive call between endpoints of this
 * process, on CUDA device memory and host memory. Through hmemloop each
 * message must land byte-exact in the receive it matches, and complete,
 * count and fail as a provider would; without it the first device message
 * fails (see reproducer.c).
 *
 * Endpoints a, b, c (bound with FI_SELECTIVE_COMPLETION) and m (for
 * multi-receive buffers) share one domain; each has its own CQ, FI_SEND
 * and FI_RECV counters, and an AV holding all four. Shared receive
 * contexts get a domain of their own. The race runs this program again as
 * a peer process ("-P FDS"), which sends host messages to b through the
 * provider while this process sends device messages to b. "-c NAME,..."
 * runs only the cases named.
 *
 * msg.c: the fixture, one message and its checks, main; msg_calls.c: the
 * calls, truncation, queued messages, matching, selective completion;
 * msg_race.c: the race; msg_rx.c: multi-receive buffers, shared receive
 * contexts, closing with messages held.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "msg.h"

unsigned next_seed(void)
{
	static unsigned seed = 0x3e55a9e;

	return seed += 0x9e3779b1u;
}

void note(const char *fmt, ...)
{
	T_SAY("note", fmt);
}

/* ---- buffers ----------------------------------------------------------- */

struct buf bufs[NBUF] = {
	[SH] = { "host source", false },
	[SD] = { "device source", true },
	[DH] = { "host destination", false },
	[DD] = { "device destination", true },
};

uint8_t *scratch, *msgbuf;

const struct mem mems[3] = {
	{ SD, DD, "device to device" },
	{ SH, DD, "host to device" },
	{ SD, DH, "device to host" },
};

void put(int b, size_t off, const void *src, size_t n)
{
	if (!n)
		return;
	if (bufs[b].dev)
		t_dev_put(bufs[b].p + off, src, n);
	else
		memcpy(bufs[b].p + off, src, n);
}

/* No synchronization: a copy hmemloop left in flight shows. */
void get(void *dst, int b, size_t off, size_t n)
{
	if (!n)
		return;
	if (bufs[b].dev)
		t_dev_get(dst, bufs[b].p + off, n);
	else
		memcpy(dst, bufs[b].p + off, n);
}

void poison(int b, size_t lo, size_t n)
{
	t_fill(bufs[b].shadow + lo, n, next_seed());
	put(b, lo, bufs[b].shadow + lo, n);
}

void verify(int b, size_t lo, size_t n, const char *what)
{
	const uint8_t *want = bufs[b].shadow + lo;
	size_t i, bad = 0, first = 0;

	get(scratch, b, lo, n);
	if (!memcmp(scratch, want, n))
		return;
	for (i = 0; i < n; i++)
		if (scratch[i] != want[i] && !bad++)
			first = i;
	t_fail("%s: %s: byte %zu is %#x, expected %#x (%zu of bytes %zu..%zu "
	       "wrong)", what, bufs[b].name, lo + first, scratch[first],
	       want[first], bad, lo, lo + n - 1);
}

size_t total(const struct region *r)
{
	size_t t = 0;

	for (size_t i = 0; i < r->n; i++)
		t += r->len[i];
	return t;
}

size_t extent(const struct region *r)
{
	return total(r) + (r->n - 1) * GAP;
}

static size_t piece_at(const struct region *r, size_t i)
{
	size_t at = r->off;

	for (size_t k = 0; k < i; k++)
		at += r->len[k] + GAP;
	return at;
}

/* len bytes in n unequal pieces (each at least 1 byte if len >= 8). */
struct region region(int b, int dom, size_t off, size_t len, size_t n)
{
	struct region r = { .b = b, .dom = dom, .off = off, .n = n };

	if (n == 1) {
		r.len[0] = len;
	} else if (n == 2) {
		r.len[0] = len / 3;
		r.len[1] = len - len / 3;
	} else {
		r.len[0] = len / 2;
		r.len[1] = len / 5;
		r.len[2] = len - len / 2 - len / 5;
	}
	return r;
}

static void iovs(const struct region *r, struct iovec *iov, void **desc)
{
	for (size_t i = 0; i < r->n; i++) {
		iov[i].iov_base = bufs[r->b].p + piece_at(r, i);
		iov[i].iov_len = r->len[i];
		desc[i] = bufs[r->b].mr[r->dom].desc;
	}
}

/* The message: bytes (total(r) of them) written into a source region. */
void load(const struct region *r, const uint8_t *bytes)
{
	for (size_t i = 0, at = 0; i < r->n; at += r->len[i++])
		put(r->b, piece_at(r, i), bytes + at, r->len[i]);
}

/* Fresh poison around and in a receive region. */
void poison_rx(const struct region *r)
{
	poison(r->b, r->off - PAD, extent(r) + 2 * PAD);
}

/* What a receive region must hold once n bytes landed in it. */
void land(const struct region *r, const uint8_t *bytes, size_t n)
{
	for (size_t i = 0; i < r->n && n; i++) {
		size_t k = r->len[i] < n ? r->len[i] : n;

		memcpy(bufs[r->b].shadow + piece_at(r, i), bytes, k);
		bytes += k;
		n -= k;
	}
}

void verify_rx(const struct region *r, const char *what)
{
	verify(r->b, r->off - PAD, extent(r) + 2 * PAD, what);
}

/* ---- endpoints ---------------------------------------------------------- */

struct fx fx;

static struct ep *eps[8];
static int neps;

/* Every fabric's hints: contexts the provider may ask for, messages in
 * order where sas. */
static struct t_opts opts(uint64_t caps, bool sas, bool shared)
{
	return (struct t_opts) {
		.caps = caps,
		.mode = FI_CONTEXT | FI_CONTEXT2,
		.msg_order = sas ? FI_ORDER_SAS : 0,
		.shared_rx = shared,
	};
}

int open_fabric(struct t_fabric *f, uint64_t caps, bool sas, bool shared)
{
	struct t_opts o = opts(caps, sas, shared);

	return t_try_open(f, &o);
}

bool supported(uint64_t caps, bool sas, bool shared)
{
	struct t_opts o = opts(caps, sas, shared);

	return t_offers(&o);
}

void ep_open(struct ep *e, struct t_fabric *f, const char *name,
		    bool selective, struct fid_ep *srx, size_t min_multi)
{
	size_t got = 0, len = sizeof(got);

	memset(e, 0, sizeof(*e));
	e->name = name;
	e->selective = selective;
	e->from = f->info->caps & FI_SOURCE;
	t_ep_open(&e->t, f, &(struct t_opts) {
		.cq_flags = selective ? FI_SELECTIVE_COMPLETION : 0,
		.own_cntr = { FI_SEND, FI_RECV },
		.srx = srx,
		.min_multi = min_multi,
	});
	if (min_multi && !fi_getopt(&e->t.ep->fid, FI_OPT_ENDPOINT,
				    FI_OPT_MIN_MULTI_RECV, &got, &len))
		t_assert(got == min_multi, "%s: FI_OPT_MIN_MULTI_RECV reads %zu "
			 "after setting %zu", name, got, min_multi);
	eps[neps++] = e;
}

void ep_close(struct ep *e)
{
	for (int i = 0; i < neps; i++)
		if (eps[i] == e)
			eps[i] = eps[--neps];
	t_ep_close(&e->t);
}

/* Every counter of every endpoint at what it must be: waited for (within
 * the wait), then compared exactly. */
void counts(const char *what)
{
	static const char *const which[2] = { "FI_SEND", "FI_RECV" };
	double end = t_now() + t_wait_s();
	uint64_t v[8][2][2];
	bool short_;

	do {
		short_ = false;
		for (int i = 0; i < neps; i++) {
			for (int k = 0; k < 2; k++) {
				v[i][k][0] = fi_cntr_read(eps[i]->t.cntr[k]);
				v[i][k][1] = fi_cntr_readerr(eps[i]->t.cntr[k]);
				short_ |= v[i][k][0] < eps[i]->want[k][0] ||
					  v[i][k][1] < eps[i]->want[k][1];
			}
		}
		if (short_)
			t_drive(eps[0]->t.cq);
	} while (short_ && t_now() < end);
	for (int i = 0; i < neps; i++)
		for (int k = 0; k < 2; k++)
			for (int j = 0; j < 2; j++)
				t_assert(v[i][k][j] == eps[i]->want[k][j],
					 "%s: %s's %s counter %s is %lu, "
					 "expected %lu", what, eps[i]->name,
					 which[k], j ? "error count" : "count",
					 (unsigned long) v[i][k][j],
					 (unsigned long) eps[i]->want[k][j]);
}

/* ---- operations --------------------------------------------------------- */

const char *const sop_names[NSOP] = {
	"fi_send", "fi_sendv", "fi_sendmsg", "fi_senddata", "fi_inject",
	"fi_injectdata", "fi_tsend", "fi_tsendv", "fi_tsendmsg",
	"fi_tsenddata", "fi_tinject", "fi_tinjectdata",
};

const char *const rop_names[NROP] = {
	"fi_recv", "fi_recvv", "fi_recvmsg", "fi_trecv", "fi_trecvv",
	"fi_trecvmsg",
};

size_t s_niov(enum sop s)
{
	size_t n = s % 6 == SENDV ? 3 : s % 6 == SENDMSG ? 2 : 1;

	return n < fx.iov_limit ? n : fx.iov_limit;
}

size_t r_niov(enum rop r)
{
	size_t n = r % 3 == RECVV ? 3 : r % 3 == RECVMSG ? 2 : 1;

	return n < fx.iov_limit ? n : fx.iov_limit;
}

static ssize_t send_once(const struct tx *x)
{
	struct iovec iov[MAXIOV];
	void *desc[MAXIOV];
	struct fid_ep *ep = x->from->t.ep;
	struct fi_msg msg = {
		.msg_iov = iov, .desc = desc, .iov_count = x->r.n,
		.addr = x->dest, .context = x->ctx, .data = x->data,
	};
	struct fi_msg_tagged tmsg = {
		.msg_iov = iov, .desc = desc, .iov_count = x->r.n,
		.addr = x->dest, .tag = x->tag, .context = x->ctx,
		.data = x->data,
	};
	void *buf;
	size_t len;

	iovs(&x->r, iov, desc);
	buf = iov[0].iov_base;
	len = iov[0].iov_len;
	switch (x->op) {
	case SEND:
		return fi_send(ep, buf, len, desc[0], x->dest, x->ctx);
	case SENDV:
		return fi_sendv(ep, iov, desc, x->r.n, x->dest, x->ctx);
	case SENDMSG:
		return fi_sendmsg(ep, &msg, x->flags);
	case SENDDATA:
		return fi_senddata(ep, buf, len, desc[0], x->data, x->dest,
				   x->ctx);
	case INJECT:
		return fi_inject(ep, buf, len, x->dest);
	case INJECTDATA:
		return fi_injectdata(ep, buf, len, x->data, x->dest);
	case TSEND:
		return fi_tsend(ep, buf, len, desc[0], x->dest, x->tag, x->ctx);
	case TSENDV:
		return fi_tsendv(ep, iov, desc, x->r.n, x->dest, x->tag,
				 x->ctx);
	case TSENDMSG:
		return fi_tsendmsg(ep, &tmsg, x->flags);
	case TSENDDATA:
		return fi_tsenddata(ep, buf, len, desc[0], x->data, x->dest,
				    x->tag, x->ctx);
	case TINJECT:
		return fi_tinject(ep, buf, len, x->dest, x->tag);
	default:
		return fi_tinjectdata(ep, buf, len, x->data, x->dest, x->tag);
	}
}

static ssize_t recv_once(const struct rx *x)
{
	struct iovec iov[MAXIOV];
	void *desc[MAXIOV];
	struct fi_msg msg = {
		.msg_iov = iov, .desc = desc, .iov_count = x->r.n,
		.addr = x->src, .context = x->ctx,
	};
	struct fi_msg_tagged tmsg = {
		.msg_iov = iov, .desc = desc, .iov_count = x->r.n,
		.addr = x->src, .tag = x->tag, .ignore = x->ignore,
		.context = x->ctx,
	};

	iovs(&x->r, iov, desc);
	switch (x->op) {
	case RECV:
		return fi_recv(x->ep, iov[0].iov_base, iov[0].iov_len, desc[0],
			       x->src, x->ctx);
	case RECVV:
		return fi_recvv(x->ep, iov, desc, x->r.n, x->src, x->ctx);
	case RECVMSG:
		return fi_recvmsg(x->ep, &msg, x->flags);
	case TRECV:
		return fi_trecv(x->ep, iov[0].iov_base, iov[0].iov_len,
				desc[0], x->src, x->tag, x->ignore, x->ctx);
	case TRECVV:
		return fi_trecvv(x->ep, iov, desc, x->r.n, x->src, x->tag,
				 x->ignore, x->ctx);
	default:
		return fi_trecvmsg(x->ep, &tmsg, x->flags);
	}
}

void do_send(const struct tx *x)
{
	RETRY(x->from->t.cq, send_once(x), sop_names[x->op]);
}

void do_recv(const struct rx *x)
{
	RETRY(x->cq_of->t.cq, recv_once(x), rop_names[x->op]);
}

/* ---- completions -------------------------------------------------------- */

int next(struct ep *ep, struct got *g, double seconds)
{
	double end = t_now() + seconds;
	ssize_t ret;

	memset(g, 0, sizeof(*g));
	for (;;) {
		g->src = FI_ADDR_NOTAVAIL;
		ret = ep->from ? fi_cq_readfrom(ep->t.cq, &g->e, 1, &g->src) :
				 fi_cq_read(ep->t.cq, &g->e, 1);
		if (ret == 1)
			return 0;
		if (ret == -FI_EAVAIL) {
			t_assert(fi_cq_readerr(ep->t.cq, &g->x, 0) == 1,
				 "fi_cq_readerr after -FI_EAVAIL: no entry");
			g->err = true;
			return 0;
		}
		if (ret != -FI_EAGAIN)
			t_fail("fi_cq_read: %zd (%s)", ret,
			       fi_strerror((int) -ret));
		t_drive(ep->t.cq);
		if (t_now() > end)
			return -FI_EAGAIN;
	}
}

struct want want_tx(void *ctx, bool tagged)
{
	return (struct want) { .ctx = ctx, .tagged = tagged,
		.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_SEND };
}

struct want want_rx(void *ctx, bool tagged, size_t len, uint64_t tag,
			   bool data, uint64_t value, fi_addr_t src)
{
	return (struct want) { .ctx = ctx, .rx = true, .tagged = tagged,
		.flags = (tagged ? FI_TAGGED : FI_MSG) | FI_RECV |
			 (data ? FI_REMOTE_CQ_DATA : 0),
		.len = len, .tag = tag, .data = value, .src = src };
}

static void check_entry(const struct want *w, const struct got *g,
			const char *what)
{
	const char *side = w->rx ? "receive" : "send";

	if (w->err) {
		t_assert(g->err, "%s: %s (context %p) succeeded, expected "
			 "error %s", what, side, w->ctx, fi_strerror(w->err));
		t_assert(g->x.err == w->err, "%s: %s error %d (%s), "
			 "expected %s", what, side, g->x.err,
			 fi_strerror(g->x.err), fi_strerror(w->err));
		t_assert(g->x.olen == w->olen, "%s: %s olen %zu, expected "
			 "%zu", what, side, g->x.olen, w->olen);
		t_assert(!w->rx || g->x.len == w->len, "%s: %s error entry "
			 "len %zu, expected %zu", what, side, g->x.len, w->len);
		t_assert(!w->rx || !w->tagged || g->x.tag == w->tag, "%s: %s "
			 "error entry tag %#lx, expected %#lx", what, side,
			 (unsigned long) g->x.tag, (unsigned long) w->tag);
		return;
	}
	t_assert(!g->err, "%s: %s (context %p): error %d (%s), prov_errno "
		 "%d, olen %zu", what, side, w->ctx, g->x.err,
		 fi_strerror(g->x.err), g->x.prov_errno, g->x.olen);
	t_assert(g->e.flags == w->flags, "%s: %s flags %#lx, expected %#lx",
		 what, side, (unsigned long) g->e.flags,
		 (unsigned long) w->flags);
	if (!w->rx)
		return;
	t_assert(g->e.len == w->len, "%s: receive len %zu, expected %zu",
		 what, g->e.len, w->len);
	t_assert(!w->tagged || g->e.tag == w->tag, "%s: receive tag %#lx, "
		 "expected %#lx", what, (unsigned long) g->e.tag,
		 (unsigned long) w->tag);
	t_assert(!(w->flags & FI_REMOTE_CQ_DATA) || g->e.data == w->data,
		 "%s: receive data %#lx, expected %#lx", what,
		 (unsigned long) g->e.data, (unsigned long) w->data);
	t_assert(!w->buf || g->e.buf == w->buf, "%s: receive buf %p, "
		 "expected %p", what, g->e.buf, w->buf);
	t_assert(w->src == FI_ADDR_UNSPEC || g->src == w->src, "%s: "
		 "fi_cq_readfrom gave source %#lx, expected %#lx", what,
		 (unsigned long) g->src, (unsigned long) w->src);
}

/* Exactly these n entries on ep's CQ, in order if asked, then none. */
void expect(struct ep *ep, struct want *w, size_t n, bool ordered,
		   const char *what)
{
	for (size_t k = 0; k < n; k++)
		w[k].hit = false;
	for (size_t k = 0; k < n; k++) {
		struct got g;
		void *ctx;
		size_t i;

		t_assert(!next(ep, &g, t_wait_s()), "%s: %s: completion %zu of "
			 "%zu did not come", what, ep->name, k + 1, n);
		ctx = g.err ? g.x.op_context : g.e.op_context;
		for (i = ordered ? k : 0; i < n; i++)
			if (!w[i].hit && w[i].ctx == ctx)
				break;
		if (i == n || (ordered && i != k))
			t_fail("%s: %s: %s entry for context %p (flags %#lx, "
			       "len %zu, err %d), expected %s", what, ep->name,
			       g.err ? "an error" : "an", ctx,
			       (unsigned long) (g.err ? g.x.flags : g.e.flags),
			       g.err ? g.x.len : g.e.len, g.err ? g.x.err : 0,
			       ordered && i != k ? "another first" :
			       "none for it");
		w[i].hit = true;
		check_entry(&w[i], &g, what);
	}
	t_assert(t_quiet(ep->t.cq, QUIET_MS), "%s: %s: more completions than "
		 "%zu", what, ep->name, n);
}

void quiet(struct ep *ep, const char *what)
{
	t_assert(t_quiet(ep->t.cq, QUIET_MS), "%s: %s has a completion",
		 what, ep->name);
}

/* ---- one message -------------------------------------------------------- */

struct path path(int from, int to)
{
	return (struct path) {
		.from = &fx.ep[from], .to = &fx.ep[to],
		.rx = fx.ep[to].t.ep, .dest = fx.addr[from][to],
		.src = fx.source ? fx.addr[to][from] : FI_ADDR_UNSPEC,
	};
}

/* Send one message and receive it: bytes, entries, counters. */
void message(const struct mc *k, const char *what)
{
	const struct path *p = k->p;
	bool tagged = s_tagged(k->s), trunc = k->rcap < k->len;
	bool data = s_data(k->s) || (s_msg(k->s) && k->data);
	size_t delivered = trunc ? k->rcap : k->len;
	struct want w[2];
	CTX(sctx);
	CTX(rctx);
	struct tx tx = {
		.op = k->s, .from = p->from, .dest = p->dest,
		.r = region(k->sb, p->dom, PAD, k->len, s_niov(k->s)),
		.tag = 0x10000 + (next_seed() & 0xffff),
		.data = ((uint64_t) next_seed() << 32 | next_seed()) &
			fx.data_mask,
		.flags = k->sflags | (data && s_msg(k->s) ?
				      FI_REMOTE_CQ_DATA : 0),
		.ctx = sctx,
	};
	struct rx rx = {
		.op = k->r, .ep = p->rx, .cq_of = p->to, .src = FI_ADDR_UNSPEC,
		.r = region(k->db, p->dom, PAD, k->rcap, r_niov(k->r)),
		.tag = tx.tag, .flags = k->rflags, .ctx = rctx,
	};
	bool want_s = !s_inject(k->s) && (!p->from->selective ||
		(s_msg(k->s) ? k->sflags : fx.tx_flags) & FI_COMPLETION);
	bool want_r = trunc || !p->to->selective ||
		(r_msg(k->r) ? k->rflags : fx.rx_flags) & FI_COMPLETION;
	size_t ns = 0, nr = 0;

	if (k->len < 8 || k->rcap < 8)
		tx.r = region(k->sb, p->dom, PAD, k->len, 1);
	if (k->rcap < 8)
		rx.r = region(k->db, p->dom, PAD, k->rcap, 1);
	t_fill(msgbuf, k->len, next_seed());
	load(&tx.r, msgbuf);
	poison_rx(&rx.r);

	if (!k->send_first)
		do_recv(&rx);
	do_send(&tx);
	/* An injected buffer is the caller's again at once. */
	if (s_inject(k->s)) {
		t_fill(scratch, k->len, next_seed());
		load(&tx.r, scratch);
	}
	if (k->send_first)
		do_recv(&rx);

	if (want_s)
		w[ns++] = want_tx(sctx, tagged);
	if (want_r) {
		struct want *v = &w[ns + nr++];

		*v = want_rx(rctx, tagged, delivered, tx.tag, data, tx.data,
			     p->src);
		if (trunc) {
			v->err = FI_ETRUNC;
			v->olen = k->len - k->rcap;
		}
	}
	if (p->from == p->to) {
		expect(p->from, w, ns + nr, false, what);
	} else {
		expect(p->from, w, ns, false, what);
		expect(p->to, w + ns, nr, false, what);
	}
	p->from->want[0][0]++;
	p->to->want[1][trunc]++;
	counts(what);
	land(&rx.r, msgbuf, delivered);
	verify_rx(&rx.r, what);
}

/* ---- slots -------------------------------------------------------------- */

/* A receive in slot i of the device destination, a message from slot i of
 * the device source. */
struct rx slot_rx(const struct path *p, enum rop op, int i,
			 fi_addr_t src, uint64_t tag, uint64_t ignore,
			 void *ctx)
{
	struct rx x = {
		.op = op, .ep = p->rx, .cq_of = p->to, .src = src,
		.r = region(DD, p->dom, i * MSLOT + PAD, MSLOT - 2 * PAD, 1),
		.tag = tag, .ignore = ignore, .flags = FI_COMPLETION,
		.ctx = ctx,
	};

	poison_rx(&x.r);
	return x;
}

struct tx slot_tx(const struct path *p, enum sop op, int i, size_t len,
			 uint64_t tag, void *ctx, uint8_t *bytes)
{
	struct tx x = {
		.op = op, .from = p->from, .dest = p->dest,
		.r = region(SD, p->dom, i * MSLOT + PAD, len, 1),
		.tag = tag, .flags = FI_COMPLETION, .ctx = ctx,
	};

	t_fill(bytes, len, next_seed());
	load(&x.r, bytes);
	return x;
}

/* x's message is in r: its completion on p's receiver, sender's on p's
 * sender; bytes and counters. */
void arrived(const struct path *p, const struct tx *x,
		    const struct rx *r, const uint8_t *bytes, const char *what)
{
	bool tagged = s_tagged(x->op);
	size_t len = total(&x->r);
	struct want ws = want_tx(x->ctx, tagged);
	struct want wr = want_rx(r->ctx, tagged, len, x->tag, false, 0, p->src);

	if (p->from == p->to) {
		struct want w[2] = { ws, wr };

		expect(p->from, w, 2, false, what);
	} else {
		expect(p->from, &ws, 1, false, what);
		expect(p->to, &wr, 1, false, what);
	}
	p->from->want[0][0]++;
	p->to->want[1][0]++;
	counts(what);
	land(&r->r, bytes, len);
	verify_rx(&r->r, what);
}

/* ---- set-up ------------------------------------------------------------------ */

static void fx_open(void)
{
	const uint64_t base = FI_MSG | FI_TAGGED;
	struct fi_info *i;

	fx.sas = supported(base, true, false);
	if (!supported(base, fx.sas, false))
		t_skip("provider %s is not available here with FI_MSG and "
		       "FI_TAGGED", t_prov);
	fx.directed = supported(base | FI_DIRECTED_RECV, fx.sas, false);
	fx.source = supported(base | FI_SOURCE, fx.sas, false);
	fx.multi = supported(base | FI_MULTI_RECV, fx.sas, false);
	fx.caps = base | (fx.directed ? FI_DIRECTED_RECV : 0) |
		  (fx.source ? FI_SOURCE : 0) |
		  (fx.multi ? FI_MULTI_RECV : 0);
	t_assert(!open_fabric(&fx.f, fx.caps, fx.sas, false),
		 "%s: no domain with %#llx", t_prov,
		 (unsigned long long) fx.caps);
	i = fx.f.info;
	fx.inject = i->tx_attr->inject_size;
	fx.iov_limit = i->tx_attr->iov_limit < i->rx_attr->iov_limit ?
		       i->tx_attr->iov_limit : i->rx_attr->iov_limit;
	if (fx.iov_limit > MAXIOV)
		fx.iov_limit = MAXIOV;
	fx.data_mask = i->domain_attr->cq_data_size >= 8 ? ~0ULL :
		       (1ULL << 8 * i->domain_attr->cq_data_size) - 1;
	fx.tx_flags = i->tx_attr->op_flags;
	fx.rx_flags = i->rx_attr->op_flags;
	printf("%s: inject_size %zu, iov_limit %zu, cq_data_size %zu, "
	       "FI_ORDER_SAS %s, FI_DIRECTED_RECV %s, FI_SOURCE %s, "
	       "FI_MULTI_RECV %s\n", t_prov, fx.inject, fx.iov_limit,
	       i->domain_attr->cq_data_size, fx.sas ? "yes" : "no",
	       fx.directed ? "yes" : "no", fx.source ? "yes" : "no",
	       fx.multi ? "yes" : "no");
	if (!fx.source)
		note("%s has no FI_SOURCE: fi_cq_readfrom sources not checked",
		     t_prov);

	ep_open(&fx.ep[A], &fx.f, "a", false, NULL, 0);
	ep_open(&fx.ep[B], &fx.f, "b", false, NULL, 0);
	ep_open(&fx.ep[C], &fx.f, "c", true, NULL, 0);
	ep_open(&fx.ep[M], &fx.f, "m", false, NULL,
		fx.multi ? MULTI_MIN : 0);
	/* Every endpoint in every AV: all of them are tracked. */
	for (int from = 0; from < NEP; from++)
		for (int to = 0; to < NEP; to++)
			fx.addr[from][to] = t_insert(&fx.ep[from].t,
						     fx.ep[to].t.name);
	for (int b = 0; b < NBUF; b++)
		t_reg(&fx.f, bufs[b].p, BUFSZ, FI_SEND | FI_RECV, 1 + b,
		      &bufs[b].mr[0]);
}

static void fx_close(void)
{
	for (int b = 0; b < NBUF; b++)
		t_fi(fi_close(&bufs[b].mr[0].mr->fid));
	for (int e = 0; e < NEP; e++)
		ep_close(&fx.ep[e]);
	t_close(&fx.f);
	for (int b = 0; b < NBUF; b++) {
		if (bufs[b].dev)
			t_dev_free(bufs[b].p);
		else
			free(bufs[b].p);
		free(bufs[b].shadow);
	}
	free(scratch);
	free(msgbuf);
}

static void buffers(void)
{
	for (int b = 0; b < NBUF; b++) {
		bufs[b].p = bufs[b].dev ? t_dev_alloc(BUFSZ) :
			    aligned_alloc(4096, BUFSZ);
		bufs[b].shadow = malloc(BUFSZ);
		t_assert(bufs[b].p && bufs[b].shadow, "out of memory");
	}
	scratch = malloc(BUFSZ);
	msgbuf = malloc(BUFSZ);
	t_assert(scratch && msgbuf, "out of memory");
}

static void queued_untagged(void) { queued(false); }
static void queued_tagged(void) { queued(true); }

static const struct t_case cases[] = {
	T_CASE("calls", calls),
	T_CASE("truncation", truncation),
	T_CASE("queued", queued_untagged),
	T_CASE("queued", queued_tagged),
	T_CASE("matching", matching),
	T_CASE("selective", selective),
	T_CASE("race", race),
	T_CASE("closing", closing),
	T_CASE("multi", multi),
	T_CASE("unreported", unreported),
	T_CASE("nocontext", nocontext),
	T_CASE("srx", srx),
};

/* -P RFD,WFD,CAPS,SAS: the race's peer (msg_race.c), on those pipes. */
static int rfd = -1, wfd;
static double t0;

static void peer_opt(int c, const char *arg)
{
	unsigned long long caps;
	int sas;

	(void) c;
	if (sscanf(arg, "%d,%d,%llx,%d", &rfd, &wfd, &caps, &sas) != 4)
		t_fail("-P %s: not RFD,WFD,CAPS,SAS", arg);
	fx.caps = caps;
	fx.sas = sas;
	fx.source = caps & FI_SOURCE;
}

static void setup(void)
{
	t0 = t_now();
	if (rfd >= 0)
		exit(peer(rfd, wfd));
	t_cuda_init();
	fx.dbl = t_cuda_double();
	buffers();
	fx_open();
}

static void teardown(void)
{
	fx_close();
	printf("%s: %.1f s\n", t_prov, t_now() - t0);
}

T_MAIN(cases, .opts = "P:", .opt = peer_opt, .setup = setup,
       .teardown = teardown);
