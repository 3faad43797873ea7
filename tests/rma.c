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
 * devices, HMEMLOOP_SELF=all, CUDA calls forbidden) run this program again
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
static const struct tcase {
	const char *name;
	void (*fn)(struct fx *x);
} cases[] = {
	{ "ops", case_ops },		/* first: without hmemloop it fails */
	{ "late", case_late },
	{ "iov", case_iov },
	{ "self", case_self },
	{ "domains", case_domains },
	{ "selective", case_selective },
	{ "cqdata", case_cqdata },
	{ "bad", case_bad },
	{ "bad-host", case_bad_host },
	{ "threads", case_threads },
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

static int child_fail_write(struct fx *x)
{
	struct xfer t = simple(WRITE, DA, PAD, DB, PAD, 4096);

	fail_copy(x, &t, "CUDA copy fails: fi_write device to device");
	return 0;
}

static int child_fail_read(struct fx *x)
{
	struct xfer t = simple(READ, HB, PAD, DA, PAD, 4096);

	fail_copy(x, &t, "CUDA copy fails: fi_read device to host");
	return 0;
}

/* The third of three pieces fails: the error completes only once the two
 * before it have landed, so nothing changes after it is reported. */
static int child_fail_piece(struct fx *x)
{
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
	return 0;
}

/* FI_OPT_CUDA_API_PERMITTED false: hmemloop must leave a device transfer
 * to the provider, which cannot do it. The exit status says what
 * happened; 0 is success, which must not be. */
static int child_no_cuda(struct fx *x)
{
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
static int child_two_devices(struct fx *x)
{
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

	t = simple(WRITE, DA, PAD, DB, PAD, 4096);
	in_thread(&x->ia, &x->tb, &t, false, "two devices, new thread: fi_write "
		  "device to device");
	t = simple(READ, HB, PAD, DA, PAD, 4096);
	in_thread(&x->ia, &x->tb, &t, false, "two devices, new thread: fi_read "
		  "device to host");
	t = simple(WRITEDATA, HA, PAD, DB, PAD, 4096);
	in_thread(&x->ia, &x->tb, &t, false, "two devices, new thread: "
		  "fi_writedata host to device");
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
	return 0;
}

/* HMEMLOOP_SELF=all: host-to-host operations are hmemloop's too, and its
 * FI_EINVAL for a bad key proves it did them. */
static int child_self_all(struct fx *x)
{
	struct xfer t;

	t = simple(WRITE, HA, PAD, HB, PAD, 4096);
	t.r[0].key = bad_key(0);
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "HMEMLOOP_SELF=all: fi_write "
		"host to host, a key no region has");
	t = simple(READ, HB, PAD, HA, PAD, 4096);
	t.r[0].key = bad_key(0);
	run_bad(&x->ia, &x->tb, &t, FI_EINVAL, "HMEMLOOP_SELF=all: fi_read "
		"host to host, a key no region has");
	t = simple(WRITE, HA, PAD, HB, PAD + 1, 4096);
	run(&x->ia, &x->tb, &t, "HMEMLOOP_SELF=all: fi_write host to host");
	t = simple(READ, HB, PAD, HA, PAD + 1, MIB);
	run(&x->ia, &x->tb, &t, "HMEMLOOP_SELF=all: fi_read host to host, "
	    "1 MiB");
	return 0;
}

enum need { ANY, DOUBLE, SHIM };

static const struct child {
	const char *name;
	enum need need;
	const char *env[2];
	int (*fn)(struct fx *x);
	bool must_fail;
} children[] = {
	{ .name = "fail-write", .need = DOUBLE, .fn = child_fail_write,
	  .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "fail-read", .need = DOUBLE, .fn = child_fail_read,
	  .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "fail-piece", .need = DOUBLE, .fn = child_fail_piece,
	  .env = { "CUDA_DOUBLE_FAIL_COPY=" STR(FAIL_AT) } },
	{ .name = "no-cuda", .need = ANY, .fn = child_no_cuda,
	  .must_fail = true },
	{ .name = "two-devices", .need = DOUBLE, .fn = child_two_devices,
	  .env = { "CUDA_DOUBLE_DEVICES=2" } },
	{ .name = "self-all", .need = SHIM, .fn = child_self_all,
	  .env = { "HMEMLOOP_SELF=all" } },
};

static const char *argv0;

static bool is_double(void)
{
	const char *env = getenv("HMEMLOOP_TEST_CUDA");
	char name[64] = "";
	CUdevice dev;

	if (env && !strcmp(env, "real"))
		return false;
	t_cu(cuDeviceGet(&dev, 0));
	t_cu(cuDeviceGetName(name, sizeof(name), dev));
	return !strcmp(name, "CUDA driver double");
}

/* Run this program again as "-c NAME"; its wait status. */
static int spawn(const struct child *c)
{
	double end = t_now() + 3 * t_wait_s() + 30;
	const char *w = getenv("HMEMLOOP_TEST_WAIT");
	pid_t pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid) {
		char *args[] = { (char *) argv0, "-p", (char *) t_prov, "-c",
				 (char *) c->name, NULL };

		for (int i = 0; i < 2 && c->env[i]; i++)
			putenv((char *) c->env[i]);
		/* Failure may be "no completion": do not wait 10 s for it. */
		if (c->must_fail && (!w || atof(w) > 3))
			setenv("HMEMLOOP_TEST_WAIT", "3", 1);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (t_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			t_fail("%s: the child did not end in time", c->name);
		}
		usleep(10000);
	}
	return st;
}

static void run_children(void)
{
	const char *enable = getenv("HMEMLOOP_ENABLE");
	bool shim = enable && !strcmp(enable, "1"), dbl = is_double();

	for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++) {
		const struct child *c = &children[i];
		int st;

		if (c->need == DOUBLE && !dbl) {
			note("%s skipped: it needs the CUDA driver double",
			     c->name);
			continue;
		}
		if (c->need == SHIM && !shim) {
			note("%s skipped: hmemloop is not enabled", c->name);
			continue;
		}
		st = spawn(c);
		if (c->must_fail) {
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
			continue;
		}
		t_assert(!WIFSIGNALED(st), "%s: killed by signal %d", c->name,
			 WTERMSIG(st));
		t_assert(!WEXITSTATUS(st), "%s: failed, status %d", c->name,
			 WEXITSTATUS(st));
	}
}

/* ---- main --------------------------------------------------------------- */

/* The cases (all, or the one named), in each registration mode the
 * provider gives. */
static void run_cases(struct fx *fx, const char *only)
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
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!only || !strcmp(cases[i].name, only))
				cases[i].fn(fx);
		verify_all("at the end");
		fx_close(fx);
	}
}

int main(int argc, char **argv)
{
	const char *name = NULL;
	struct fx fx;
	int c;

	t_init(argc, argv, "c:");
	while ((c = getopt(argc, argv, "p:c:")) != -1)
		if (c == 'c')
			name = optarg;
	argv0 = argv[0];
	t_cuda_init();
	alloc_buffers();
	cur_fx = &fx;

	if (name) {
		for (size_t i = 0; i < sizeof(children) / sizeof(children[0]);
		     i++) {
			if (strcmp(children[i].name, name))
				continue;
			chatty = false;
			fx_open(&fx, true, true);
			c = children[i].fn(&fx);
			fx_close(&fx);
			return c;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strcmp(cases[i].name, name)) {
				run_cases(&fx, name);
				return 0;
			}
		t_fail("no case %s", name);
	}
	run_cases(&fx, NULL);
	chatty = false;
	run_children();
	return 0;
}
