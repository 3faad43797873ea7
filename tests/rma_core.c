/* SPDX-License-Identifier: BSD-2-Clause */
/* The device RMA test's machinery: buffers with shadows of what they
 * must hold, the fixture, and one operation checked end to end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rma.h"

struct buf bufs[NBUF] = {
	[HA] = { "host A", false, BIG, ALL, 0, 1 },
	[HB] = { "host B", false, BIG, ALL, 0, 2 },
	[DA] = { "device A", true, BIG, ALL, 0, 3 },
	[DB] = { "device B", true, BIG, ALL, 0, 4 },
	[RO] = { "device without FI_REMOTE_WRITE", true, SMALL,
		 FI_READ | FI_REMOTE_READ, 0, 5 },
	[WO] = { "device without FI_REMOTE_READ", true, SMALL,
		 FI_WRITE | FI_REMOTE_WRITE, 0, 6 },
	[HB2] = { "host B of domain 2", false, BIG, ALL, 1, 2 },
	[DB2] = { "device B of domain 2", true, BIG, ALL, 1, 4 },
};

uint8_t *scratch;
unsigned long copies;

void dev_put(void *dev, const void *host, size_t n)
{
	copies++;
	t_dev_put(dev, host, n);
}

/* No synchronization: a copy hmemloop left in flight shows as old bytes. */
void dev_get(void *host, const void *dev, size_t n)
{
	copies++;
	t_dev_get(host, dev, n);
}

static unsigned next_seed(void)
{
	static unsigned seed = 0x5eed;

	return seed += 0x9e3779b1u;
}

static void fill(struct buf *b, size_t off, size_t len, unsigned seed)
{
	t_fill(b->shadow + off, len, seed);
	if (b->dev)
		dev_put(b->p + off, b->shadow + off, len);
	else
		memcpy(b->p + off, b->shadow + off, len);
}

static void verify(const struct buf *b, size_t off, size_t len,
		   const char *what)
{
	const uint8_t *got = (const uint8_t *) b->p + off;
	size_t i, bad = 0, first = 0;

	if (b->dev) {
		dev_get(scratch, b->p + off, len);
		got = scratch;
	}
	if (!memcmp(got, b->shadow + off, len))
		return;
	for (i = 0; i < len; i++)
		if (got[i] != b->shadow[off + i] && !bad++)
			first = i;
	t_fail("%s: %s: byte %zu is %#x, expected %#x (%zu of bytes %zu..%zu "
	       "wrong)", what, b->name, off + first, got[first],
	       b->shadow[off + first], bad, off, off + len - 1);
}

void verify_all(const char *what)
{
	for (int i = 0; i < NBUF; i++)
		verify(&bufs[i], 0, bufs[i].size, what);
}

void alloc_buffers(void)
{
	scratch = malloc(BIG);
	t_assert(scratch, "out of memory");
	for (int n = 0; n < NBUF; n++) {
		struct buf *b = &bufs[n];

		b->shadow = malloc(b->size);
		b->p = b->dev ? t_dev_alloc(b->size) : malloc(b->size);
		t_assert(b->shadow && b->p, "out of memory");
		fill(b, 0, b->size, next_seed());
	}
}

/* ---- the fixture ------------------------------------------------------- */

/* t_ep_open, with counters bound (given nonzero flags) and the CQ's bind
 * flags chosen. */
static void ep_open(struct t_ep *e, struct t_fabric *f, uint64_t cq_flags,
		    struct fid_cntr **c1, uint64_t f1,
		    struct fid_cntr **c2, uint64_t f2)
{
	t_ep_open(e, f, &(struct t_opts) { .cq_flags = cq_flags,
					   .own_cntr = { f1, f2 } });
	if (c1)
		*c1 = e->cntr[0];
	if (c2)
		*c2 = e->cntr[1];
}

bool chatty = true;

void note(const char *fmt, ...)
{
	if (chatty)
		T_SAY("note", fmt);
}

#define VIRT_PROV (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY)

/* Open everything in one registration mode, or (light) only the first
 * domain with a and b; false if the provider has no such mode. */
bool fx_open(struct fx *x, bool virt, bool light)
{
	struct t_opts o = {
		.mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
			   (virt ? VIRT_PROV : 0),
	};
	struct fi_info *i;
	uint64_t got;

	memset(x, 0, sizeof(*x));
	if (t_try_open(&x->f[0], &o)) {
		if (virt)
			t_skip("provider %s is not available here with FI_RMA",
			       t_prov);
		note("%s gives no domain without FI_MR_VIRT_ADDR and "
		     "FI_MR_PROV_KEY: offsets and requested keys not tested",
		     t_prov);
		return false;
	}
	i = x->f[0].info;
	got = i->domain_attr->mr_mode & VIRT_PROV;
	snprintf(x->mode, sizeof(x->mode), "%s, %s",
		 got & FI_MR_VIRT_ADDR ? "virtual addresses" : "offsets",
		 got & FI_MR_PROV_KEY ? "provider keys" : "requested keys");
	if (got != (virt ? VIRT_PROV : 0))
		note("%s: asked for %s, got %s", t_prov,
		     virt ? "FI_MR_VIRT_ADDR|FI_MR_PROV_KEY" : "neither",
		     x->mode);
	x->inject = i->tx_attr->inject_size;
	x->iov_limit = i->tx_attr->iov_limit;
	x->rma_iov_limit = i->tx_attr->rma_iov_limit;
	x->data_mask = i->domain_attr->cq_data_size >= 8 ? ~0ULL :
		       (1ULL << 8 * i->domain_attr->cq_data_size) - 1;
	x->default_completion = i->tx_attr->op_flags & FI_COMPLETION;
	if (chatty)
		printf("%s [%s]: inject_size %zu, iov_limit %zu, rma_iov_limit "
		       "%zu, tx op_flags %#llx\n", t_prov, x->mode, x->inject,
		       x->iov_limit, x->rma_iov_limit,
		       (unsigned long long) i->tx_attr->op_flags);

	ep_open(&x->a, &x->f[0], 0, &x->ia.wr, FI_WRITE, &x->ia.rd, FI_READ);
	ep_open(&x->b, &x->f[0], 0, NULL, 0, NULL, 0);
	x->ia.ep = &x->a;
	x->tb = (struct tgt) { .ep = &x->b, .addr = t_insert(&x->a, x->b.name) };
	x->ta = (struct tgt) { .ep = &x->a, .addr = t_insert(&x->a, x->a.name) };
	for (int n = 0; n < NBUF; n++) {
		struct buf *b = &bufs[n];

		b->mr.mr = NULL;
		if (!b->dom)
			t_reg(&x->f[0], b->p, b->size, b->access, b->key,
			      &b->mr);
	}
	if (light)
		return true;

	/* The second domain: a fabric of its own, FI_RMA_EVENT if any. */
	o.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_RMA_EVENT;
	x->rma_event = !t_try_open(&x->f[1], &o);
	if (!x->rma_event) {
		note("%s has no FI_RMA_EVENT: target counters not tested",
		     t_prov);
		o.caps = 0;
		t_assert(!t_try_open(&x->f[1], &o),
			 "a second domain like the first: none");
	}

	ep_open(&x->s, &x->f[0], FI_SELECTIVE_COMPLETION, &x->is.wr, FI_WRITE,
		&x->is.rd, FI_READ);
	if (x->rma_event)
		ep_open(&x->c, &x->f[1], 0, &x->tc.rw, FI_REMOTE_WRITE,
			&x->tc.rr, FI_REMOTE_READ);
	else
		ep_open(&x->c, &x->f[1], 0, NULL, 0, NULL, 0);
	x->is.ep = &x->s;
	x->is.selective = true;
	x->tc.ep = &x->c;
	x->tc.dom = 1;
	x->tc.addr = t_insert(&x->a, x->c.name);
	/* s reaches b at the same index as a does. */
	t_assert(t_insert(&x->s, x->b.name) == x->tb.addr,
		 "address vectors disagree");

	for (int n = 0; n < NBUF; n++) {
		struct buf *b = &bufs[n];

		if (b->dom)
			t_reg(&x->f[1], b->p, b->size, b->access, b->key,
			      &b->mr);
	}
	return true;
}

void fx_close(struct fx *x)
{
	for (int n = 0; n < NBUF; n++)
		if (bufs[n].mr.mr)
			t_fi(fi_close(&bufs[n].mr.mr->fid));
	t_ep_close(&x->a);
	t_ep_close(&x->b);
	if (x->s.ep)
		t_ep_close(&x->s);
	if (x->c.ep)
		t_ep_close(&x->c);
	if (x->f[1].domain)
		t_close(&x->f[1]);
	t_close(&x->f[0]);
}

/* A key no region of the domain has. */
uint64_t bad_key(int dom)
{
	for (uint64_t k = 0x7e57ba5e;; k++) {
		bool used = false;

		for (int n = 0; n < NBUF; n++)
			used |= bufs[n].dom == dom && bufs[n].mr.mr &&
				bufs[n].mr.key == k;
		if (!used)
			return k;
	}
}

/* ---- one operation ----------------------------------------------------- */

const char *const op_names[NOPS] = {
	"fi_write", "fi_writev", "fi_writemsg", "fi_inject_write",
	"fi_writedata", "fi_inject_writedata", "fi_read", "fi_readv",
	"fi_readmsg",
};

bool is_read(enum op op)
{
	return op >= READ;
}

bool is_inject(enum op op)
{
	return op == INJECT || op == INJECTDATA;
}

static bool has_data(const struct xfer *x)
{
	return x->op == WRITEDATA || x->op == INJECTDATA ||
	       (x->op == WRITEMSG && (x->flags & FI_REMOTE_CQ_DATA));
}

struct xfer simple(enum op op, int lb, size_t loff, int rb, size_t roff,
		   size_t len)
{
	return (struct xfer) {
		.op = op,
		.flags = FI_COMPLETION,
		.nl = 1, .nr = 1,
		.l = { { .b = lb, .off = loff, .len = len } },
		.r = { { .b = rb, .off = roff, .len = len } },
	};
}

size_t total(const struct piece *p, size_t n)
{
	size_t t = 0;

	for (size_t i = 0; i < n; i++)
		t += p[i].len;
	return t;
}

/* The span of buffer b that x touches, with guard bytes, or all of it. */
static bool span(const struct piece *p, size_t n, int b, bool whole,
		 size_t *lo, size_t *hi)
{
	bool found = false;

	for (size_t i = 0; i < n; i++) {
		if (p[i].b != b)
			continue;
		if (!found || p[i].off < *lo)
			*lo = p[i].off;
		if (!found || p[i].off + p[i].len > *hi)
			*hi = p[i].off + p[i].len;
		found = true;
	}
	if (!found)
		return false;
	*lo = whole || *lo < PAD ? 0 : *lo - PAD;
	*hi = whole || *hi + PAD > bufs[b].size ? bufs[b].size : *hi + PAD;
	if (*lo > bufs[b].size)
		*lo = bufs[b].size;
	return true;
}

/* Fresh bytes in the sources, poison in the destinations. */
void prep(const struct xfer *x, bool whole)
{
	const struct piece *src = is_read(x->op) ? x->r : x->l;
	const struct piece *dst = is_read(x->op) ? x->l : x->r;
	size_t ns = is_read(x->op) ? x->nr : x->nl;
	size_t nd = is_read(x->op) ? x->nl : x->nr;
	size_t lo, hi, lo2, hi2;

	for (int b = 0; b < NBUF; b++) {
		bool s = span(src, ns, b, whole, &lo, &hi);
		bool d = span(dst, nd, b, whole, &lo2, &hi2);

		t_assert(!(s && d), "test bug: %s is source and destination",
			 bufs[b].name);
		if (s)
			fill(&bufs[b], lo, hi - lo, next_seed());
		if (d)
			fill(&bufs[b], lo2, hi2 - lo2, next_seed());
	}
}

/* What a successful x does, done to the shadows. */
void effect(const struct xfer *x)
{
	const struct piece *src = is_read(x->op) ? x->r : x->l;
	const struct piece *dst = is_read(x->op) ? x->l : x->r;
	size_t ns = is_read(x->op) ? x->nr : x->nl;
	size_t nd = is_read(x->op) ? x->nl : x->nr;
	size_t n = total(src, ns), at = 0;
	uint8_t *tmp = malloc(n ? n : 1);

	t_assert(tmp && n == total(dst, nd), "test bug: lengths differ");
	for (size_t i = 0; i < ns; i++) {
		memcpy(tmp + at, bufs[src[i].b].shadow + src[i].off,
		       src[i].len);
		at += src[i].len;
	}
	at = 0;
	for (size_t i = 0; i < nd; i++) {
		memcpy(bufs[dst[i].b].shadow + dst[i].off, tmp + at,
		       dst[i].len);
		at += dst[i].len;
	}
	free(tmp);
}

void check(const struct xfer *x, bool whole, const char *what)
{
	size_t lo, hi;

	for (int b = 0; b < NBUF; b++)
		if (span(x->l, x->nl, b, whole, &lo, &hi) ||
		    span(x->r, x->nr, b, whole, &lo, &hi))
			verify(&bufs[b], lo, hi - lo, what);
}

static ssize_t post_once(struct fid_ep *ep, const struct xfer *x,
			 struct iovec *iov, void **desc,
			 struct fi_rma_iov *riov, fi_addr_t addr, void *ctx,
			 uint64_t data)
{
	struct fi_msg_rma msg = {
		.msg_iov = iov, .desc = desc, .iov_count = x->nl,
		.addr = addr, .rma_iov = riov, .rma_iov_count = x->nr,
		.context = ctx, .data = data,
	};
	void *buf = iov[0].iov_base;
	size_t len = iov[0].iov_len;

	switch (x->op) {
	case WRITE:
		return fi_write(ep, buf, len, desc[0], addr, riov->addr,
				riov->key, ctx);
	case WRITEV:
	case READV:
		return (is_read(x->op) ? fi_readv : fi_writev)(ep, iov, desc,
				x->nl, addr, riov->addr, riov->key, ctx);
	case INJECT:
		return fi_inject_write(ep, buf, len, addr, riov->addr,
				       riov->key);
	case WRITEDATA:
		return fi_writedata(ep, buf, len, desc[0], data, addr,
				    riov->addr, riov->key, ctx);
	case INJECTDATA:
		return fi_inject_writedata(ep, buf, len, data, addr,
					   riov->addr, riov->key);
	case READ:
		return fi_read(ep, buf, len, desc[0], addr, riov->addr,
			       riov->key, ctx);
	default:		/* WRITEMSG, READMSG */
		return (is_read(x->op) ? fi_readmsg : fi_writemsg)(ep, &msg,
								   x->flags);
	}
}

/* Post, retrying while the provider asks to, for at most the wait. */
ssize_t post(struct t_ep *e, const struct tgt *t, const struct xfer *x,
	     void *ctx, uint64_t data)
{
	struct iovec iov[MAXIOV];
	void *desc[MAXIOV];
	struct fi_rma_iov riov[MAXIOV];
	double end = t_now() + t_wait_s();
	ssize_t ret;

	for (size_t i = 0; i < x->nl; i++) {
		t_assert(!bufs[x->l[i].b].dom, "test bug: local %s is not in "
			 "the initiator's domain", bufs[x->l[i].b].name);
		iov[i] = (struct iovec) { bufs[x->l[i].b].p + x->l[i].off,
					  x->l[i].len };
		desc[i] = bufs[x->l[i].b].mr.desc;
	}
	for (size_t i = 0; i < x->nr; i++) {
		const struct piece *p = &x->r[i];
		const struct buf *b = &bufs[p->b];

		t_assert(b->dom == t->dom, "test bug: %s is not in the "
			 "target's domain", b->name);
		riov[i] = (struct fi_rma_iov) {
			p->raw ? p->addr : t_raddr(t->ep->f, &b->mr, p->off),
			p->len, p->key ? p->key : b->mr.key };
	}
	while ((ret = post_once(e->ep, x, iov, desc, riov, t->addr, ctx,
				data)) == -FI_EAGAIN && t_now() < end)
		t_drive(e->cq);
	return ret;
}

/* Counter values: [0] successes, [1] errors, of wr, rd, rw, rr. */
struct counts {
	uint64_t v[4][2];
};

static void snap(const struct ini *in, const struct tgt *t, struct counts *k)
{
	struct fid_cntr *c[4] = { in->wr, in->rd, t->rw, t->rr };

	for (int i = 0; i < 4; i++) {
		k->v[i][0] = c[i] ? fi_cntr_read(c[i]) : 0;
		k->v[i][1] = c[i] ? fi_cntr_readerr(c[i]) : 0;
	}
}

static const char *const cntr_names[4] = {
	"initiator's FI_WRITE counter", "initiator's FI_READ counter",
	"target's FI_REMOTE_WRITE counter", "target's FI_REMOTE_READ counter",
};

/* Wait (bounded) until the counters reach want, then compare exactly. */
static void counts_are(const struct ini *in, const struct tgt *t,
		       const struct counts *want, const char *what)
{
	double end = t_now() + t_wait_s();
	struct counts got;
	bool short_;

	do {
		snap(in, t, &got);
		short_ = false;
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 2; j++)
				short_ |= got.v[i][j] < want->v[i][j];
		if (short_)
			t_drive(in->ep->cq);
	} while (short_ && t_now() < end);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			t_assert(got.v[i][j] == want->v[i][j],
				 "%s: %s %s is %lu, expected %lu", what,
				 cntr_names[i], j ? "error count" : "count",
				 (unsigned long) got.v[i][j],
				 (unsigned long) want->v[i][j]);
}

/* A field of an entry (flags, len, data, context) is what it must be. */
static void same(const char *what, const char *field, uint64_t got,
		 uint64_t want)
{
	t_assert(got == want, "%s: %s %#llx, expected %#llx", what, field,
		 (unsigned long long) got, (unsigned long long) want);
}

/* Read ntx initiator entries and nrx remote CQ data entries, in any
 * order, then nothing more. */
static void entries(struct fid_cq *cq, int ntx, void *ctx, uint64_t txflags,
		    int nrx, size_t len, uint64_t data, const char *what)
{
	const uint64_t rxflags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	int n = ntx + nrx;

	for (int i = 0; i < n; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ret = t_wait(cq, &e, &err);

		t_assert(ret >= 0, "%s: completion %d of %d did not come",
			 what, i + 1, n);
		t_assert(ret == 0, "%s: error completion: err %d (%s), "
			 "context %p", what, err.err, fi_strerror(err.err),
			 err.op_context);
		if (e.flags & FI_REMOTE_CQ_DATA) {
			t_assert(nrx-- > 0, "%s: a remote CQ data entry, "
				 "flags %#llx", what,
				 (unsigned long long) e.flags);
			same(what, "remote entry flags", e.flags, rxflags);
			same(what, "remote entry len", e.len, len);
			same(what, "remote entry data", e.data, data);
		} else {
			t_assert(ntx-- > 0, "%s: an entry not expected: "
				 "context %p, flags %#llx", what,
				 e.op_context, (unsigned long long) e.flags);
			same(what, "entry for context",
			     (uintptr_t) e.op_context, (uintptr_t) ctx);
			same(what, "entry flags", e.flags, txflags);
		}
	}
	t_assert(t_quiet(cq, 1), "%s: more completions than %d", what, n);
}

static void error_entry(struct fid_cq *cq, void *ctx, int want,
			const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &e, &err);

	t_assert(ret >= 0, "%s: no completion, expected error %s", what,
		 fi_strerror(want));
	t_assert(ret > 0, "%s: success (context %p), expected error %s", what,
		 e.op_context, fi_strerror(want));
	t_assert(err.err == want, "%s: error %d (%s), expected %d (%s)", what,
		 err.err, fi_strerror(err.err), want, fi_strerror(want));
	t_assert(err.op_context == ctx, "%s: error entry for context %p, "
		 "expected %p", what, err.op_context, ctx);
	t_assert(t_quiet(cq, 1), "%s: more completions than the error", what);
}

/*
 * Post x from in to t and check all it must do: the initiator's entry
 * (or none), the target's remote CQ data entry, counters on both sides,
 * the caller's CUDA context, and no completion more. want: 0, or the
 * error the initiator must see. Bytes are checked by the caller.
 */
void issue(const struct fx *fx, const struct ini *in,
		  const struct tgt *t, const struct xfer *x, int want,
		  const char *what)
{
	bool rd = is_read(x->op), msg = x->op == WRITEMSG || x->op == READMSG;
	uint64_t data = next_seed() * 0x9e3779b97f4a7c15ULL & fx->data_mask;
	struct counts k;
	CUcontext before, after;
	int ctx, ntx, nrx;
	ssize_t ret;

	snap(in, t, &k);
	t_cu(cuCtxGetCurrent(&before));
	ret = post(in->ep, t, x, &ctx, data);
	t_assert(!ret, "%s: %s returned %zd (%s)", what, op_names[x->op], ret,
		 fi_strerror((int) -ret));
	t_cu(cuCtxGetCurrent(&after));
	t_assert(after == before, "%s: current context %p after the call, "
		 "%p before", what, (void *) after, (void *) before);

	if (want) {
		error_entry(in->ep->cq, &ctx, want, what);
		k.v[rd][1]++;
	} else {
		ntx = !is_inject(x->op) &&
		      (!in->selective || (msg ? x->flags & FI_COMPLETION :
					  fx->default_completion));
		nrx = has_data(x);
		if (t->ep == in->ep) {
			entries(in->ep->cq, ntx, &ctx, FI_RMA |
				(rd ? FI_READ : FI_WRITE), nrx,
				total(x->r, x->nr), data, what);
		} else {
			entries(in->ep->cq, ntx, &ctx, FI_RMA |
				(rd ? FI_READ : FI_WRITE), 0, 0, 0, what);
			entries(t->ep->cq, 0, NULL, 0, nrx,
				total(x->r, x->nr), data, what);
		}
		k.v[rd][0]++;
		if (t->rw && !rd)
			k.v[2][0]++;
		if (t->rr && rd)
			k.v[3][0]++;
	}
	if (want && t->ep != in->ep)
		t_assert(t_quiet(t->ep->cq, 1), "%s: the target has a "
			 "completion", what);
	counts_are(in, t, &k, what);
}

struct fx *cur_fx;

/* A good operation: bytes in place, every byte checked. */
void run(const struct ini *in, const struct tgt *t,
		const struct xfer *x, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	prep(x, false);
	issue(cur_fx, in, t, x, 0, what);
	effect(x);
	check(x, false, what);
	t_ok("[%s] %s", cur_fx->mode, what);
}

/* A bad operation: the error, and not one byte changed anywhere. */
void run_bad(const struct ini *in, const struct tgt *t,
		    const struct xfer *x, int want, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	prep(x, true);
	issue(cur_fx, in, t, x, want, what);
	verify_all(what);
	t_ok("[%s] %s: error %s, nothing changed", cur_fx->mode, what,
	     fi_strerror(want));
}

