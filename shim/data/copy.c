/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Copies: queued on streams of the thread's own, in batches where the
 * driver takes them, and followed until they land (tickets).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_kernel.h"
#include "hml_log.h"
#include "hml_stream.h"

/*
 * Each thread copies on streams of its own (stream.c): each operation in
 * flight on one holds it (its ticket).
 *
 * Every MARK_EVERY copies the thread records an event on the stream (a
 * mark), so that the copies before it can be seen landed while later ones
 * still run: a reader then completes them and the application posts
 * more before the stream runs dry. Without a mark, the stream itself is
 * asked, which answers only when all its copies are over.
 *
 * Where the driver has cuMemcpyBatchAsync (API 13.0), the copies of
 * operations completed later, posted while their stream has copies in
 * flight, wait in the stream's batch, and go to the driver together: when
 * the batch is full, when a copy would touch what one in it writes (the
 * driver runs a batch's copies in any order), and when anyone asks
 * whether a copy in it has landed or waits for it. A batch the driver
 * refuses goes copy by copy, and a copy that fails then is kept, by
 * number, as its own operation's error. A batch of copies that hmemloop's
 * kernel may make goes to it instead (kernel.c), unless it is one copy to
 * or from the host: a launch costs the GPU more than the engines' copy
 * there (3.4 µs against 2.5 on an H200).
 */
#define MARK_EVERY 16

/* What a stream whose context is not live answers: its copies went with
 * the context. */
static int gone(void)
{
	return hml_cuda_failed("cuCtxGetId", CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

/* Has s copies not known to have landed, or a batch? A copy to an idle
 * stream goes at once: waiting in a batch would only add to its latency. */
static bool busy(struct hml_stream *s)
{
	return __atomic_load_n(&s->nb, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) <
	       __atomic_load_n(&s->posted, __ATOMIC_ACQUIRE);
}

int hml_copy_begin(struct hml_copy *c, const struct hml_mem *where,
		   bool later)
{
	unsigned long long id;
	CUcontext ctx;
	CUresult r;

	/* No stream: nothing for end to wait for. */
	c->s = NULL;
	c->batch = false;
	c->where = where;
	c->err = hml_cuda_enter(where, &ctx, &c->pushed, &id);
	if (c->err)
		return c->err;
	r = hml_stream_for(ctx, id, &c->s);
	if (r) {
		c->s = NULL;
		return c->err = hml_cuda_failed("cuStreamCreate", r);
	}
	c->batch = later && busy(c->s) &&
		   __atomic_load_n(&hml_cuda_batching, __ATOMIC_RELAXED);
	return 0;
}

/* *v becomes at least to. */
static void raise_to(uint64_t *v, uint64_t to)
{
	uint64_t old = __atomic_load_n(v, __ATOMIC_ACQUIRE);

	while (old < to &&
	       !__atomic_compare_exchange_n(v, &old, to, true,
					    __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
}

/* A mark after copy seq, in a slot whose last mark has landed; none where
 * the driver will not (the stream is asked instead). s is locked. */
static void mark(struct hml_stream *s, uint64_t seq)
{
	int i = seq / MARK_EVERY % HML_MARKS;
	uint64_t old = __atomic_load_n(&s->mark[i], __ATOMIC_ACQUIRE);

	if (old >= seq || old > __atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
		return;
	if (!s->ev[i] &&
	    hml_cu.event_create(&s->ev[i], CU_EVENT_DISABLE_TIMING))
		return;
	/* A reader that asks the event for the old mark meanwhile learns at
	 * worst that the new one has landed, and so has the old. */
	if (!hml_cu.event_record(s->ev[i], s->stream))
		__atomic_store_n(&s->mark[i], seq, __ATOMIC_RELEASE);
}

/* Copy seq failed with err; s is locked. */
static void fail(struct hml_stream *s, uint64_t seq, int err)
{
	struct hml_fail *f;

	for (f = s->fails; f; f = f->next)
		if (f->seq == seq)
			return;
	f = malloc(sizeof(*f));
	if (!f) {
		raise_to(&s->lost, seq);
		return;
	}
	*f = (struct hml_fail) { s->fails, seq, err };
	s->fails = f;
	__atomic_add_fetch(&s->nfails, 1, __ATOMIC_RELEASE);
}

/* The error of copy seq, once it is over: told once. */
static int failure(struct hml_stream *s, uint64_t seq)
{
	struct hml_fail **f, *x;
	int err = 0;

	if (!__atomic_load_n(&s->nfails, __ATOMIC_ACQUIRE) &&
	    seq > __atomic_load_n(&s->lost, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&s->lock);
	for (f = &s->fails; *f; f = &(*f)->next)
		if ((*f)->seq == seq) {
			x = *f;
			*f = x->next;
			err = x->err;
			free(x);
			__atomic_sub_fetch(&s->nfails, 1, __ATOMIC_RELEASE);
			break;
		}
	if (!err && seq <= __atomic_load_n(&s->lost, __ATOMIC_ACQUIRE))
		err = -FI_EIO;
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* The driver refused s's batch (sent by call): each copy goes alone, so
 * that a failure is its own operation's. Where none fails, the batch was
 * refused for itself: such batches stop (*on), as then says. */
static void refused(struct hml_stream *s, const char *call, CUresult r,
		    bool *on, const char *then)
{
	const char *name = "?";
	bool all = true;

	for (int i = 0; i < s->nb; i++) {
		CUresult r1 = hml_cu.memcpy_async(s->dst[i], s->src[i],
						  s->len[i], s->stream);

		if (r1)
			fail(s, s->seq[i],
			     hml_cuda_failed("cuMemcpyAsync", r1));
		all = all && !r1;
	}
	if (!all)
		return;
	hml_cu.error_name(r, &name);
	hml_warn("%s: %s, its copies alone succeeded: %s", call, name, then);
	__atomic_store_n(on, false, __ATOMIC_RELAXED);
}

/* Hand s's batch to the driver, in its context (the caller may be another
 * thread, in another context); s is locked. */
static void send_locked(struct hml_stream *s)
{
	CUmemcpyAttributes attr = {
		.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
	};
	uint64_t upto = __atomic_load_n(&s->posted, __ATOMIC_ACQUIRE);
	size_t first = 0;
	bool pushed = false, kernel;
	CUresult r;

	if (!s->nb)
		goto out;
	kernel = s->nk == s->nb && (s->nb > 1 || !s->nh) &&
		 __atomic_load_n(&hml_kernel_on, __ATOMIC_RELAXED);
	r = hml_cuda_current(s->ctx, &pushed);
	if (!r && kernel)
		r = hml_kernel_copy(s->dst, s->src, s->len, s->nb, s->stream);
	else if (!r && s->nb > 1)
		r = hml_cu.memcpy_batch(s->dst, s->src, s->len, s->nb, &attr,
					&first, 1, s->stream);
	else if (!r)	/* a batch of one would only cost more */
		r = hml_cu.memcpy_async(s->dst[0], s->src[0], s->len[0],
					s->stream);
	if (r && kernel)
		refused(s, "cuLaunchKernel", r, &hml_kernel_on,
			"batches go to the copy engines");
	else if (r && s->nb > 1)
		refused(s, "cuMemcpyBatchAsync", r, &hml_cuda_batching,
			"copies go one by one");
	else if (r)
		fail(s, s->seq[0], hml_cuda_failed("cuMemcpyAsync", r));
	if (upto)
		mark(s, upto);
	hml_cuda_leave(pushed);
	s->nk = s->nh = 0;
	__atomic_store_n(&s->nb, 0, __ATOMIC_RELEASE);
out:
	raise_to(&s->sent, upto);
}

static void send(struct hml_stream *s)
{
	pthread_mutex_lock(&s->lock);
	send_locked(s);
	pthread_mutex_unlock(&s->lock);
}

static bool overlap(CUdeviceptr a, size_t an, CUdeviceptr b, size_t bn)
{
	return a < b + bn && b < a + an;
}

/* Would a copy of n bytes from src to dst depend on one in s's batch? */
static bool clash(const struct hml_stream *s, CUdeviceptr dst,
		  CUdeviceptr src, size_t n)
{
	for (int i = 0; i < s->nb; i++)
		if (overlap(dst, n, s->dst[i], s->len[i]) ||
		    overlap(dst, n, s->src[i], s->len[i]) ||
		    overlap(src, n, s->dst[i], s->len[i]))
			return true;
	return false;
}

/* Only this thread posts on s: its next copy is posted + 1. kernel: the
 * copy kernel may make it; host: it is to or from the host. */
static void add(struct hml_stream *s, CUdeviceptr dst, CUdeviceptr src,
		size_t n, bool kernel, bool host)
{
	int i;

	pthread_mutex_lock(&s->lock);
	if (s->nb == HML_BATCH || clash(s, dst, src, n))
		send_locked(s);
	i = s->nb;
	s->dst[i] = dst;
	s->src[i] = src;
	s->len[i] = n;
	s->seq[i] = __atomic_load_n(&s->posted, __ATOMIC_RELAXED) + 1;
	s->nk += kernel;
	s->nh += kernel && host;
	__atomic_store_n(&s->nb, i + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
}

void hml_copy_piece(struct hml_copy *c, void *dst, const struct hml_mem *dm,
		    const void *src, const struct hml_mem *sm, size_t n)
{
	CUdeviceptr d = (CUdeviceptr) (uintptr_t) dst;
	CUdeviceptr s = (CUdeviceptr) (uintptr_t) src;
	CUresult r;

	if (c->err)
		return;
	if (c->batch) {
		add(c->s, d, s, n, hml_kernel_fits(d, dm, s, sm, n, c->where) &&
				   hml_kernel_ready(),
		    dm->type == HML_MEM_HOST || sm->type == HML_MEM_HOST);
		return;
	}
	/* After the batch: the stream's order is the copies' order. */
	if (__atomic_load_n(&c->s->nb, __ATOMIC_ACQUIRE))
		send(c->s);
	r = hml_cu.memcpy_async(d, s, n, c->s->stream);
	if (r)
		c->err = hml_cuda_failed("cuMemcpyAsync", r);
}

/* Everything queued on s up to number upto has landed. */
static void landed(struct hml_stream *s, uint64_t upto)
{
	raise_to(&s->done, upto);
}

/* Wait for everything queued on s. */
static int drain(struct hml_stream *s)
{
	uint64_t upto = __atomic_load_n(&s->posted, __ATOMIC_ACQUIRE);
	CUresult r;

	if (!hml_stream_live(s))
		return gone();
	if (__atomic_load_n(&s->nb, __ATOMIC_ACQUIRE))
		send(s);
	r = hml_cu.stream_sync(s->stream);
	if (r)
		return hml_cuda_failed("cuStreamSynchronize", r);
	landed(s, upto);
	return 0;
}

int hml_copy_end(struct hml_copy *c)
{
	int err;

	/* Nothing is complete before the stream is: device-to-device copies
	 * return before the bytes move, and the pieces queued before one
	 * that failed are still moving. The first error is the one told. */
	if (c->s && (err = drain(c->s)) && !c->err)
		c->err = err;
	hml_cuda_leave(c->pushed);
	return c->err;
}

int hml_copy_post(struct hml_copy *c, struct hml_ticket *t)
{
	struct hml_stream *s = c->s;

	t->s = NULL;
	if (c->err || !s)
		return hml_copy_end(c);
	t->s = s;
	t->seq = __atomic_add_fetch(&s->posted, 1, __ATOMIC_ACQ_REL);
	/* Batched copies are marked as they are sent. */
	if (!c->batch) {
		raise_to(&s->sent, t->seq);
		if (t->seq % MARK_EVERY == 0) {
			pthread_mutex_lock(&s->lock);
			mark(s, t->seq);
			pthread_mutex_unlock(&s->lock);
		}
	}
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	hml_cuda_leave(c->pushed);
	return 0;
}

/* Is the ticket's copy known to have landed (or was there none)? */
static bool over(const struct hml_ticket *t)
{
	return !t->s ||
	       __atomic_load_n(&t->s->done, __ATOMIC_ACQUIRE) >= t->seq;
}

/* The first mark at or after copy seq, or -1. */
static int mark_after(struct hml_stream *s, uint64_t seq, uint64_t *at)
{
	int best = -1;

	for (int i = 0; i < HML_MARKS; i++) {
		uint64_t m = __atomic_load_n(&s->mark[i], __ATOMIC_ACQUIRE);

		if (m >= seq && (best < 0 || m < *at)) {
			best = i;
			*at = m;
		}
	}
	return best;
}

/* Has the ticket's copy landed? Asks the driver about the first mark
 * after it, or else the stream (from any thread, in any context), at most
 * once for all that was queued on it before. A context reset meanwhile
 * took the copy with it. */
int hml_ticket_poll(struct hml_ticket *t)
{
	struct hml_stream *s = t->s;
	uint64_t upto;
	CUresult r;
	int i, err;

	if (over(t))
		goto known;
	if (!hml_stream_live(s))
		return gone();
	if (__atomic_load_n(&s->sent, __ATOMIC_ACQUIRE) < t->seq)
		send(s);
	upto = __atomic_load_n(&s->sent, __ATOMIC_ACQUIRE);
	i = mark_after(s, t->seq, &upto);
	r = i < 0 ? hml_cu.stream_query(s->stream) :
		    hml_cu.event_query(s->ev[i]);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	if (r)
		return hml_cuda_failed(i < 0 ? "cuStreamQuery" :
					       "cuEventQuery", r);
	landed(s, upto);
known:
	err = s ? failure(s, t->seq) : 0;
	return err ? err : 1;
}

int hml_ticket_wait(struct hml_ticket *t)
{
	int err = over(t) ? 0 : drain(t->s);

	return err || !t->s ? err : failure(t->s, t->seq);
}

void hml_ticket_put(struct hml_ticket *t)
{
	if (t->s)
		hml_stream_put(t->s);
	t->s = NULL;
}

int hml_ticket_land(struct hml_ticket *t)
{
	int err = hml_ticket_wait(t);

	hml_ticket_put(t);
	return err;
}
