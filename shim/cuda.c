/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUDA driver, opened with dlopen on the first same-process operation,
 * so that one build runs where there is no GPU and processes that never
 * copy locally never load it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_config.h"
#include "hml_cuda.h"
#include "hml_log.h"

static struct {
	CUresult (*init)(unsigned int flags);
	CUresult (*error_name)(CUresult r, const char **name);
	CUresult (*pointer_attrs)(unsigned int n, CUpointer_attribute *attrs,
				  void **data, CUdeviceptr ptr);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*primary_retain)(CUcontext *ctx, CUdevice dev);
	CUresult (*primary_release)(CUdevice dev);
	CUresult (*ctx_get_current)(CUcontext *ctx);
	CUresult (*ctx_get_id)(CUcontext ctx, unsigned long long *id);
	CUresult (*ctx_push)(CUcontext ctx);
	CUresult (*ctx_pop)(CUcontext *ctx);
	CUresult (*stream_create)(CUstream *stream, unsigned int flags);
	CUresult (*stream_destroy)(CUstream stream);
	CUresult (*stream_sync)(CUstream stream);
	CUresult (*stream_query)(CUstream stream);
	CUresult (*event_create)(CUevent *event, unsigned int flags);
	CUresult (*event_record)(CUevent event, CUstream stream);
	CUresult (*event_query)(CUevent event);
	CUresult (*event_destroy)(CUevent event);
	CUresult (*memcpy_async)(CUdeviceptr dst, CUdeviceptr src, size_t n,
				 CUstream stream);
	/* optional: NULL before the 13.0 API */
	CUresult (*memcpy_batch)(CUdeviceptr *dsts, CUdeviceptr *srcs,
				 size_t *sizes, size_t count,
				 CUmemcpyAttributes *attrs, size_t *attr_idxs,
				 size_t nattrs, CUstream stream);
	CUresult (*mem_alloc)(CUdeviceptr *ptr, size_t n);
	CUresult (*mem_free)(CUdeviceptr ptr);
} cu;

static const struct hml_cuda_sym symbols[] = {
#define SYM(name, field) HML_CUDA_SYM(cu, name, field)
	SYM("cuInit", init),
	SYM("cuGetErrorName", error_name),
	SYM("cuPointerGetAttributes", pointer_attrs),
	SYM("cuDeviceGet", device_get),
	SYM("cuDevicePrimaryCtxRetain", primary_retain),
	SYM("cuDevicePrimaryCtxRelease", primary_release),
	SYM("cuCtxGetCurrent", ctx_get_current),
	SYM("cuCtxGetId", ctx_get_id),
	SYM("cuCtxPushCurrent", ctx_push),
	SYM("cuCtxPopCurrent", ctx_pop),
	SYM("cuStreamCreate", stream_create),
	SYM("cuStreamDestroy", stream_destroy),
	SYM("cuStreamSynchronize", stream_sync),
	SYM("cuStreamQuery", stream_query),
	SYM("cuEventCreate", event_create),
	SYM("cuEventRecord", event_record),
	SYM("cuEventQuery", event_query),
	SYM("cuEventDestroy", event_destroy),
	SYM("cuMemcpyAsync", memcpy_async),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
#undef SYM
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool usable;
static bool batching;		/* cu.memcpy_batch found, and not refused */

static void load(void)
{
	const char *path = hml_config.cuda_library;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const char *missing;
	CUresult r;

	/* Said at the default level: device memory then goes to the
	 * provider, which cannot copy it. */
	if (!lib) {
		hml_warn("cannot open the CUDA driver %s: %s: device memory "
			 "is not recognised", path, dlerror());
		return;
	}
	missing = hml_cuda_procs(lib, &cu, symbols,
				 sizeof(symbols) / sizeof(symbols[0]));
	if (missing && !strcmp(missing, "cuGetProcAddress_v2")) {
		hml_warn("%s lacks cuGetProcAddress_v2: hmemloop needs a CUDA 12 "
			 "driver or newer, and copies nothing", path);
		return;
	}
	if (missing) {
		hml_warn("%s has no %s: hmemloop copies nothing", path, missing);
		return;
	}
	r = cu.init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		hml_info("no CUDA device: no device memory here");
		return;
	}
	if (r) {
		hml_warn("cuInit: error %d: hmemloop copies nothing", r);
		return;
	}
	usable = true;
	if (hml_config.batch)
		cu.memcpy_batch = hml_cuda_proc(lib, "cuMemcpyBatchAsync",
						13000);
	batching = cu.memcpy_batch;
	hml_info("%s loaded%s", path, batching ? ", copies batched" : "");
}

static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

/* A failure is logged once per call and error, not once per operation. */
static int failed(const char *call, CUresult r)
{
	static struct { const char *call; CUresult r; } seen[32];
	const char *name = "?";
	size_t i;

	pthread_mutex_lock(&failed_lock);
	for (i = 0; i < sizeof(seen) / sizeof(seen[0]) && seen[i].call; i++)
		if (seen[i].call == call && seen[i].r == r)
			break;
	if (i < sizeof(seen) / sizeof(seen[0]) && !seen[i].call) {
		seen[i].call = call;
		seen[i].r = r;
		cu.error_name(r, &name);
		hml_warn("%s: %s: the operation completes with an error", call,
			 name);
	}
	pthread_mutex_unlock(&failed_lock);
	return -FI_EIO;
}

int hml_cuda_classify(const void *ptr, struct hml_mem *m)
{
	CUpointer_attribute attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_CONTEXT,
	};
	unsigned int type = 0, managed = 0;
	CUcontext ctx = NULL;
	int dev = -1;
	void *data[] = { &type, &managed, &dev, &ctx };
	CUresult r;

	pthread_once(&load_once, load);
	*m = (struct hml_mem) { .type = HML_MEM_HOST };
	if (!usable)
		return 0;
	r = cu.pointer_attrs(4, attrs, data, (CUdeviceptr) (uintptr_t) ptr);
	if (r)
		return failed("cuPointerGetAttributes", r);
	/* Managed memory counts as device memory: it may live there. */
	if (type == CU_MEMORYTYPE_DEVICE || managed)
		*m = (struct hml_mem) { HML_MEM_DEVICE, dev, ctx };
	return 0;
}

/*
 * Each thread copies on streams of its own, one per context, which never
 * wait for the application's work (CU_STREAM_NON_BLOCKING) nor for other
 * threads' copies. A stream is counted: its thread holds it until it
 * exits, and each operation in flight on it (hml_ticket) until it is
 * seen done, by whichever thread looks; the last one destroys it.
 *
 * Every MARK_EVERY copies the thread records an event on the stream (a
 * mark), so that the copies before it can be seen landed while later ones
 * still run: a reader then completes them and the application posts
 * more before the stream runs dry. Without a mark, the stream itself is
 * asked, which answers only when all its copies are over.
 *
 * Where the driver has cuMemcpyBatchAsync (API 13.0), the copies of
 * operations completed later wait in their stream's batch, and go to the
 * driver together: when the batch is full, when a copy would touch what
 * one in it writes (the driver runs a batch's copies in any order), and
 * when anyone asks whether a copy in it has landed or waits for it. A
 * batch the driver refuses goes copy by copy, and a copy that fails then
 * is kept, by number, as its own operation's error.
 *
 * A stream is known by its context's ID, not its handle: a reset of the
 * device destroys the primary context's streams but keeps its handle, and
 * the driver crashes on a stream it destroyed (an H200, driver 580). The
 * context, retained again, has a new ID.
 */
#define STREAMS 8
#define MARKS 8
#define MARK_EVERY 16
#define BATCH 16

struct hml_fail {
	struct hml_fail *next;
	uint64_t seq;
	int err;
};

struct hml_stream {
	CUstream stream;
	CUcontext ctx;
	unsigned long long id;
	int refs;			/* atomic */
	uint64_t posted;		/* atomic: copies queued, by number */
	uint64_t done;			/* atomic: those known to have landed */
	CUevent ev[MARKS];		/* made by the thread, as needed */
	uint64_t mark[MARKS];		/* atomic: the copy ev follows, or 0 */
	pthread_mutex_t lock;		/* the batch, the marks, the failures */
	uint64_t sent;			/* atomic: copies wholly queued */
	int nb;				/* atomic: copies in the batch */
	CUdeviceptr dst[BATCH], src[BATCH];
	size_t len[BATCH];
	uint64_t seq[BATCH];		/* whose pieces they are */
	struct hml_fail *fails;		/* copies failed, until asked */
	int nfails;			/* atomic */
	uint64_t lost;			/* atomic: copies to this one failed
					 * where no memory was left to tell
					 * which */
};

struct streams {
	unsigned long long id[STREAMS];	/* 0: a free slot */
	struct hml_stream *s[STREAMS];
};

static __thread struct streams streams;
static pthread_key_t streams_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Is the stream's context what it was? Its stream is not, otherwise. */
static bool live(const struct hml_stream *s)
{
	unsigned long long id;

	return !cu.ctx_get_id(s->ctx, &id) && id == s->id;
}

static void stream_put(struct hml_stream *s)
{
	struct hml_fail *f;

	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	while ((f = s->fails)) {
		s->fails = f->next;
		free(f);
	}
	pthread_mutex_destroy(&s->lock);
	/* Work still queued finishes; the driver frees the stream then. */
	if (live(s)) {
		for (int i = 0; i < MARKS; i++)
			if (s->ev[i])
				cu.event_destroy(s->ev[i]);
		cu.stream_destroy(s->stream);
	}
	free(s);
}

static void destroy_streams(void *arg)
{
	struct streams *t = arg;

	for (int i = 0; i < STREAMS && t->id[i]; i++)
		stream_put(t->s[i]);
}

static void make_key(void)
{
	pthread_key_create(&streams_key, destroy_streams);
}

/* This thread's stream in the current context ctx, whose ID is id. */
static CUresult stream_for(CUcontext ctx, unsigned long long id,
			   struct hml_stream **stream)
{
	struct streams *t = &streams;
	struct hml_stream *s;
	CUresult r;
	int i;

	for (i = 0; i < STREAMS && t->id[i]; i++)
		if (t->id[i] == id) {
			*stream = t->s[i];
			return CUDA_SUCCESS;
		}
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = cu.stream_create(&s->stream, CU_STREAM_NON_BLOCKING);
	if (r) {
		free(s);
		return r;
	}
	if (i == STREAMS) {
		/* More contexts than slots: the oldest goes. */
		stream_put(t->s[0]);
		memmove(&t->id[0], &t->id[1], sizeof(t->id[0]) * (STREAMS - 1));
		memmove(&t->s[0], &t->s[1], sizeof(t->s[0]) * (STREAMS - 1));
		i = STREAMS - 1;
	}
	pthread_once(&key_once, make_key);
	pthread_setspecific(streams_key, t);
	pthread_mutex_init(&s->lock, NULL);
	s->ctx = ctx;
	s->id = id;
	s->refs = 1;
	t->id[i] = id;
	t->s[i] = s;
	*stream = s;
	return CUDA_SUCCESS;
}

/* What the driver answers for a handle that a reset of the device
 * (cuDevicePrimaryCtxReset, cudaDeviceReset) destroyed. */
static bool destroyed(CUresult r)
{
	return r == CUDA_ERROR_INVALID_HANDLE ||
	       r == CUDA_ERROR_INVALID_CONTEXT ||
	       r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* VMM memory has no context of its own: use its device's primary context,
 * retained once and kept, since the process has memory on that device. */
static CUcontext primaries[64];

static CUresult primary(int ordinal, CUcontext *ctx)
{
	CUdevice dev;
	CUresult r;

	if (ordinal < 0 || ordinal >= 64)
		return CUDA_ERROR_INVALID_DEVICE;
	*ctx = __atomic_load_n(&primaries[ordinal], __ATOMIC_ACQUIRE);
	if (*ctx)
		return CUDA_SUCCESS;
	r = cu.device_get(&dev, ordinal);
	if (!r)
		r = cu.primary_retain(ctx, dev);
	if (!r)
		__atomic_store_n(&primaries[ordinal], *ctx, __ATOMIC_RELEASE);
	return r;
}

/* The primary context kept was reset: give back its reference, which the
 * reset kept, and retain it anew (one thread gives it back). */
static CUresult reprimary(int ordinal, CUcontext dead, CUcontext *ctx)
{
	CUdevice dev;

	if (__atomic_compare_exchange_n(&primaries[ordinal], &dead, NULL,
					false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE) &&
	    !cu.device_get(&dev, ordinal))
		cu.primary_release(dev);
	return primary(ordinal, ctx);
}

/* The child of a fork() is a new process: the parent's streams and
 * retained contexts are not its own, and the lock may have been held by
 * a thread it does not have. */
static void forked(void)
{
	memset(&streams, 0, sizeof(streams));
	memset(primaries, 0, sizeof(primaries));
	pthread_mutex_init(&failed_lock, NULL);
}

__attribute__((constructor)) static void cuda_init(void)
{
	pthread_atfork(NULL, NULL, forked);
}

static void leave(bool pushed)
{
	CUcontext popped;
	CUresult r;

	if (pushed && (r = cu.ctx_pop(&popped)))
		failed("cuCtxPopCurrent", r);
}

static CUresult make_current(CUcontext ctx, bool *pushed)
{
	CUcontext cur = NULL;
	CUresult r;

	*pushed = false;
	r = cu.ctx_get_current(&cur);
	if (r || cur == ctx)
		return r;
	r = cu.ctx_push(ctx);
	*pushed = !r;
	return r;
}

/*
 * Make a context of where's device current, unless one is, and tell its
 * ID: *pushed says whether leave() must pop it, so the caller's is as it
 * was. The primary context kept for VMM memory may have been reset since:
 * its handle still pushes, but the driver takes it back to life only when
 * it is retained again.
 */
static int enter(const struct hml_mem *where, CUcontext *ctx, bool *pushed,
		 unsigned long long *id)
{
	CUresult r;

	*ctx = where->ctx;
	*pushed = false;
	if (!*ctx && (r = primary(where->dev, ctx)))
		return failed("cuDevicePrimaryCtxRetain", r);
	r = make_current(*ctx, pushed);
	if (r)
		return failed("cuCtxPushCurrent", r);
	r = cu.ctx_get_id(NULL, id);
	if (r && destroyed(r) && !where->ctx) {
		leave(*pushed);
		r = reprimary(where->dev, *ctx, ctx);
		if (!r && !(r = make_current(*ctx, pushed)))
			r = cu.ctx_get_id(NULL, id);
	}
	if (r) {
		leave(*pushed);
		*pushed = false;
		return failed("cuCtxGetId", r);
	}
	return 0;
}

int hml_cuda_alloc(const struct hml_mem *where, size_t n, void **ptr)
{
	unsigned long long id;
	CUdeviceptr p = 0;
	CUcontext ctx;
	bool pushed;
	CUresult r;
	int err;

	err = enter(where, &ctx, &pushed, &id);
	if (!err && (r = cu.mem_alloc(&p, n)))
		err = failed("cuMemAlloc", r);
	leave(pushed);
	*ptr = (void *) (uintptr_t) p;
	return err;
}

void hml_cuda_free(const struct hml_mem *where, void *ptr)
{
	unsigned long long id;
	CUcontext ctx;
	bool pushed;
	CUresult r;

	if (!enter(where, &ctx, &pushed, &id) &&
	    (r = cu.mem_free((CUdeviceptr) (uintptr_t) ptr)))
		failed("cuMemFree", r);
	leave(pushed);
}

int hml_copy_begin(struct hml_copy *c, const struct hml_mem *where,
		   bool later)
{
	unsigned long long id;
	CUcontext ctx;
	CUresult r;

	/* No stream: nothing for end to wait for. */
	c->s = NULL;
	c->batch = later && __atomic_load_n(&batching, __ATOMIC_RELAXED);
	c->err = enter(where, &ctx, &c->pushed, &id);
	if (c->err)
		return c->err;
	r = stream_for(ctx, id, &c->s);
	if (r) {
		c->s = NULL;
		return c->err = failed("cuStreamCreate", r);
	}
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
	int i = seq / MARK_EVERY % MARKS;
	uint64_t old = __atomic_load_n(&s->mark[i], __ATOMIC_ACQUIRE);

	if (old >= seq || old > __atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
		return;
	if (!s->ev[i] && cu.event_create(&s->ev[i], CU_EVENT_DISABLE_TIMING))
		return;
	/* A reader that asks the event for the old mark meanwhile learns at
	 * worst that the new one has landed, and so has the old. */
	if (!cu.event_record(s->ev[i], s->stream))
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

/* The driver refused s's batch: each copy goes alone, so that a failure
 * is its own operation's. Where none fails, the batch was refused for
 * itself: batches stop. */
static void refused(struct hml_stream *s, CUresult r)
{
	const char *name = "?";
	bool all = true;

	for (int i = 0; i < s->nb; i++) {
		CUresult r1 = cu.memcpy_async(s->dst[i], s->src[i], s->len[i],
					      s->stream);

		if (r1)
			fail(s, s->seq[i], failed("cuMemcpyAsync", r1));
		all = all && !r1;
	}
	if (!all)
		return;
	cu.error_name(r, &name);
	hml_warn("cuMemcpyBatchAsync: %s, its copies alone succeeded: copies "
		 "go one by one", name);
	__atomic_store_n(&batching, false, __ATOMIC_RELAXED);
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
	bool pushed = false;
	CUresult r;

	if (!s->nb)
		goto out;
	r = make_current(s->ctx, &pushed);
	if (!r)
		r = cu.memcpy_batch(s->dst, s->src, s->len, s->nb, &attr,
				    &first, 1, s->stream);
	if (r)
		refused(s, r);
	if (upto)
		mark(s, upto);
	leave(pushed);
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

/* Only this thread posts on s: its next copy is posted + 1. */
static void add(struct hml_stream *s, CUdeviceptr dst, CUdeviceptr src,
		size_t n)
{
	int i;

	pthread_mutex_lock(&s->lock);
	if (s->nb == BATCH || clash(s, dst, src, n))
		send_locked(s);
	i = s->nb;
	s->dst[i] = dst;
	s->src[i] = src;
	s->len[i] = n;
	s->seq[i] = __atomic_load_n(&s->posted, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&s->nb, i + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
}

void hml_copy_piece(struct hml_copy *c, void *dst, const void *src, size_t n)
{
	CUdeviceptr d = (CUdeviceptr) (uintptr_t) dst;
	CUdeviceptr s = (CUdeviceptr) (uintptr_t) src;
	CUresult r;

	if (c->err)
		return;
	if (c->batch) {
		add(c->s, d, s, n);
		return;
	}
	/* After the batch: the stream's order is the copies' order. */
	if (__atomic_load_n(&c->s->nb, __ATOMIC_ACQUIRE))
		send(c->s);
	r = cu.memcpy_async(d, s, n, c->s->stream);
	if (r)
		c->err = failed("cuMemcpyAsync", r);
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

	if (!live(s))
		return failed("cuCtxGetId", CUDA_ERROR_CONTEXT_IS_DESTROYED);
	if (__atomic_load_n(&s->nb, __ATOMIC_ACQUIRE))
		send(s);
	r = cu.stream_sync(s->stream);
	if (r)
		return failed("cuStreamSynchronize", r);
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
	leave(c->pushed);
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
	leave(c->pushed);
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

	for (int i = 0; i < MARKS; i++) {
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
		goto over;
	if (!live(s))
		return failed("cuCtxGetId", CUDA_ERROR_CONTEXT_IS_DESTROYED);
	if (__atomic_load_n(&s->sent, __ATOMIC_ACQUIRE) < t->seq)
		send(s);
	upto = __atomic_load_n(&s->sent, __ATOMIC_ACQUIRE);
	i = mark_after(s, t->seq, &upto);
	r = i < 0 ? cu.stream_query(s->stream) : cu.event_query(s->ev[i]);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	if (r)
		return failed(i < 0 ? "cuStreamQuery" : "cuEventQuery", r);
	landed(s, upto);
over:
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
		stream_put(t->s);
	t->s = NULL;
}

int hml_ticket_land(struct hml_ticket *t)
{
	int err = hml_ticket_wait(t);

	hml_ticket_put(t);
	return err;
}
