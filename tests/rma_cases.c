/* SPDX-License-Identifier: BSD-2-Clause */
/* The device RMA test's in-process cases: each takes the fixture and
 * checks a family of operations end to end (rma_core.c's run). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>

#include "rma.h"

/* ---- the cases --------------------------------------------------------- */

static const struct dir {
	const char *name;
	int wl, wr;		/* a write's local and remote buffers */
	int rl, rr;		/* a read's */
} dirs[] = {
	{ "device to device", DA, DB, DB, DA },
	{ "host to device", HA, DB, DB, HA },
	{ "device to host", DA, HB, HB, DA },
};

static struct xfer dir_xfer(enum op op, const struct dir *d, size_t loff,
			    size_t roff, size_t len)
{
	return is_read(op) ? simple(op, d->rl, loff, d->rr, roff, len) :
			     simple(op, d->wl, loff, d->wr, roff, len);
}

void describe(char *s, size_t n, enum op op, int lb, int rb)
{
	int from = is_read(op) ? rb : lb, to = is_read(op) ? lb : rb;

	snprintf(s, n, "%s %s to %s", op_names[op],
		 bufs[from].dev ? "device" : "host",
		 bufs[to].dev ? "device" : "host");
}

/* A transfer of a list: between buffers at PAD locally and roff
 * remotely; len 0: inject_size, and none where that is 0. */
struct plain {
	enum op op;
	int lb, rb;
	size_t roff, len;
};

/* Each of ts from the first initiator to t (run), said as what's. */
static void run_each(const struct tgt *t, const struct plain *ts, size_t n,
		     const char *what)
{
	const struct plain *p;
	char call[80];
	struct xfer x;

	for (p = ts; p < ts + n; p++) {
		size_t len = p->len ? p->len : cur_fx->inject;

		if (!len)
			continue;
		x = simple(p->op, p->lb, PAD, p->rb, p->roff, len);
		describe(call, sizeof(call), p->op, p->lb, p->rb);
		run(&cur_fx->ia, t, &x, "%s: %s, %zu bytes", what, call, len);
	}
}

/* Every call, every direction, 1 byte to 1 MiB (injects: up to
 * inject_size), at offsets inside the regions. */
void case_ops(void)
{
	struct fx *x = cur_fx;
	const size_t sizes[] = { 1, 4096, MIB };
	const size_t inj[] = { 1, x->inject };

	if (!x->inject)
		note("%s: inject_size 0: no inject calls", t_prov);
	for (enum op op = 0; op < NOPS; op++) {
		const size_t *sz = is_inject(op) ? inj : sizes;
		size_t n = !is_inject(op) ? 3 : x->inject > 1 ? 2 :
			   x->inject;

		for (size_t d = 0; d < 3; d++) {
			for (size_t i = 0; i < n; i++) {
				struct xfer t = dir_xfer(op, &dirs[d], PAD + 3,
							 PAD - 5, sz[i]);

				run(&x->ia, &x->tb, &t, "%s %s, %zu bytes",
				    op_names[op], dirs[d].name, sz[i]);
			}
		}
	}
}

/* A device destination read back with no synchronization right after the
 * completion: the double finishes a copy only when someone synchronizes,
 * so this fails if the completion came before the copy. */
void case_late(void)
{
	static const struct plain ts[] = {
		{ WRITE, DA, DB, PAD, MIB },
		{ READ, DB, DA, PAD, MIB },
		{ WRITE, HA, DB, PAD, MIB },
	};

	run_each(&cur_fx->tb, ts, sizeof(ts) / sizeof(ts[0]),
		 "bytes there at its completion");
}

/* n pieces of the given lengths, alternating between two buffers, one
 * after the other with gaps between. */
static void lay(struct piece *p, size_t n, int b0, int b1, const size_t *len)
{
	size_t at[NBUF] = { 0 };

	for (size_t i = 0; i < n; i++) {
		int b = i % 2 ? b1 : b0;

		at[b] += (at[b] ? 0 : PAD) + 13 * i + 1;
		p[i] = (struct piece) { .b = b, .off = at[b], .len = len[i] };
		at[b] += len[i];
		t_assert(at[b] <= bufs[b].size, "test bug: %s overflows",
			 bufs[b].name);
	}
}

/* Split len into n nearly equal pieces: their boundaries fall elsewhere
 * than the local pieces'. */
static void split(size_t len, size_t n, size_t *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = len * (i + 1) / n - len * i / n;
}

/* fi_writemsg from nl local iovs (ll's lengths) alternating between DA
 * and a2 to nr remote ones (rl's) alternating between DB and b2, then
 * fi_readmsg back the other way. */
static void msg_both(size_t nl, size_t nr, const size_t *ll,
		     const size_t *rl, int a2, int b2, const char *what)
{
	struct xfer t = { .op = WRITEMSG, .flags = FI_COMPLETION,
			  .nl = nl, .nr = nr };

	lay(t.l, nl, DA, a2, ll);
	lay(t.r, nr, DB, b2, rl);
	run(&cur_fx->ia, &cur_fx->tb, &t, "fi_writemsg, %zu local iovs to "
	    "%zu remote iovs, %s", nl, nr, what);
	t.op = READMSG;
	lay(t.l, nl, DB, b2, ll);
	lay(t.r, nr, DA, a2, rl);
	run(&cur_fx->ia, &cur_fx->tb, &t, "fi_readmsg, %zu remote iovs to "
	    "%zu local iovs, %s", nr, nl, what);
}

void case_iov(void)
{
	struct fx *x = cur_fx;
	static const size_t lens[MAXIOV] = {
		1, 4099, 777, 65535, 3, 5000, 100000, 17,
	};
	size_t nl = x->iov_limit < MAXIOV ? x->iov_limit : MAXIOV;
	size_t nr = x->rma_iov_limit < MAXIOV ? x->rma_iov_limit : MAXIOV;
	size_t rl[MAXIOV] = { 0 }, big[MAXIOV] = { 0 };
	struct xfer t;

	if (nl < 2)
		note("%s: iov_limit %zu: one local iov only", t_prov, nl);
	if (nr < 2)
		note("%s: rma_iov_limit %zu: one remote iov only", t_prov, nr);

	/* Local iovs alternate device and host memory. */
	t = (struct xfer) { .op = WRITEV, .nl = nl, .nr = 1 };
	lay(t.l, nl, DA, HA, lens);
	t.r[0] = (struct piece) { .b = DB, .off = PAD + 29,
				  .len = total(t.l, nl) };
	run(&x->ia, &x->tb, &t, "fi_writev, %zu local iovs (device and host) "
	    "to device", nl);
	t.op = READV;
	lay(t.l, nl, DB, HB, lens);
	t.r[0] = (struct piece) { .b = DA, .off = PAD + 31,
				  .len = total(t.l, nl) };
	run(&x->ia, &x->tb, &t, "fi_readv from device, %zu local iovs "
	    "(device and host)", nl);

	split(total(t.l, nl), nr, rl);
	msg_both(nl, nr, lens, rl, HA, HB, "device and host on both sides");
	/* 1 MiB in all, device to device. */
	split(MIB, nl, big);
	split(MIB, nr, rl);
	msg_both(nl, nr, big, rl, DA, DB, "1 MiB, device memory only");
}

/* An endpoint that is its own target: both entries on its one CQ. */
void case_self(void)
{
	static const struct plain ts[] = {
		{ WRITE, DA, DB, PAD + 1, MIB },
		{ READ, HB, DA, PAD + 1, 4096 },
		{ WRITEDATA, DA, DB, PAD + 1, 4096 },
		{ INJECTDATA, HA, DB, PAD + 1, 0 },
	};

	run_each(&cur_fx->ta, ts, sizeof(ts) / sizeof(ts[0]), "to itself");
}

/* A target in a second fabric and domain, whose requested keys (without
 * FI_MR_PROV_KEY) are the same numbers as the first domain's: the key
 * must be looked up in the target's domain. Its counters count there. */
void case_domains(void)
{
	static const struct plain ts[] = {
		{ WRITE, DA, DB2, PAD + 7, 4096 },
		{ READ, HB, DB2, PAD + 7, 4096 },
		{ WRITEDATA, HA, DB2, PAD + 9, MIB },
		{ READ, DB, HB2, PAD + 7, 4096 },
		{ INJECT, DA, DB2, PAD, 0 },
	};
	struct fx *x = cur_fx;

	run_each(&x->tc, ts, sizeof(ts) / sizeof(ts[0]), x->rma_event ?
		 "second domain, target counters" : "second domain");
	verify_all("second domain: the first domain's regions untouched");
	t_ok("[%s] second domain: the first domain's regions untouched",
	     x->mode);
}

/* A msg call on the selective endpoint: with FI_COMPLETION one entry,
 * without none but counted, and none late. */
static void selective_msg(struct fx *x, enum op op, int lb, int rb)
{
	struct xfer t = simple(op, lb, PAD, rb, PAD, 4096);

	run(&x->is, &x->tb, &t, "selective: %s with FI_COMPLETION: one "
	    "entry", op_names[op]);
	t.flags = 0;
	run(&x->is, &x->tb, &t, "selective: %s without FI_COMPLETION: no "
	    "entry, counted", op_names[op]);
	t_assert(t_quiet(x->s.cq, 100), "selective: an entry came late");
}

/* FI_SELECTIVE_COMPLETION: an entry only for FI_COMPLETION; errors and
 * counters always. Without it, every operation has an entry. */
void case_selective(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	if (x->default_completion)
		note("%s: tx op_flags have FI_COMPLETION: default operations "
		     "complete on the selective endpoint too", t_prov);
	t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	run(&x->is, &x->tb, &t, "selective: fi_write device to device, "
	    "default flags: %s", x->default_completion ? "an entry" :
	    "no entry, counted");
	t_assert(t_quiet(x->s.cq, 100), "selective: an entry came late");
	t = simple(READ, DB, PAD, DA, PAD, 4096);
	run(&x->is, &x->tb, &t, "selective: fi_read device to device, default "
	    "flags: %s", x->default_completion ? "an entry" :
	    "no entry, counted");
	selective_msg(x, WRITEMSG, DA, DB);
	selective_msg(x, READMSG, HB, DA);
	t = simple(WRITEDATA, DA, PAD, DB, PAD, 4096);
	run(&x->is, &x->tb, &t, "selective: fi_writedata, default flags: "
	    "the target's entry only");
	if (x->inject) {
		t = simple(INJECT, DA, PAD, DB, PAD, x->inject);
		run(&x->is, &x->tb, &t, "selective: fi_inject_write: no entry, "
		    "counted");
	}
	t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	t.r[0].key = bad_key(0);
	run_bad(&x->is, &x->tb, &t, FI_EINVAL, "selective: fi_write with a bad "
		"key, default flags: the error has an entry");

	/* Not selective: flags 0 still complete. */
	t = simple(WRITEMSG, DA, PAD, DB, PAD, 4096);
	t.flags = 0;
	run(&x->ia, &x->tb, &t, "not selective: fi_writemsg without "
	    "FI_COMPLETION: one entry");
	t = simple(READMSG, DB, PAD, DA, PAD, 4096);
	t.flags = 0;
	run(&x->ia, &x->tb, &t, "not selective: fi_readmsg without "
	    "FI_COMPLETION: one entry");
}

/* Remote CQ data through fi_writemsg too, and at the data size's edge. */
void case_cqdata(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	t = simple(WRITEMSG, DA, PAD, DB, PAD, 4096);
	t.flags = FI_COMPLETION | FI_REMOTE_CQ_DATA;
	run(&x->ia, &x->tb, &t, "fi_writemsg with FI_REMOTE_CQ_DATA device to "
	    "device: the target's entry");
	t = simple(WRITEMSG, HA, PAD, DB2, PAD, 1);
	t.flags = FI_COMPLETION | FI_REMOTE_CQ_DATA;
	run(&x->ia, &x->tc, &t, "second domain: fi_writemsg with "
	    "FI_REMOTE_CQ_DATA host to device, 1 byte: the target's entry");
	t = simple(WRITEDATA, DA, PAD, HB, PAD + 1, MIB);
	run(&x->ia, &x->tb, &t, "fi_writedata device to host, 1 MiB: the "
	    "target's entry");
}

void good_after(struct fx *x, const char *after)
{
	struct xfer g = simple(WRITE, DA, PAD + 1, DB, PAD + 2, 4096);

	run(&x->ia, &x->tb, &g, "after %s: fi_write device to device works",
	    after);
}

/* A transfer its target must refuse, and what is wrong with it. */
enum wrong { BAD_KEY, PAST_END, BEFORE_START, WRAPS, NO_RIGHT };

struct bad {
	struct plain t;
	enum wrong wrong;
};

static const char *const wrongs[] = {
	[BAD_KEY] = "a key no region has",
	[PAST_END] = "a range past the region's end",
	[BEFORE_START] = "a range starting 16 bytes before the region",
	[WRAPS] = "a range wrapping past the address space's end",
	[NO_RIGHT] = "a region without the remote right it needs",
};

/* Each of bad refused (run_bad: the error, its context, the error
 * counter, no byte changed), and the next transfer works. A range before
 * a region can be named only with FI_MR_VIRT_ADDR. */
static void refuse_each(const struct bad *bad, size_t n)
{
	struct fx *x = cur_fx;
	bool virt = x->f[0].info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	const struct bad *b;
	struct xfer t;
	char what[160];

	for (b = bad; b < bad + n; b++) {
		const struct plain *p = &b->t;

		t = simple(p->op, p->lb, PAD, p->rb, p->roff, p->len);
		if (b->wrong == BAD_KEY)
			t.r[0].key = bad_key(0);
		if (b->wrong == BEFORE_START || b->wrong == WRAPS) {
			if (!virt) {
				note("offsets: %s cannot be named",
				     wrongs[b->wrong]);
				continue;
			}
			t.r[0].raw = true;
			t.r[0].addr = b->wrong == WRAPS ? UINT64_MAX - 15 :
				      (uintptr_t) bufs[p->rb].p - 16;
		}
		describe(what, sizeof(what), p->op, p->lb, p->rb);
		run_bad(&x->ia, &x->tb, &t, b->wrong == BAD_KEY ? FI_EINVAL :
			FI_EACCES, "%s, %zu bytes, %s", what, p->len,
			wrongs[b->wrong]);
		good_after(x, wrongs[b->wrong]);
	}
}

/* Bad input with device memory on a side. */
void case_bad(void)
{
	static const struct bad bad[] = {
		{ { WRITE, DA, DB, PAD, 4096 }, BAD_KEY },
		{ { READ, DB, DA, PAD, 4096 }, BAD_KEY },
		{ { WRITE, DA, DB, BIG - 2048, 4096 }, PAST_END },
		{ { READ, DB, DA, BIG - 2048, 4096 }, PAST_END },
		{ { WRITE, DA, HB, BIG - 1, 2 }, PAST_END },
		{ { WRITE, DA, DB, 3 * BIG, 64 }, PAST_END },
		{ { WRITE, DA, DB, 0, 64 }, BEFORE_START },
		{ { READ, DB, DA, 0, 64 }, BEFORE_START },
		{ { WRITE, DA, DB, 0, 64 }, WRAPS },
		{ { WRITE, DA, RO, PAD, 4096 }, NO_RIGHT },
		{ { READ, DB, WO, PAD, 4096 }, NO_RIGHT },
	};
	struct fx *x = cur_fx;
	struct xfer t;

	refuse_each(bad, sizeof(bad) / sizeof(bad[0]));
	if (x->rma_iov_limit < 2)
		return;
	t = (struct xfer) {
		.op = WRITEMSG, .flags = FI_COMPLETION, .nl = 1, .nr = 2,
		.l = { { .b = DA, .off = PAD, .len = 8192 } },
		.r = { { .b = DB, .off = PAD, .len = 4096 },
		       { .b = DB, .off = PAD + 8192, .len = 4096,
			 .key = bad_key(0) } },
	};
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "fi_writemsg device to "
		"device, the second remote iov's key no region has");
	good_after(x, wrongs[BAD_KEY]);
}

/* Bad input whose only device memory is the target region: host memory
 * locally. The region is device memory, so the answer is still
 * FI_EACCES, whatever the provider would say of a host region. */
void case_bad_host(void)
{
	static const struct bad bad[] = {
		{ { WRITE, HA, DB, BIG - 2048, 4096 }, PAST_END },
		{ { READ, HB, DA, BIG - 1, 2 }, PAST_END },
		{ { WRITE, HA, RO, PAD, 4096 }, NO_RIGHT },
		{ { READ, HB, WO, PAD, 4096 }, NO_RIGHT },
	};

	refuse_each(bad, sizeof(bad) / sizeof(bad[0]));
}
