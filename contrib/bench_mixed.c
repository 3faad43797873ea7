/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --mixed, in a rate worker: B_MIX_THREADS endpoints of the run's domain,
 * each driven by a thread of its own with B_MIX_WINDOW writes outstanding,
 * fi_write device to device on the run's buffers (the bytes of one write
 * race another's: only the rate counts here). Each thread reads only its
 * own CQ, as an application's would.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_domain.h>

#include "bench_dev.h"

struct mix_thread {
	pthread_t tid;
	struct b_ctx *c;
	struct b_lane *l;
	pthread_barrier_t *start;
	size_t len;
	long n, ops;
	double t0, t1;
	char err[256];
};

static struct b_ep eps[B_MIX_THREADS];
static struct b_lane lanes[B_MIX_THREADS];
static bool opened;

static void *mix_run(void *arg)
{
	struct mix_thread *t = arg;
	const struct b_dir *d2d = &b_mode->dirs[0];

	/* The context current, as an application's thread has it. */
	if (b_cu_ok(cu.ctx_set_current(t->c->cuctx[0]), "cuCtxSetCurrent") ||
	    b_rma_rate(t->c, t->l, d2d, t->len, t->l->window, 0, false) < 0)
		snprintf(t->err, sizeof(t->err), "%s", b_errmsg);
	/* Every thread waits here, so that none starts alone. */
	pthread_barrier_wait(t->start);
	if (t->err[0])
		return NULL;
	t->t0 = b_now();
	t->ops = b_rma_rate(t->c, t->l, d2d, t->len, t->n,
			    t->t0 + b_opt.max_time, false);
	t->t1 = b_now();
	if (t->ops < 0)
		snprintf(t->err, sizeof(t->err), "%s", b_errmsg);
	return NULL;
}

/* Endpoints for every thread, each with its own address in its AV. */
static int mix_open(struct b_ctx *c)
{
	enum fi_threading th = c->fab.info->domain_attr->threading;

	if (th == FI_THREAD_UNSPEC || th == FI_THREAD_DOMAIN) {
		snprintf(b_errmsg, sizeof(b_errmsg), "the provider's domain "
			 "allows one thread at a time (%s)",
			 fi_tostr(&th, FI_TYPE_THREADING));
		return -1;
	}
	for (int i = 0; !opened && i < B_MIX_THREADS; i++) {
		b_ep_open(&eps[i], &c->fab);
		b_lane_init(&lanes[i], &eps[i], b_av_insert(&eps[i],
			    eps[i].name), B_MIX_WINDOW);
		lanes[i].alone = true;
		lanes[i].first = i * B_MIX_WINDOW;
	}
	opened = true;
	return 0;
}

static void mix_sum(struct mix_thread *t, struct b_mix *x)
{
	double first = t[0].t0, last = t[0].t1, r;

	memset(x, 0, sizeof(*x));
	for (int i = 0; i < B_MIX_THREADS; i++) {
		r = t[i].ops / (t[i].t1 - t[i].t0);
		x->ops += t[i].ops;
		x->tmin = !i || r < x->tmin ? r : x->tmin;
		x->tmax = r > x->tmax ? r : x->tmax;
		first = t[i].t0 < first ? t[i].t0 : first;
		last = t[i].t1 > last ? t[i].t1 : last;
	}
	x->secs = last - first;
	x->status = P_OK;
}

int b_mixed(struct b_ctx *c, size_t len, struct b_mix *x)
{
	struct mix_thread t[B_MIX_THREADS];
	pthread_barrier_t start;
	int ret = 0;

	if (mix_open(c))
		return -1;
	pthread_barrier_init(&start, NULL, B_MIX_THREADS);
	memset(t, 0, sizeof(t));
	for (int i = 0; i < B_MIX_THREADS; i++) {
		t[i] = (struct mix_thread) {
			.c = c, .l = &lanes[i], .start = &start, .len = len,
			.n = b_rate_ops(B_MIX_WINDOW),
		};
		if (pthread_create(&t[i].tid, NULL, mix_run, &t[i]))
			b_die("pthread_create failed");
	}
	for (int i = 0; i < B_MIX_THREADS; i++)
		pthread_join(t[i].tid, NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < B_MIX_THREADS && !ret; i++)
		if (t[i].err[0]) {
			snprintf(b_errmsg, sizeof(b_errmsg), "thread %d: %s",
				 i, t[i].err);
			ret = -1;
		}
	if (!ret)
		mix_sum(t, x);
	return ret;
}

void b_mixed_close(void)
{
	for (int i = 0; opened && i < B_MIX_THREADS; i++) {
		b_ep_close(&eps[i]);
		free(lanes[i].ctx);
	}
	opened = false;
}
