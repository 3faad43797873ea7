/*
 * The CUDA driver, opened with dlopen on the first same-process operation,
 * so that one build runs where there is no GPU and processes that never
 * copy locally never load it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
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
	CUresult (*ctx_push)(CUcontext ctx);
	CUresult (*ctx_pop)(CUcontext *ctx);
	CUresult (*stream_create)(CUstream *stream, unsigned int flags);
	CUresult (*stream_destroy)(CUstream stream);
	CUresult (*stream_sync)(CUstream stream);
	CUresult (*memcpy_async)(CUdeviceptr dst, CUdeviceptr src, size_t n,
				 CUstream stream);
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
	SYM("cuCtxPushCurrent", ctx_push),
	SYM("cuCtxPopCurrent", ctx_pop),
	SYM("cuStreamCreate", stream_create),
	SYM("cuStreamDestroy", stream_destroy),
	SYM("cuStreamSynchronize", stream_sync),
	SYM("cuMemcpyAsync", memcpy_async),
	SYM("cuMemAlloc", mem_alloc),
	SYM("cuMemFree", mem_free),
#undef SYM
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool usable;

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
	hml_info("%s loaded", path);
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
 * threads' copies. They are destroyed when the thread exits.
 */
#define STREAMS 8

struct streams {
	CUcontext ctx[STREAMS];
	CUstream stream[STREAMS];
};

static __thread struct streams streams;
static pthread_key_t streams_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void destroy_streams(void *arg)
{
	struct streams *s = arg;

	for (int i = 0; i < STREAMS; i++)
		if (s->stream[i])
			cu.stream_destroy(s->stream[i]);
}

static void make_key(void)
{
	pthread_key_create(&streams_key, destroy_streams);
}

static CUresult stream_for(CUcontext ctx, CUstream *stream)
{
	struct streams *s = &streams;
	CUresult r;
	int i;

	for (i = 0; i < STREAMS && s->stream[i]; i++)
		if (s->ctx[i] == ctx) {
			*stream = s->stream[i];
			return CUDA_SUCCESS;
		}
	if (i == STREAMS) {
		/* More contexts than slots: reuse the last slot. */
		i = STREAMS - 1;
		cu.stream_destroy(s->stream[i]);
		s->stream[i] = NULL;
	}
	r = cu.stream_create(stream, CU_STREAM_NON_BLOCKING);
	if (r)
		return r;
	pthread_once(&key_once, make_key);
	pthread_setspecific(streams_key, s);
	s->ctx[i] = ctx;
	s->stream[i] = *stream;
	return CUDA_SUCCESS;
}

/* A stream destroyed with its context by a reset of the device: the next
 * copy on it makes a new one. */
static void forget_stream(CUstream stream)
{
	struct streams *s = &streams;
	int i, n;

	for (n = 0; n < STREAMS && s->stream[n]; n++)
		;
	for (i = 0; i < n && s->stream[i] != stream; i++)
		;
	if (i == n)
		return;
	s->ctx[i] = s->ctx[n - 1];
	s->stream[i] = s->stream[n - 1];
	s->ctx[n - 1] = NULL;
	s->stream[n - 1] = NULL;
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

/* Make a context of where's device current, unless one is: *pushed says
 * whether leave() must pop it, so the caller's is as it was. */
static int enter(const struct hml_mem *where, CUcontext *ctx, bool *pushed)
{
	CUcontext cur = NULL;
	CUresult r;

	*ctx = where->ctx;
	*pushed = false;
	if (!*ctx && (r = primary(where->dev, ctx)))
		return failed("cuDevicePrimaryCtxRetain", r);
	r = cu.ctx_get_current(&cur);
	if (r)
		return failed("cuCtxGetCurrent", r);
	if (cur == *ctx)
		return 0;
	r = cu.ctx_push(*ctx);
	if (r && !where->ctx && destroyed(r) &&
	    !(r = reprimary(where->dev, *ctx, ctx)))
		r = cu.ctx_push(*ctx);
	if (r)
		return failed("cuCtxPushCurrent", r);
	*pushed = true;
	return 0;
}

static void leave(bool pushed)
{
	CUcontext popped;
	CUresult r;

	if (pushed && (r = cu.ctx_pop(&popped)))
		failed("cuCtxPopCurrent", r);
}

int hml_cuda_alloc(const struct hml_mem *where, size_t n, void **ptr)
{
	CUdeviceptr p = 0;
	CUcontext ctx;
	bool pushed;
	CUresult r;
	int err;

	err = enter(where, &ctx, &pushed);
	if (!err && (r = cu.mem_alloc(&p, n)))
		err = failed("cuMemAlloc", r);
	leave(pushed);
	*ptr = (void *) (uintptr_t) p;
	return err;
}

void hml_cuda_free(const struct hml_mem *where, void *ptr)
{
	CUcontext ctx;
	bool pushed;
	CUresult r;

	if (!enter(where, &ctx, &pushed) &&
	    (r = cu.mem_free((CUdeviceptr) (uintptr_t) ptr)))
		failed("cuMemFree", r);
	leave(pushed);
}

int hml_copy_begin(struct hml_copy *c, const struct hml_mem *where)
{
	CUstream stream;
	CUcontext ctx;
	CUresult r;

	/* No stream: nothing for end to wait for. */
	c->stream = NULL;
	c->queued = false;
	c->err = enter(where, &ctx, &c->pushed);
	if (c->err)
		return c->err;
	r = stream_for(ctx, &stream);
	if (r)
		return c->err = failed("cuStreamCreate", r);
	c->ctx = ctx;
	c->stream = stream;
	return 0;
}

static CUresult piece(struct hml_copy *c, void *dst, const void *src,
		      size_t n)
{
	return cu.memcpy_async((CUdeviceptr) (uintptr_t) dst,
			       (CUdeviceptr) (uintptr_t) src, n, c->stream);
}

void hml_copy_piece(struct hml_copy *c, void *dst, const void *src, size_t n)
{
	CUstream stream;
	CUresult r;

	if (c->err)
		return;
	r = piece(c, dst, src, n);
	/* A stream of a context reset since: a new one, while nothing is
	 * queued on the old. */
	if (r && destroyed(r) && !c->queued) {
		forget_stream(c->stream);
		c->stream = NULL;
		r = stream_for(c->ctx, &stream);
		if (!r) {
			c->stream = stream;
			r = piece(c, dst, src, n);
		}
	}
	if (r)
		c->err = failed("cuMemcpyAsync", r);
	c->queued |= !r;
}

int hml_copy_end(struct hml_copy *c)
{
	CUresult r;

	/* Nothing is complete before the stream is: device-to-device copies
	 * return before the bytes move, and the pieces queued before one
	 * that failed are still moving. The first error is the one told. */
	if (c->stream && (r = cu.stream_sync(c->stream)) && !c->err)
		c->err = failed("cuStreamSynchronize", r);
	leave(c->pushed);
	return c->err;
}
