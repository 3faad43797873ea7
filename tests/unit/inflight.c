/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Operations in flight (shim/data/inflight.c): an endpoint's operations
 * complete in the order they were posted, whatever order their copies
 * land in; an endpoint's are not held back by another's. Copies go on
 * fake streams (struct hml_stream, with the driver's calls in hml_cu
 * answered here), which land when a row says. A failure names the rule
 * broken.
 */
#include <stdlib.h>

#include "fake_prov.h"
#include "hml_stream.h"
#include "unit.h"

/* A stream of the fake driver: all its copies land at once. */
struct fstream {
	bool landed;
};

static struct fstream fs[3];

static CUresult ctx_get_id(CUcontext ctx, unsigned long long *id)
{
	*id = (uintptr_t) ctx;
	return CUDA_SUCCESS;
}

static CUresult stream_query(CUstream h)
{
	return ((struct fstream *) h)->landed ? CUDA_SUCCESS :
						CUDA_ERROR_NOT_READY;
}

static CUresult stream_sync(CUstream h)
{
	((struct fstream *) h)->landed = true;
	return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream h)
{
	(void) h;
	return CUDA_SUCCESS;
}

/* Stream i, nothing queued on it, in a context of its own. */
static struct hml_stream *stream(int i)
{
	struct hml_stream *s = calloc(1, sizeof(*s));

	fs[i].landed = false;
	s->stream = (CUstream) &fs[i];
	s->ctx = (CUcontext) &fs[i];
	s->id = (uintptr_t) &fs[i];
	s->refs = 1;
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

/* A copy of op queued on s, as hml_copy_post queues one; err: it fails. */
static void queue(struct hml_op *op, struct hml_stream *s, bool err)
{
	op->ticket.s = s;
	op->ticket.seq = ++s->posted;
	s->sent = op->ticket.seq;
	s->refs++;
	if (err) {
		struct hml_fail *f = malloc(sizeof(*f));

		*f = (struct hml_fail) { s->fails, op->ticket.seq, -FI_EIO };
		s->fails = f;
		s->nfails++;
	}
}

static struct hml_fabric fabric;
static struct hml_domain dom;

static void open_ep(struct fake_ep *p)
{
	fake_reset();
	fake_ep_open(p, &dom, 0, true);
	p->e.tx_cq = &p->cq;
}

/* An operation of p with context ctx, its copy on s (NULL: none). */
static void post(struct fake_ep *p, char *ctx, struct hml_stream *s,
		 bool err)
{
	struct hml_op op = {
		.e = &p->e, .kind = HML_WRITE, .cntr = HML_CNTR_NONE,
		.tx.op_context = ctx,
	};

	if (s)
		queue(&op, s, err);
	hml_cq_reserve(&p->cq);
	hml_inflight_add(&op);
}

/* The completions p's CQ has: those of ctx[from], ctx[from + 1] ...
 * each with an error where failed has its bit; how many. */
static int completed(struct fake_ep *p, const char *ctx, int from,
		     int failed, const char *rule)
{
	struct hml_cqe e;
	int n = from;

	while (fake_entry(&p->cq, &e)) {
		bool err = failed & 1 << n;

		u_check(e.op_context == &ctx[n] && !e.err == !err &&
			(!err || e.err == FI_EIO), "%s: completion %d is not "
			"operation %d's, with error %d", rule, n, n, e.err);
		n++;
	}
	return n - from;
}

#define A 1
#define B 2
#define LA (1 << A)
#define LB (1 << B)

static const struct row {
	const char *rule;
	int n;
	int stream[3];		/* each operation's copy: 0 none, A, B */
	int failed;		/* operations whose copy fails: bits */
	int landed;		/* streams landed before progress: bits */
	int now;		/* operations completed at their call */
	int done;		/* and at the progress after */
} rows[] = {
	{ "an operation whose copy has not landed stays in flight",
	  1, { A }, 0, 0, 0, 0 },
	{ "once its copy landed, it completes at the next progress",
	  1, { A }, 0, LA, 0, 1 },
	{ "a later operation whose copy landed first waits for the earlier",
	  2, { A, B }, 0, LB, 0, 0 },
	{ "once the earlier has landed, both complete, in posting order",
	  2, { A, B }, 0, LA | LB, 0, 2 },
	{ "the earlier one landed alone completes alone",
	  2, { A, B }, 0, LA, 0, 1 },
	{ "an operation with no copy completes at its call where none is in "
	  "flight", 1, { 0 }, 0, 0, 1, 1 },
	{ "one with no copy waits behind those in flight",
	  2, { A, 0 }, 0, 0, 0, 0 },
	{ "a failed copy completes its operation with the error, in its "
	  "place", 3, { A, B, A }, 1 << 1, LA | LB, 0, 3 },
	{ "a failed copy that has not landed holds the later ones back",
	  2, { B, A }, 1 << 0, LA, 0, 0 },
};

static void run(const struct row *w)
{
	struct hml_stream *s[3] = { NULL, stream(A), stream(B) };
	struct fake_ep p;
	char ctx[3];
	int n;

	open_ep(&p);
	for (int i = 0; i < w->n; i++)
		post(&p, &ctx[i], s[w->stream[i]], w->failed & 1 << i);
	n = completed(&p, ctx, 0, w->failed, w->rule);
	u_check(n == w->now, "%s: %d completed at their call, expected %d",
		w->rule, n, w->now);
	fs[A].landed = w->landed & LA;
	fs[B].landed = w->landed & LB;
	hml_inflight_progress();
	n += completed(&p, ctx, n, w->failed, w->rule);
	u_check(n == w->done, "%s: %d completed, expected %d", w->rule, n,
		w->done);
	/* Everything, waited for: the rest, in order. */
	hml_inflight_drain();
	n += completed(&p, ctx, n, w->failed, w->rule);
	u_check(n == w->n, "%s: %d completed after a drain, expected %d",
		w->rule, n, w->n);
	hml_stream_put(s[A]);
	hml_stream_put(s[B]);
	fake_ep_close(&p);
}

/* Two endpoints, and the waits of one endpoint's list. */
static void endpoints(void)
{
	struct hml_stream *a = stream(A), *b = stream(B);
	struct fake_ep p, q;
	char ctx[3];

	open_ep(&p);
	fake_ep_open(&q, &dom, 0, true);
	q.e.tx_cq = &q.cq;
	post(&p, &ctx[0], a, false);
	post(&q, &ctx[1], b, false);
	fs[B].landed = true;
	hml_inflight_progress();
	u_check(!completed(&p, ctx, 0, 0, "p") &&
		completed(&q, ctx, 1, 0, "q") == 1,
		"another endpoint's operations are not held back by this "
		"one's");

	hml_inflight_order(&p.e, &(struct hml_copy) { .s = a });
	u_check(!completed(&p, ctx, 0, 0, "same stream"), "a copy on the "
		"stream of the endpoint's last does not wait: the stream keeps "
		"their order");
	hml_inflight_order(&p.e, &(struct hml_copy) { .s = b });
	u_check(completed(&p, ctx, 0, 0, "another stream") == 1,
		"a copy on another stream waits for the endpoint's in flight");

	post(&p, &ctx[2], a, false);
	hml_inflight_wait(&p.e);
	u_check(completed(&p, ctx, 2, 0, "wait") == 1, "an endpoint's "
		"operations are all complete once it waits for them");
	hml_stream_put(a);
	hml_stream_put(b);
	fake_ep_close(&p);
	fake_ep_close(&q);
}

int main(void)
{
	hml_cu.ctx_get_id = ctx_get_id;
	hml_cu.stream_query = stream_query;
	hml_cu.stream_sync = stream_sync;
	hml_cu.stream_destroy = stream_destroy;
	fake_domain(&dom, &fabric, FI_PROGRESS_MANUAL, 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(&rows[i]);
	endpoints();
	hml_hold_domain_fini(&dom);
	return u_done("inflight: completions in posting order");
}
