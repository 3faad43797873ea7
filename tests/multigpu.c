/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Several GPUs in one process: same-process fi_write, fi_read and fi_send
 * between buffers on different devices, both ways, with peer access and
 * without; every thread's current context as it was before; and no context
 * made on a device none of an operation's buffers is on.
 *
 * Device 0, which a careless shim would use by default, must stay
 * untouched while no buffer is on it. With three devices the buffers live
 * on devices 1 and 2 throughout. With two, a first round has both buffers
 * on device 1 and device 0 untouched, and a second moves bytes between
 * devices 0 and 1. On the CUDA driver double the program runs itself again
 * with CUDA_DOUBLE_DEVICES=2, then 3: both plans.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN (256 * 1024)
#define THREADS 16

/* A round: two buffers, slots 0 and 1, on devices dev[0] and dev[1]. */
struct fx {
	struct t_fabric f;
	struct t_ep a, b;		/* a initiates, b is the target */
	fi_addr_t ab;
	int dev[2];
	bool idle0;			/* device 0 holds no buffer: check it */
	CUcontext ctx[2];		/* the devices' primary contexts */
	void *buf[2];
	struct t_mr mr[2];
	char *host, *back;
};

static struct fx fx;

static CUdevice dev(int i)
{
	CUdevice d;

	t_cu(cuDeviceGet(&d, i));
	return d;
}

/* Whether device 0 has a context, and how much memory is used there
 * (which a context costs). Read through a context made for the question
 * and destroyed again, on a thread of its own. */
static void *probe_dev0(void *arg)
{
	size_t *used = arg, free_b, total_b;
	CUcontext ctx;

	t_cu(cuCtxCreate(&ctx, NULL, 0, dev(0)));
	t_cu(cuMemGetInfo(&free_b, &total_b));
	t_cu(cuCtxDestroy(ctx));
	*used = total_b - free_b;
	return NULL;
}

static size_t used_dev0(void)
{
	pthread_t th;
	size_t used;

	t_assert(!pthread_create(&th, NULL, probe_dev0, &used), "thread");
	pthread_join(th, NULL);
	return used;
}

static void dev0_untouched(const char *what)
{
	unsigned flags;
	int active;

	t_cu(cuDevicePrimaryCtxGetState(dev(0), &flags, &active));
	t_assert(!active, "%s: device 0's primary context is active: a "
		 "context was made on a device no buffer is on", what);
}

static void setup(int dev_a, int dev_b)
{
	fx.dev[0] = dev_a;
	fx.dev[1] = dev_b;
	fx.idle0 = dev_a && dev_b;
	for (int i = 0; i < 2; i++) {
		t_cu(cuDevicePrimaryCtxRetain(&fx.ctx[i], dev(fx.dev[i])));
		t_cu(cuCtxSetCurrent(fx.ctx[i]));
		fx.buf[i] = t_dev_alloc(LEN);
	}
	t_cu(cuCtxSetCurrent(NULL));
	t_open(&fx.f, NULL);
	t_ep_open(&fx.a, &fx.f, NULL);
	t_ep_open(&fx.b, &fx.f, NULL);
	fx.ab = t_insert(&fx.a, fx.b.name);
	for (int i = 0; i < 2; i++)
		t_reg(&fx.f, fx.buf[i], LEN, FI_SEND | FI_RECV | FI_READ |
		      FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, i + 1,
		      &fx.mr[i]);
}

static void teardown(void)
{
	for (int i = 0; i < 2; i++) {
		t_fi(fi_close(&fx.mr[i].mr->fid));
		t_cu(cuCtxSetCurrent(fx.ctx[i]));
		t_dev_free(fx.buf[i]);
	}
	t_cu(cuCtxSetCurrent(NULL));
	t_ep_close(&fx.a);
	t_ep_close(&fx.b);
	t_close(&fx.f);
}

/* Put and get device bytes in the buffer's own context, restoring the
 * thread's. */
static void put(int d, unsigned seed)
{
	CUcontext old;

	t_fill(fx.host, LEN, seed);
	t_cu(cuCtxGetCurrent(&old));
	t_cu(cuCtxSetCurrent(fx.ctx[d]));
	t_dev_put(fx.buf[d], fx.host, LEN);
	t_cu(cuCtxSetCurrent(old));
}

static bool holds(int d, unsigned seed)
{
	CUcontext old;

	t_cu(cuCtxGetCurrent(&old));
	t_cu(cuCtxSetCurrent(fx.ctx[d]));
	t_dev_get(fx.back, fx.buf[d], LEN);
	t_cu(cuCtxSetCurrent(old));
	return t_check(fx.back, LEN, seed);
}

enum op { WRITE, READ, SEND };
static const char *const op_names[] = { "fi_write", "fi_read", "fi_send" };

/* From a: fi_write of slot src into slot dst, or fi_read of src into dst. */
static ssize_t rma(bool read, int src, int dst, void *ctx)
{
	int l = read ? dst : src, r = read ? src : dst;
	uint64_t raddr = t_raddr(&fx.f, &fx.mr[r], 0);

	if (read)
		return fi_read(fx.a.ep, fx.buf[l], LEN, fx.mr[l].desc, fx.ab,
			       raddr, fx.mr[r].key, ctx);
	return fi_write(fx.a.ep, fx.buf[l], LEN, fx.mr[l].desc, fx.ab, raddr,
			fx.mr[r].key, ctx);
}

/* One operation moving slot src's bytes to slot dst, from the calling
 * thread, whose current context must be the same afterwards. */
static void move(enum op op, int src, int dst, unsigned seed, const char *how)
{
	CUcontext before, after;
	int sctx, rctx;

	put(src, seed);
	put(dst, seed + 1);
	t_cu(cuCtxGetCurrent(&before));
	switch (op) {
	case WRITE:
	case READ:
		t_post(fx.a.cq, rma(op == READ, src, dst, &sctx));
		break;
	case SEND:
		t_post(fx.b.cq, fi_recv(fx.b.ep, fx.buf[dst], LEN,
					fx.mr[dst].desc, FI_ADDR_UNSPEC,
					&rctx));
		t_post(fx.a.cq, fi_send(fx.a.ep, fx.buf[src], LEN,
					fx.mr[src].desc, fx.ab, &sctx));
		break;
	}
	t_expect(fx.a.cq, &sctx, op == SEND ? FI_SEND : FI_RMA,
		 (size_t) -1);
	if (op == SEND)
		t_expect(fx.b.cq, &rctx, FI_RECV, LEN);
	t_cu(cuCtxGetCurrent(&after));
	t_assert(after == before, "%s device %d to device %d, %s: the "
		 "thread's context changed from %p to %p", op_names[op],
		 fx.dev[src], fx.dev[dst], how, (void *) before,
		 (void *) after);
	t_assert(holds(dst, seed), "%s device %d to device %d, %s: wrong "
		 "bytes", op_names[op], fx.dev[src], fx.dev[dst], how);
	if (fx.idle0)
		dev0_untouched(how);
}

static void every_op(const char *how, unsigned seed)
{
	for (enum op op = WRITE; op <= SEND; op++) {
		move(op, 0, 1, seed + 10 * op, how);
		move(op, 1, 0, seed + 10 * op + 5, how);
	}
	if (fx.dev[0] == fx.dev[1])
		t_ok("fi_write, fi_read, fi_send between two buffers on "
		     "device %d, %s", fx.dev[0], how);
	else
		t_ok("fi_write, fi_read, fi_send between devices %d and %d, "
		     "both ways, %s", fx.dev[0], fx.dev[1], how);
}

/* From a thread with no context, or with each buffer's device's context
 * current, or a context of its own. */
static void *from_thread(void *arg)
{
	unsigned seed = (unsigned) (uintptr_t) arg;
	char how[80];
	CUcontext own;

	every_op("a thread with no current context", seed);
	for (int i = 0; i < (fx.dev[0] == fx.dev[1] ? 1 : 2); i++) {
		snprintf(how, sizeof(how), "a thread with device %d's context "
			 "current", fx.dev[i]);
		t_cu(cuCtxSetCurrent(fx.ctx[i]));
		every_op(how, seed + 100 * (i + 1));
	}
	snprintf(how, sizeof(how), "a thread with a context it created on "
		 "device %d", fx.dev[1]);
	t_cu(cuCtxCreate(&own, NULL, 0, dev(fx.dev[1])));
	every_op(how, seed + 300);
	t_cu(cuCtxDestroy(own));
	t_cu(cuCtxSetCurrent(NULL));
	return NULL;
}

static void run_thread(unsigned seed)
{
	pthread_t th;

	t_assert(!pthread_create(&th, NULL, from_thread,
				 (void *) (uintptr_t) seed), "thread");
	pthread_join(th, NULL);
}

/* Many operations from fresh threads, a few at a time. */
static void *burst(void *arg)
{
	unsigned seed = (unsigned) (uintptr_t) arg;

	/* One thread at a time on the shared endpoints and buffers. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&lock);
	move(seed % 3, seed % 2, 1 - seed % 2, seed, "a fresh thread");
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void fresh_threads(void)
{
	pthread_t th[THREADS];

	for (int i = 0; i < THREADS; i++)
		t_assert(!pthread_create(&th[i], NULL, burst,
					 (void *) (uintptr_t) (1000 + i)),
			 "thread");
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	t_ok("%d operations from %d fresh threads", THREADS, THREADS);
}

static void peer_access(bool on)
{
	for (int i = 0; i < 2; i++) {
		CUresult r;

		t_cu(cuCtxSetCurrent(fx.ctx[i]));
		r = on ? cuCtxEnablePeerAccess(fx.ctx[1 - i], 0) :
			 cuCtxDisablePeerAccess(fx.ctx[1 - i]);
		if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED &&
		    r != CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
			t_cu(r);
	}
	t_cu(cuCtxSetCurrent(NULL));
}

/* Every operation, from every kind of thread; between two devices, with
 * peer access off and on. */
static void round_of(int dev_a, int dev_b, unsigned seed)
{
	static const char *const hows[] = {
		"peer access off, main thread with no context",
		"peer access on, main thread with no context",
	};

	setup(dev_a, dev_b);
	if (dev_a == dev_b) {
		every_op("main thread with no context", seed);
		run_thread(seed + 1000);
	}
	for (int on = 0; dev_a != dev_b && on < 2; on++) {
		peer_access(on);
		every_op(hows[on], seed + 2000 * on);
		run_thread(seed + 2000 * on + 1000);
	}
	fresh_threads();
	teardown();
}

/* Every round the devices allow. */
static void plan(void)
{
	size_t used_before, used_after;
	int n;

	t_cu(cuDeviceGetCount(&n));
	if (n < 2)
		t_skip("%d CUDA device(s): this test needs 2 or more", n);
	fx.host = malloc(LEN);
	fx.back = malloc(LEN);
	dev0_untouched("before anything");
	used_before = used_dev0();

	/* Device 0 holds no buffer: it must stay as it was. */
	round_of(1, n > 2 ? 2 : 1, 1);
	used_after = used_dev0();
	t_assert(used_after == used_before, "device 0 uses %zu bytes after "
		 "the transfers, %zu before", used_after, used_before);
	t_ok("device 0 untouched: no primary context, %zu bytes used before "
	     "and after", used_after);

	/* With two devices, the round between them comes last. */
	if (n == 2)
		round_of(0, 1, 10000);
}

/* On a GPU's driver, the devices there are. */
static void devices(void)
{
	if (t_cuda_double()) {
		t_case_skip("devices: on the double, two-devices and "
			    "three-devices run the plan");
		return;
	}
	plan();
}

/* On the double: the plan on two devices, then on three, each in a
 * process of its own. */
static const struct t_case cases[] = {
	T_CASE("devices", devices),
	{ .name = "two-devices", .run = plan, .need = T_NEED_DOUBLE,
	  .fresh = true, .env = { "CUDA_DOUBLE_DEVICES=2" } },
	{ .name = "three-devices", .run = plan, .need = T_NEED_DOUBLE,
	  .fresh = true, .env = { "CUDA_DOUBLE_DEVICES=3" } },
};

/* No context made current: device 0 must stay untouched. */
static void init(void)
{
	t_cu(cuInit(0));
}

T_MAIN(cases, .setup = init);
