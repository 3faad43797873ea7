/* SPDX-License-Identifier: BSD-2-Clause */
/* The device RMA test's in-process cases: each takes the fixture and
 * checks a family of operations end to end (rma_core.c's run). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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
	struct fx *x = cur_fx;
	struct xfer w = simple(WRITE, DA, PAD, DB, PAD, MIB);
	struct xfer r = simple(READ, DB, PAD, DA, PAD, MIB);
	struct xfer h = simple(WRITE, HA, PAD, DB, PAD, MIB);

	run(&x->ia, &x->tb, &w, "1 MiB fi_write device to device: bytes "
	    "there at its completion");
	run(&x->ia, &x->tb, &r, "1 MiB fi_read device to device: bytes "
	    "there at its completion");
	run(&x->ia, &x->tb, &h, "1 MiB fi_write host to device: bytes "
	    "there at its completion");
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

	t = (struct xfer) { .op = WRITEMSG, .flags = FI_COMPLETION,
			    .nl = nl, .nr = nr };
	lay(t.l, nl, DA, HA, lens);
	split(total(t.l, nl), nr, rl);
	lay(t.r, nr, DB, HB, rl);
	run(&x->ia, &x->tb, &t, "fi_writemsg, %zu local iovs to %zu remote "
	    "iovs, device and host on both sides", nl, nr);
	t.op = READMSG;
	lay(t.l, nl, DB, HB, lens);
	lay(t.r, nr, DA, HA, rl);
	run(&x->ia, &x->tb, &t, "fi_readmsg, %zu remote iovs to %zu local "
	    "iovs, device and host on both sides", nr, nl);

	/* 1 MiB in all, device to device. */
	split(MIB, nl, big);
	split(MIB, nr, rl);
	t.op = WRITEMSG;
	lay(t.l, nl, DA, DA, big);
	lay(t.r, nr, DB, DB, rl);
	run(&x->ia, &x->tb, &t, "fi_writemsg, 1 MiB from %zu device iovs to "
	    "%zu device iovs", nl, nr);
	t.op = READMSG;
	lay(t.l, nl, DB, DB, big);
	lay(t.r, nr, DA, DA, rl);
	run(&x->ia, &x->tb, &t, "fi_readmsg, 1 MiB from %zu device iovs to "
	    "%zu device iovs", nr, nl);
}

/* An endpoint that is its own target: both entries on its one CQ. */
void case_self(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	t = simple(WRITE, DA, PAD, DB, PAD + 1, MIB);
	run(&x->ia, &x->ta, &t, "to itself: fi_write device to device, 1 MiB");
	t = simple(READ, HB, PAD, DA, PAD + 1, 4096);
	run(&x->ia, &x->ta, &t, "to itself: fi_read device to host, 4096 "
	    "bytes");
	t = simple(WRITEDATA, DA, PAD, DB, PAD + 1, 4096);
	run(&x->ia, &x->ta, &t, "to itself: fi_writedata device to device, "
	    "4096 bytes");
	if (x->inject) {
		t = simple(INJECTDATA, HA, PAD, DB, PAD + 1, x->inject);
		run(&x->ia, &x->ta, &t, "to itself: fi_inject_writedata host "
		    "to device, %zu bytes", x->inject);
	}
}

/* A target in a second fabric and domain, whose requested keys (without
 * FI_MR_PROV_KEY) are the same numbers as the first domain's: the key
 * must be looked up in the target's domain. Its counters count there. */
void case_domains(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	t = simple(WRITE, DA, PAD, DB2, PAD + 7, 4096);
	run(&x->ia, &x->tc, &t, "second domain: fi_write device to device, "
	    "4096 bytes%s", x->rma_event ? ", target counters" : "");
	t = simple(READ, HB, PAD, DB2, PAD + 7, 4096);
	run(&x->ia, &x->tc, &t, "second domain: fi_read device to host, 4096 "
	    "bytes%s", x->rma_event ? ", target counters" : "");
	t = simple(WRITEDATA, HA, PAD, DB2, PAD + 9, MIB);
	run(&x->ia, &x->tc, &t, "second domain: fi_writedata host to device, "
	    "1 MiB");
	t = simple(READ, DB, PAD, HB2, PAD + 7, 4096);
	run(&x->ia, &x->tc, &t, "second domain: fi_read host to device, 4096 "
	    "bytes");
	if (x->inject) {
		t = simple(INJECT, DA, PAD, DB2, PAD, x->inject);
		run(&x->ia, &x->tc, &t, "second domain: fi_inject_write device "
		    "to device, %zu bytes", x->inject);
	}
	verify_all("second domain: the first domain's regions untouched");
	t_ok("[%s] second domain: the first domain's regions untouched",
	     x->mode);
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
	t = simple(WRITEMSG, DA, PAD, DB, PAD, 4096);
	run(&x->is, &x->tb, &t, "selective: fi_writemsg with FI_COMPLETION: "
	    "one entry");
	t.flags = 0;
	run(&x->is, &x->tb, &t, "selective: fi_writemsg without "
	    "FI_COMPLETION: no entry, counted");
	t_assert(t_quiet(x->s.cq, 100), "selective: an entry came late");
	t = simple(READMSG, HB, PAD, DA, PAD, 4096);
	run(&x->is, &x->tb, &t, "selective: fi_readmsg with FI_COMPLETION: "
	    "one entry");
	t.flags = 0;
	run(&x->is, &x->tb, &t, "selective: fi_readmsg without FI_COMPLETION: "
	    "no entry, counted");
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

/* Bad input with device memory on a side: the error, its context, the
 * error counter, no byte changed, and the next operation works. */
void case_bad(void)
{
	struct fx *x = cur_fx;
	bool virt = x->f[0].info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	uint64_t bk = bad_key(0);
	struct xfer t;

	t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	t.r[0].key = bk;
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "fi_write device to device, a "
		"key no region has");
	good_after(x, "a bad key");
	t = simple(READ, DB, PAD, DA, PAD, 4096);
	t.r[0].key = bk;
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "fi_read device to device, a "
		"key no region has");
	good_after(x, "a bad key");
	if (x->rma_iov_limit >= 2) {
		t = (struct xfer) {
			.op = WRITEMSG, .flags = FI_COMPLETION, .nl = 1,
			.nr = 2,
			.l = { { .b = DA, .off = PAD, .len = 8192 } },
			.r = { { .b = DB, .off = PAD, .len = 4096 },
			       { .b = DB, .off = PAD + 8192, .len = 4096,
				 .key = bk } },
		};
		run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "fi_writemsg device to "
			"device, the second remote iov's key no region has");
		good_after(x, "a bad key");
	}

	t = simple(WRITE, DA, PAD, DB, BIG - 2048, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to device, "
		"2048 bytes past the region's end");
	good_after(x, "a range past the end");
	t = simple(READ, DB, PAD, DA, BIG - 2048, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_read device to device, "
		"2048 bytes past the region's end");
	good_after(x, "a range past the end");
	t = simple(WRITE, DA, PAD, HB, BIG - 1, 2);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to host, 1 "
		"byte past the region's end");
	good_after(x, "a range past the end");
	t = simple(WRITE, DA, PAD, DB, 3 * BIG, 64);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to device, "
		"far past the region's end");
	good_after(x, "a range past the end");

	if (virt) {
		t = simple(WRITE, DA, PAD, DB, 0, 64);
		t.r[0].raw = true;
		t.r[0].addr = (uintptr_t) bufs[DB].p - 16;
		run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to "
			"device, starting 16 bytes before the region");
		good_after(x, "a range before the start");
		t = simple(READ, DB, PAD, DA, 0, 64);
		t.r[0].raw = true;
		t.r[0].addr = (uintptr_t) bufs[DA].p - 16;
		run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_read device to "
			"device, starting 16 bytes before the region");
		good_after(x, "a range before the start");
		t = simple(WRITE, DA, PAD, DB, 0, 64);
		t.r[0].raw = true;
		t.r[0].addr = UINT64_MAX - 15;
		run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to "
			"device, a range wrapping past the address space's end");
		good_after(x, "a wrapping range");
	} else {
		note("offsets: a range before a region cannot be named");
	}

	t = simple(WRITE, DA, PAD, RO, PAD, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write device to device, "
		"region without FI_REMOTE_WRITE");
	good_after(x, "a region without FI_REMOTE_WRITE");
	t = simple(READ, DB, PAD, WO, PAD, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_read device to device, "
		"region without FI_REMOTE_READ");
	good_after(x, "a region without FI_REMOTE_READ");
}

/* Bad input whose only device memory is the target region: host memory
 * locally. The region is device memory, so the answer is still
 * FI_EACCES, whatever the provider would say of a host region. */
void case_bad_host(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	t = simple(WRITE, HA, PAD, DB, BIG - 2048, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write host to device, "
		"2048 bytes past the region's end");
	good_after(x, "a range past the end");
	t = simple(READ, HB, PAD, DA, BIG - 1, 2);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_read device to host, 1 "
		"byte past the region's end");
	good_after(x, "a range past the end");
	t = simple(WRITE, HA, PAD, RO, PAD, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_write host to device, "
		"region without FI_REMOTE_WRITE");
	good_after(x, "a region without FI_REMOTE_WRITE");
	t = simple(READ, HB, PAD, WO, PAD, 4096);
	run_bad(&x->ia, &x->tb, &t, FI_EACCES, "fi_read device to host, "
		"region without FI_REMOTE_READ");
	good_after(x, "a region without FI_REMOTE_READ");
}

/* ---- operations from other threads ------------------------------------ */

struct job {
	const struct ini *in;
	const struct tgt *t;
	const struct xfer *x;
	bool own_ctx;		/* make a new context of device 0 current */
	const char *what;
};

static void *job_main(void *arg)
{
	struct job *j = arg;
	CUcontext cur, mine = NULL, popped;
	CUdevice dev;

	t_cu(cuCtxGetCurrent(&cur));
	t_assert(!cur, "%s: a new thread has context %p", j->what,
		 (void *) cur);
	if (j->own_ctx) {
		t_cu(cuDeviceGet(&dev, 0));
		t_cu(t_ctx_create(&mine, dev));
	}
	issue(cur_fx, j->in, j->t, j->x, 0, j->what);
	t_cu(cuCtxGetCurrent(&cur));
	t_assert(cur == mine, "%s: the thread's context is %p after, %p "
		 "before", j->what, (void *) cur, (void *) mine);
	if (mine) {
		/* Nothing may be left pushed under the thread's context. */
		t_cu(cuCtxPopCurrent(&popped));
		t_cu(cuCtxGetCurrent(&cur));
		t_assert(popped == mine && !cur, "%s: the thread's context "
			 "stack changed: popped %p, then %p current", j->what,
			 (void *) popped, (void *) cur);
		t_cu(cuCtxDestroy(mine));
	}
	return NULL;
}

/* A transfer between buffers at PAD, issued from a new thread. */
struct thread_op {
	enum op op;
	int lb, rb;		/* local, remote buffer */
	size_t len;
	bool own_ctx;		/* the thread makes a context of its own */
};

/* Issue each of ops from a new thread of its own, from cur_fx's first
 * initiator to its second target; the bytes are checked here, where there
 * is a context to read device memory with. */
static void in_threads(const struct thread_op *ops, size_t n)
{
	struct fx *fx = cur_fx;
	const struct thread_op *o;
	char what[160];
	struct xfer x;
	pthread_t th;

	for (o = ops; o < ops + n; o++) {
		struct job j = { &fx->ia, &fx->tb, &x, o->own_ctx, what };
		int from = is_read(o->op) ? o->rb : o->lb;
		int to = is_read(o->op) ? o->lb : o->rb;

		snprintf(what, sizeof(what), "thread %s: %s %s to %s, %zu "
			 "bytes; %s", o->own_ctx ? "with another context of "
			 "the device" : "without a context", op_names[o->op],
			 bufs[from].dev ? "device" : "host",
			 bufs[to].dev ? "device" : "host", o->len,
			 o->own_ctx ? "its context kept" : "still no context");
		x = simple(o->op, o->lb, PAD, o->rb, PAD, o->len);
		prep(&x, false);
		t_assert(!pthread_create(&th, NULL, job_main, &j),
			 "pthread_create");
		t_assert(!pthread_join(th, NULL), "pthread_join");
		effect(&x);
		check(&x, false, what);
		t_ok("[%s] %s", fx->mode, what);
	}
}

/* The caller's CUDA context is as it was: none, or its own. */
void case_threads(void)
{
	static const struct thread_op ops[] = {
		{ WRITE, DA, DB, MIB, false },
		{ READ, DB, DA, 4096, false },
		{ WRITE, HA, DB, 4096, false },
		{ READ, HB, DA, 4096, false },
		{ WRITEDATA, HA, DB, 4096, false },
		{ WRITE, DA, DB, 4096, true },
		{ READ, HB, DA, 4096, true },
	};

	in_threads(ops, sizeof(ops) / sizeof(ops[0]));
}

