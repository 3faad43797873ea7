/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Device RMA: every RMA call, between endpoints of this process, on CUDA
 * device memory and host memory. Through hmemloop each must move exactly
 * the right bytes and complete, count and fail as a provider would;
 * without it the first device transfer fails (see reproducer.c).
 *
 * The cases share a fixture: two domains (the second on a fabric of its
 * own, with FI_RMA_EVENT where the provider has it), four endpoints and
 * registered host and device buffers. They run once per memory
 * registration mode. Cases that need a fresh process (fault injection, two
 * devices, host memory, CUDA calls forbidden) run this program again
 * as "-c NAME" with the environment they need.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rma.h"

/* libfabric 1.18's endpoint option; 1.17 answers -FI_ENOPROTOOPT. */
#define OPT_CUDA_API_PERMITTED 10
/* The copy call a fault-injection child makes fail: its own calls before
 * hmemloop's first are padded up to one less. */
#define FAIL_AT		40
#define STR(x)		STR_(x)
#define STR_(x)		#x

/* The in-process cases, run in order ("-c NAME" runs one). */
static const struct t_case cases[] = {
	T_CASE("ops", case_ops),		/* first: without hmemloop it fails */
	T_CASE("late", case_late),
	T_CASE("iov", case_iov),
	T_CASE("self", case_self),
	T_CASE("domains", case_domains),
	T_CASE("selective", case_selective),
	T_CASE("cqdata", case_cqdata),
	T_CASE("bad", case_bad),
	T_CASE("bad-host", case_bad_host),
	T_CASE("threads", case_threads),
};

/* ---- cases in a process of their own ---------------------------------- */

/* The Nth CUDA copy call fails: make hmemloop's nth copy the Nth. */
static void pad_copies(unsigned long n)
{
	t_assert(copies <= FAIL_AT - n, "test bug: %lu copies before the one "
		 "that fails", copies);
	while (copies < FAIL_AT - n)
		dev_put(bufs[RO].p, bufs[RO].shadow, 1);
}

static void fail_copy(struct fx *x, const struct xfer *t, const char *what)
{
	prep(t, true);
	pad_copies(1);
	issue(x, &x->ia, &x->tb, t, FI_EIO, what);
	verify_all(what);
	t_ok("[%s] %s: error %s, nothing changed", x->mode, what,
	     fi_strerror(FI_EIO));
	good_after(x, "a failed copy");
}

static void child_fail_write(void)
{
	struct fx *x = cur_fx;
	struct xfer t = simple(WRITE, DA, PAD, DB, PAD, 4096);

	fail_copy(x, &t, "CUDA copy fails: fi_write device to device");
}

static void child_fail_read(void)
{
	struct fx *x = cur_fx;
	struct xfer t = simple(READ, HB, PAD, DA, PAD, 4096);

	fail_copy(x, &t, "CUDA copy fails: fi_read device to host");
}

/* The third of three pieces fails: the error completes only once the two
 * before it have landed, so nothing changes after it is reported. */
static void child_fail_piece(void)
{
	struct fx *x = cur_fx;
	const char *what = "CUDA copy fails on the third piece: fi_writev "
			   "device to device";
	struct xfer t = simple(WRITEV, DA, PAD, DB, PAD, 3 * 4096);
	uint8_t *later = scratch + 3 * 4096;

	t.nl = 3;
	for (int i = 0; i < 3; i++)
		t.l[i] = (struct piece) { .b = DA, .off = PAD + i * 8192,
					  .len = 4096 };
	prep(&t, true);
	pad_copies(3);
	issue(x, &x->ia, &x->tb, &t, FI_EIO, what);
	dev_get(scratch, bufs[DB].p + PAD, 3 * 4096);
	t_cu(cuCtxSynchronize());
	dev_get(later, bufs[DB].p + PAD, 3 * 4096);
	t_assert(!memcmp(scratch, later, 3 * 4096), "%s: bytes landed after "
		 "the error completion", what);
	t_ok("[%s] %s: error %s, nothing landed after it", x->mode, what,
	     fi_strerror(FI_EIO));
}

/* FI_OPT_CUDA_API_PERMITTED false: hmemloop must leave a device transfer
 * to the provider, which cannot do it. The exit status says what
 * happened; 0 is success, which must not be. */
static void child_no_cuda(void)
{
	struct fx *x = cur_fx;
	struct xfer t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	bool no = false;
	int ret, ctx;

	ret = fi_setopt(&x->a.ep->fid, FI_OPT_ENDPOINT,
			OPT_CUDA_API_PERMITTED, &no, sizeof(no));
	printf("fi_setopt(FI_OPT_CUDA_API_PERMITTED, false): %d (%s)\n", ret,
	       fi_strerror(-ret));
	prep(&t, false);
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	ret = (int) post(&x->a, &x->tb, &t, &ctx, 0);
	if (ret) {
		printf("post: %d (%s)\n", ret, fi_strerror(-ret));
		_exit(13);
	}
	ret = t_wait(x->a.cq, &e, &err);
	if (ret < 0) {
		printf("no completion\n");
		_exit(11);
	}
	if (ret > 0) {
		printf("error completion: %d (%s)\n", err.err,
		       fi_strerror(err.err));
		_exit(10);
	}
	effect(&t);
	dev_get(scratch, bufs[DB].p + PAD, 4096);
	if (memcmp(scratch, bufs[DB].shadow + PAD, 4096)) {
		printf("success, wrong bytes\n");
		_exit(12);
	}
	printf("success, right bytes\n");
	_exit(0);
}

static size_t free_on(CUdevice dev)
{
	CUcontext ctx, before, after;
	size_t free_b, total_b;

	t_cu(cuCtxGetCurrent(&before));
	t_cu(t_ctx_create(&ctx, dev));
	t_cu(cuMemGetInfo(&free_b, &total_b));
	t_cu(cuCtxDestroy(ctx));
	t_cu(cuCtxGetCurrent(&after));
	if (after != before)
		t_cu(cuCtxSetCurrent(before));
	return free_b;
}

/* Two devices, buffers on device 0: device 1 must stay untouched. */
static void child_two_devices(void)
{
	struct fx *x = cur_fx;
	struct xfer t;
	CUdevice d1;
	unsigned flags;
	int n, active;
	size_t before, after;

	t_cu(cuDeviceGetCount(&n));
	t_assert(n == 2, "CUDA_DOUBLE_DEVICES=2 gives %d devices", n);
	t_cu(cuDeviceGet(&d1, 1));
	t_cu(cuDevicePrimaryCtxGetState(d1, &flags, &active));
	t_assert(!active, "device 1's primary context is active before any "
		 "transfer");
	before = free_on(d1);

	case_threads();		/* new threads, with and without a context */
	t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	run(&x->ia, &x->tb, &t, "two devices, main thread: fi_write device to "
	    "device");

	t_cu(cuDevicePrimaryCtxGetState(d1, &flags, &active));
	t_assert(!active, "device 1's primary context became active: "
		 "hmemloop made a context on a device no buffer is on");
	t_ok("two devices: device 1's primary context still inactive");
	after = free_on(d1);
	t_assert(after == before, "device 1 has %zu bytes free after the "
		 "transfers, %zu before: something was made there", after,
		 before);
	t_ok("two devices: device 1's free memory unchanged (%zu bytes)",
	     after);
}

/* Host-to-host operations between endpoints of this process are
 * hmemloop's too, and its FI_EINVAL for a bad key proves it did them. */
static void child_host(void)
{
	struct fx *x = cur_fx;
	struct xfer t;

	t = simple(WRITE, HA, PAD, HB, PAD, 4096);
	t.r[0].key = bad_key(0);
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "here: fi_write "
		"host to host, a key no region has");
	t = simple(READ, HB, PAD, HA, PAD, 4096);
	t.r[0].key = bad_key(0);
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "here: fi_read "
		"host to host, a key no region has");
	t = simple(WRITE, HA, PAD, HB, PAD + 1, 4096);
	run(&x->ia, &x->tb, &t, "here: fi_write host to host");
	t = simple(READ, HB, PAD, HA, PAD + 1, MIB);
	run(&x->ia, &x->tb, &t, "here: fi_read host to host, "
	    "1 MiB");
}

/* The exit status says what the provider did: it must not be success. */
static void no_cuda_failed(const struct t_case *c, int st)
{
	t_assert(!WIFEXITED(st) || WEXITSTATUS(st),
		 "%s: device fi_write with CUDA calls forbidden "
		 "succeeded: hmemloop did it", c->name);
	if (WIFSIGNALED(st))
		t_ok("%s: CUDA calls forbidden: fi_write device "
		     "to device left to %s, which crashed "
		     "(signal %d)", c->name, t_prov,
		     WTERMSIG(st));
	else
		t_ok("%s: CUDA calls forbidden: fi_write device "
		     "to device left to %s, which failed "
		     "(status %d)", c->name, t_prov,
		     WEXITSTATUS(st));
}

/* The cases in a process of their own, on the first mode's fixture. */
static const struct t_case children[] = {
	{ .name = "fail-write", .need = T_NEED_DOUBLE, .run = child_fail_write,
	  .fresh = true, .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "fail-read", .need = T_NEED_DOUBLE, .run = child_fail_read,
	  .fresh = true, .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "fail-piece", .need = T_NEED_DOUBLE, .run = child_fail_piece,
	  .fresh = true, .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "no-cuda", .run = child_no_cuda, .fresh = true, .wait_s = 3,
	  .check = no_cuda_failed },
	{ .name = "two-devices", .need = T_NEED_DOUBLE,
	  .run = child_two_devices, .fresh = true,
	  .env = { "CUDA_DOUBLE_DEVICES=2" } },
	{ .name = "host", .need = T_NEED_SHIM, .run = child_host,
	  .fresh = true },
};

/* ---- main --------------------------------------------------------------- */

/* The cases wanted, in each registration mode the provider gives. */
static void run_cases(struct fx *fx)
{
	char first[sizeof(fx->mode)] = "";

	for (int virt = 1; virt >= 0; virt--) {
		if (!fx_open(fx, virt, false))
			continue;
		if (!strcmp(fx->mode, first)) {
			note("%s: %s for both hints: not run twice", t_prov,
			     fx->mode);
			fx_close(fx);
			continue;
		}
		strcpy(first, fx->mode);
		T_RUN_CASES(cases);
		verify_all("at the end");
		fx_close(fx);
	}
}

static struct fx fx;

static void setup(void)
{
	alloc_buffers();
	cur_fx = &fx;
	chatty = !t_fresh();
}

/* In a case's own process, that case on the first mode's fixture; else
 * the cases wanted in each mode, then the others each in its process. */
static void run_all(void)
{
	if (t_fresh()) {
		fx_open(&fx, true, true);
		T_RUN_CASES(children);
		fx_close(&fx);
		return;
	}
	run_cases(&fx);
	chatty = false;
	T_RUN_CASES(children);
}

T_MAIN(cases, T_MORE(children), .flags = T_CUDA, .setup = setup,
       .run = run_all);
