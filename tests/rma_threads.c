/* SPDX-License-Identifier: BSD-2-Clause */
/* The device RMA test's case threads: transfers issued from threads
 * other than the one that made the fixture, with and without a CUDA
 * context of their own. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>

#include "rma.h"

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
	char call[80], what[160];
	struct xfer x;
	pthread_t th;

	for (o = ops; o < ops + n; o++) {
		struct job j = { &fx->ia, &fx->tb, &x, o->own_ctx, what };

		describe(call, sizeof(call), o->op, o->lb, o->rb);
		snprintf(what, sizeof(what), "thread %s: %s, %zu bytes; %s",
			 o->own_ctx ? "with another context of the device" :
			 "without a context", call, o->len,
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

