/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: streams and events.
 *
 * A stream is a FIFO of operations.  Nothing runs in the background: work
 * is performed by whichever call synchronises with it, on the caller's
 * thread, under the one lock.  An operation may wait for another stream's
 * work up to a point; such a wait always points at work queued earlier,
 * so running it recursively cannot loop or deadlock.
 *
 * The legacy default stream orders itself against the blocking streams of
 * its context, as the real one does: whatever is queued on it waits for
 * what blocking streams queued before, and the other way round.
 */
#include "double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stream_init(struct CUstream_st *s, struct CUctx_st *c, unsigned flags)
{
	memset(s, 0, sizeof(*s));
	s->magic = STREAM_MAGIC;
	s->ctx = c;
	s->gen = c->gen;
	s->flags = flags;
}

/*
 * A stream that the end of its context (a reset, cuCtxDestroy) destroyed
 * is freed by the driver, and a call that names it follows freed memory:
 * on an H200, cuStreamQuery crashed. Abort, as loudly.
 */
static bool stream_live(struct CUstream_st *s)
{
	if (s->magic != STREAM_MAGIC || s->dead)
		return false;
	if (s->ctx->dead || s->gen != s->ctx->gen) {
		fprintf(stderr, "cuda double: a stream used after its context "
			"was reset or destroyed: the driver crashes here\n");
		abort();
	}
	return true;
}

static bool blocking(struct CUstream_st *s)
{
	return !s->legacy && !(s->flags & CU_STREAM_NON_BLOCKING);
}

static struct CUstream_st *stream_new(struct CUctx_st *c, unsigned flags)
{
	struct CUstream_st *s = malloc(sizeof(*s));

	if (!s)
		return NULL;
	stream_init(s, c, flags);
	s->next = c->streams;
	c->streams = s;
	return s;
}

static struct CUstream_st *per_thread(struct CUctx_st *c)
{
	pthread_t me = pthread_self();
	struct CUstream_st *s;

	for (s = c->streams; s; s = s->next)
		if (s->per_thread && pthread_equal(s->owner, me))
			return s;
	s = stream_new(c, 0);
	if (s) {
		s->per_thread = true;
		s->owner = me;
	}
	return s;
}

/* Resolve a stream argument; NULL is the per-thread stream for @ptds. */
CUresult stream_get(CUstream h, bool ptds, struct CUstream_st **out)
{
	struct CUctx_st *c;
	CUresult r;

	if (!h)
		h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		r = ctx_current(&c);
		if (r)
			return r;
		*out = h == CU_STREAM_LEGACY ? &c->legacy : per_thread(c);
		return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!stream_live(h))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = h;
	return CUDA_SUCCESS;
}

static void busy_add(struct CUstream_st *s)
{
	s->busy = true;
	s->busy_prev = NULL;
	s->busy_next = dbl.busy;
	if (dbl.busy)
		dbl.busy->busy_prev = s;
	dbl.busy = s;
}

static void busy_del(struct CUstream_st *s)
{
	if (s->busy_prev)
		s->busy_prev->busy_next = s->busy_next;
	else
		dbl.busy = s->busy_next;
	if (s->busy_next)
		s->busy_next->busy_prev = s->busy_prev;
	s->busy = false;
}

void push(struct CUstream_st *s, struct op *op)
{
	op->seq = ++dbl.seq;
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->polled = false;
	if (!s->busy)
		busy_add(s);
}

void free_ops(struct op *op)
{
	struct op *next;

	for (; op; op = next) {
		next = op->next;
		free(op->snap);
		free(op);
	}
}

static void pop(struct CUstream_st *s)
{
	struct op *op = s->head;

	s->head = op->next;
	if (!s->head) {
		s->tail = NULL;
		busy_del(s);
	}
	op->next = NULL;
	free_ops(op);
}

static CUresult push_wait(struct CUstream_st *s, struct CUstream_st *on,
			  uint64_t seq)
{
	struct op *op = calloc(1, sizeof(*op));

	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->kind = OP_WAIT;
	op->wait = on;
	op->wait_seq = seq;
	push(s, op);
	return CUDA_SUCCESS;
}

/* Queue the waits that legacy stream semantics call for before new work. */
CUresult join(struct CUstream_st *s)
{
	struct CUstream_st *b, *l = &s->ctx->legacy;
	CUresult r;

	if (s->legacy) {
		for (b = dbl.busy; b; b = b->busy_next) {
			if (b == s || b->ctx != s->ctx || !blocking(b) ||
			    b->tail->seq <= b->legacy_joined)
				continue;
			b->legacy_joined = b->tail->seq;
			r = push_wait(s, b, b->legacy_joined);
			if (r)
				return r;
		}
		return CUDA_SUCCESS;
	}
	if (!blocking(s) || !l->tail || l->tail->seq <= s->joined)
		return CUDA_SUCCESS;
	s->joined = l->tail->seq;
	return push_wait(s, l, s->joined);
}

CUresult enqueue(struct CUstream_st *s, struct op *op)
{
	CUresult r = join(s);

	if (r) {
		free_ops(op);
		return r;
	}
	push(s, op);
	return CUDA_SUCCESS;
}

static bool done(struct CUstream_st *s, uint64_t seq)
{
	return !s->head || s->head->seq > seq;
}

static void fill(char *p, size_t len, uint32_t val, int width)
{
	uint16_t v16 = val;
	size_t i;

	if (width == 1) {
		memset(p, (int)(val & 0xff), len);
		return;
	}
	for (i = 0; i + width <= len; i += width) {
		if (width == 2)
			memcpy(p + i, &v16, 2);
		else
			memcpy(p + i, &val, 4);
	}
}

static void op_exec(struct op *op)
{
	switch (op->kind) {
	case OP_COPY:
		memmove(op->dst, op->src, op->len);
		break;
	case OP_SET:
		fill(op->dst, op->len, op->val, op->width);
		break;
	default:
		break;
	}
}

/* Perform @s's work queued up to @upto, and what that work waits for. */
void stream_run(struct CUstream_st *s, uint64_t upto)
{
	struct op *op;

	while ((op = s->head) && op->seq <= upto) {
		if (op->kind == OP_WAIT)
			stream_run(op->wait, op->wait_seq);
		else
			op_exec(op);
		pop(s);
	}
}

/* A failed synchronisation loses the work it would have performed. */
static void stream_discard(struct CUstream_st *s, uint64_t upto)
{
	while (s->head && s->head->seq <= upto)
		pop(s);
}

/*
 * What a synchronising call does: everything queued so far completes.  For
 * the legacy stream that includes earlier work of the blocking streams.
 */
CUresult stream_drain(struct CUstream_st *s)
{
	CUresult r = s->legacy ? join(s) : CUDA_SUCCESS;

	if (!r)
		stream_run(s, UINT64_MAX);
	return r;
}

static struct CUstream_st *busy_in(struct CUctx_st *c)
{
	struct CUstream_st *s;

	for (s = dbl.busy; s; s = s->busy_next)
		if (s->ctx == c)
			return s;
	return NULL;
}

void ctx_drain(struct CUctx_st *c)
{
	struct CUstream_st *s;

	while ((s = busy_in(c)))
		stream_run(s, UINT64_MAX);
}

CUresult ctx_sync(struct CUctx_st *c)
{
	struct CUstream_st *s;

	if (!sync_fails()) {
		ctx_drain(c);
		return CUDA_SUCCESS;
	}
	while ((s = busy_in(c)))
		stream_discard(s, UINT64_MAX);
	return CUDA_ERROR_LAUNCH_FAILED;
}

static bool op_touches(struct op *op, uint64_t lo, uint64_t hi)
{
	int i;

	for (i = 0; i < 2; i++)
		if (op->key[i][0] < hi && lo < op->key[i][1])
			return true;
	return false;
}

/* The last operation of @s that touches [lo, hi). */
static struct op *last_touch(struct CUstream_st *s, uint64_t lo, uint64_t hi,
			     bool sync_only)
{
	struct op *op, *last = NULL;

	for (op = s->head; op; op = op->next)
		if ((!sync_only || op->from_sync) && op_touches(op, lo, hi))
			last = op;
	return last;
}

/*
 * Perform queued work that touches [lo, hi), before that memory goes away
 * or changes its rules.  @sync_only limits it to work queued by
 * "synchronous" calls (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS).
 */
void flush_keys(uint64_t lo, uint64_t hi, bool sync_only)
{
	struct CUstream_st *s;
	struct op *last = NULL;

	for (;;) {
		for (s = dbl.busy; s; s = s->busy_next) {
			last = last_touch(s, lo, hi, sync_only);
			if (last)
				break;
		}
		if (!s)
			return;
		stream_run(s, last->seq);
	}
}

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = enter_ctx(!ph || (flags & ~CU_STREAM_NON_BLOCKING), &c);

	if (r)
		return r;
	s = stream_new(c, flags);
	if (!s) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		/* the range a Hopper reports: -5 (greatest) to 0 */
		s->prio = prio < -5 ? -5 : prio > 0 ? 0 : prio;
		*ph = s;
	}
	unlock();
	return r;
}

ENTRY(cuStreamCreate, (CUstream *phStream, unsigned int Flags),
      stream_create(phStream, Flags, 0))

ENTRY(cuStreamCreateWithPriority,
      (CUstream *phStream, unsigned int flags, int priority),
      stream_create(phStream, flags, priority))

/* Queued work still completes; only the handle goes. */
static CUresult stream_destroy(CUstream h)
{
	struct CUstream_st **pp;
	CUresult r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	lock();
	if (!stream_live(h)) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	for (pp = &h->ctx->streams; *pp; pp = &(*pp)->next) {
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	}
	h->dead = true;
out:
	unlock();
	return r;
}

ENTRY_V2(cuStreamDestroy, (CUstream hStream), stream_destroy(hStream))

/* enter(), then the stream h names: the lock is held, and *s set, only when
 * it returns CUDA_SUCCESS. */
static CUresult enter_stream(bool invalid, CUstream h, bool ptds,
			     struct CUstream_st **s)
{
	CUresult r = enter(invalid);

	if (!r && (r = stream_get(h, ptds, s)))
		unlock();
	return r;
}

static CUresult stream_sync(CUstream h, bool ptds)
{
	struct CUstream_st *s;
	CUresult r = enter_stream(false, h, ptds, &s);

	if (r)
		return r;
	if (sync_fails()) {
		stream_discard(s, UINT64_MAX);
		r = CUDA_ERROR_LAUNCH_FAILED;
	} else {
		r = stream_drain(s);
	}
	unlock();
	return r;
}

ENTRY_PT(cuStreamSynchronize, _ptsz, (CUstream hStream),
	 stream_sync(hStream, ptds))

/*
 * The first query after new work reports it as not done, the next one
 * performs it: code that polls sees both answers, as on a GPU.
 */
static CUresult stream_query(CUstream h, bool ptds)
{
	struct CUstream_st *s;
	CUresult r = enter_stream(false, h, ptds, &s);

	if (r)
		return r;
	if (s->legacy)
		r = join(s);
	if (!r && query_fails())
		r = CUDA_ERROR_LAUNCH_FAILED;
	if (r || !s->head)
		goto out;
	if (!s->polled) {
		s->polled = true;
		r = CUDA_ERROR_NOT_READY;
	} else {
		stream_run(s, UINT64_MAX);
	}
out:
	unlock();
	return r;
}

ENTRY_PT(cuStreamQuery, _ptsz, (CUstream hStream), stream_query(hStream, ptds))

static bool event_live(struct CUevent_st *e)
{
	return e && e->magic == EVENT_MAGIC && !e->dead && !e->ctx->dead &&
	       e->gen == e->ctx->gen;
}

static bool event_done(struct CUevent_st *e)
{
	return !e->recorded || done(e->stream, e->seq);
}

static CUresult stream_wait_event(CUstream h, struct CUevent_st *e,
				  unsigned flags, bool ptds)
{
	struct CUstream_st *s;
	struct op *op;
	CUresult r = enter_stream(flags & ~CU_EVENT_WAIT_EXTERNAL, h, ptds, &s);

	if (r)
		return r;
	if (!event_live(e))
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r || event_done(e))
		goto out;
	op = calloc(1, sizeof(*op));
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->kind = OP_WAIT;
	op->wait = e->stream;
	op->wait_seq = e->seq;
	r = enqueue(s, op);
out:
	unlock();
	return r;
}

ENTRY_PT(cuStreamWaitEvent, _ptsz,
	 (CUstream hStream, CUevent hEvent, unsigned int Flags),
	 stream_wait_event(hStream, hEvent, Flags, ptds))

static CUresult stream_ctx(CUstream h, CUcontext *pctx, CUgreenCtx *pgreen,
			   bool ptds)
{
	struct CUstream_st *s;
	CUresult r = enter_stream(!pctx, h, ptds, &s);

	if (r)
		return r;
	*pctx = s->ctx;
	if (pgreen)
		*pgreen = NULL;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY_PT(cuStreamGetCtx, _ptsz, (CUstream hStream, CUcontext *pctx),
	 stream_ctx(hStream, pctx, NULL, ptds))

ENTRY_PT(cuStreamGetCtx_v2, _ptsz,
	 (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx),
	 stream_ctx(hStream, pCtx, pGreenCtx, ptds))

static CUresult stream_info(CUstream h, int *prio, unsigned *flags, bool ptds)
{
	struct CUstream_st *s;
	CUresult r = enter_stream(!prio && !flags, h, ptds, &s);

	if (r)
		return r;
	if (prio)
		*prio = s->prio;
	if (flags)
		*flags = s->flags;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY_PT(cuStreamGetPriority, _ptsz, (CUstream hStream, int *priority),
	 stream_info(hStream, priority, NULL, ptds))

ENTRY_PT(cuStreamGetFlags, _ptsz, (CUstream hStream, unsigned int *flags),
	 stream_info(hStream, NULL, flags, ptds))

static CUresult event_create(CUevent *pe, unsigned flags)
{
	const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
			       CU_EVENT_INTERPROCESS;
	struct CUevent_st *e;
	struct CUctx_st *c;
	CUresult r = enter_ctx(!pe || (flags & ~known) ||
			       ((flags & CU_EVENT_INTERPROCESS) &&
				!(flags & CU_EVENT_DISABLE_TIMING)), &c);

	if (r)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	e->magic = EVENT_MAGIC;
	e->flags = flags;
	e->ctx = c;
	e->gen = c->gen;
	*pe = e;
out:
	unlock();
	return r;
}

ENTRY(cuEventCreate, (CUevent *phEvent, unsigned int Flags),
      event_create(phEvent, Flags))

static CUresult event_record(struct CUevent_st *e, CUstream h, bool ptds)
{
	struct CUstream_st *s;
	struct op *op;
	CUresult r = enter(false);

	if (r)
		return r;
	r = event_live(e) ? stream_get(h, ptds, &s) : CUDA_ERROR_INVALID_HANDLE;
	if (!r && s->ctx != e->ctx)
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r)
		goto out;
	op = calloc(1, sizeof(*op));
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->kind = OP_MARK;
	r = enqueue(s, op);
	if (r)
		goto out;
	e->stream = s;
	e->seq = op->seq;
	e->recorded = true;
	e->polled = false;
	/* elapsed time is host time between the records */
	clock_gettime(CLOCK_MONOTONIC, &e->when);
out:
	unlock();
	return r;
}

ENTRY_PT(cuEventRecord, _ptsz, (CUevent hEvent, CUstream hStream),
	 event_record(hEvent, hStream, ptds))

/* Calls fn on e under the lock if e is a live event. */
static CUresult on_event(struct CUevent_st *e,
			 CUresult (*fn)(struct CUevent_st *e))
{
	CUresult r = enter(false);

	if (r)
		return r;
	r = event_live(e) ? fn(e) : CUDA_ERROR_INVALID_HANDLE;
	unlock();
	return r;
}

static CUresult event_query(struct CUevent_st *e)
{
	if (query_fails())
		return CUDA_ERROR_LAUNCH_FAILED;
	if (event_done(e))
		return CUDA_SUCCESS;
	if (!e->polled) {
		e->polled = true;
		return CUDA_ERROR_NOT_READY;
	}
	stream_run(e->stream, e->seq);
	return CUDA_SUCCESS;
}

ENTRY(cuEventQuery, (CUevent hEvent), on_event(hEvent, event_query))

static CUresult event_sync(struct CUevent_st *e)
{
	if (sync_fails()) {
		if (e->recorded)
			stream_discard(e->stream, e->seq);
		return CUDA_ERROR_LAUNCH_FAILED;
	}
	if (e->recorded)
		stream_run(e->stream, e->seq);
	return CUDA_SUCCESS;
}

ENTRY(cuEventSynchronize, (CUevent hEvent), on_event(hEvent, event_sync))

/* A recorded event that is still pending completes on its own later. */
static CUresult event_destroy(struct CUevent_st *e)
{
	e->dead = true;
	return CUDA_SUCCESS;
}

ENTRY_V2(cuEventDestroy, (CUevent hEvent), on_event(hEvent, event_destroy))

static CUresult event_elapsed(float *ms, struct CUevent_st *a,
			      struct CUevent_st *b)
{
	CUresult r = enter(!ms);
	double ns;

	if (r)
		return r;
	if (!event_live(a) || !event_live(b) || !a->recorded ||
	    !b->recorded ||
	    ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)) {
		r = CUDA_ERROR_INVALID_HANDLE;
	} else if (!event_done(a) || !event_done(b)) {
		r = CUDA_ERROR_NOT_READY;
	} else {
		ns = (b->when.tv_sec - a->when.tv_sec) * 1e9 +
		     (b->when.tv_nsec - a->when.tv_nsec);
		*ms = ns / 1e6;
	}
	unlock();
	return r;
}

ENTRY_V2(cuEventElapsedTime,
	 (float *pMilliseconds, CUevent hStart, CUevent hEnd),
	 event_elapsed(pMilliseconds, hStart, hEnd))
