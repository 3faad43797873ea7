/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: contexts.
 *
 * Each thread has its own context stack and starts with none, as with the
 * real driver.  A context costs its device CTX_COST bytes while it lives,
 * so a context that appears on the wrong GPU shows in cuMemGetInfo.
 */
#include "double.h"

#include <stdlib.h>
#include <string.h>

static __thread struct CUctx_st *stack[CTX_STACK_MAX];
static __thread int depth;

struct CUctx_st *ctx_top(void)
{
	return depth ? stack[depth - 1] : NULL;
}

/* The calling thread's context, if it can be used.  Lock held. */
CUresult ctx_current(struct CUctx_st **ctx)
{
	struct CUctx_st *c = ctx_top();

	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (c->dead)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*ctx = c;
	return CUDA_SUCCESS;
}

CUresult enter_ctx(bool invalid, struct CUctx_st **ctx)
{
	CUresult r = enter(invalid);

	if (!r && (r = ctx_current(ctx)))
		unlock();
	return r;
}

/* A context handle from the application.  Lock held. */
bool ctx_live(struct CUctx_st *c)
{
	return c && c->magic == CTX_MAGIC && !c->dead;
}

static bool flags_ok(unsigned flags)
{
	unsigned sched = flags & CU_CTX_SCHED_MASK;

	if (flags & ~CU_CTX_FLAGS_MASK)
		return false;
	return sched == CU_CTX_SCHED_AUTO || sched == CU_CTX_SCHED_SPIN ||
	       sched == CU_CTX_SCHED_YIELD ||
	       sched == CU_CTX_SCHED_BLOCKING_SYNC;
}

static struct CUctx_st *ctx_new(int dev, unsigned flags, bool primary)
{
	struct CUctx_st *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = CTX_MAGIC;
	c->dev = dev;
	c->flags = flags;
	c->primary = primary;
	c->dead = true;
	stream_init(&c->legacy, c, 0);
	c->legacy.legacy = true;
	return c;
}

/* Bring a context to life: that takes device memory, as on a GPU. */
static CUresult ctx_start(struct CUctx_st *c)
{
	struct device *d = &dbl.dev[c->dev];

	if (d->used + CTX_COST > d->total)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->used += CTX_COST;
	c->dead = false;
	c->id = ++dbl.ctx_ids;
	return CUDA_SUCCESS;
}

static void peer_forget(struct CUctx_st *c, struct CUctx_st *peer)
{
	size_t i;

	for (i = 0; i < c->npeers; i++) {
		if (c->peers[i] == peer) {
			c->peers[i] = c->peers[--c->npeers];
			return;
		}
	}
}

/*
 * Finish the context's work, then free everything it owns.  Its streams
 * and events go stale with the generation count.
 */
static void ctx_stop(struct CUctx_st *c)
{
	struct CUctx_st *o;

	ctx_drain(c);
	mem_drop_ctx(c);
	c->streams = NULL;
	free(c->peers);
	c->peers = NULL;
	c->npeers = 0;
	for (o = dbl.ctxs; o; o = o->next)
		peer_forget(o, c);
	dbl.dev[c->dev].used -= CTX_COST;
	c->dead = true;
	c->gen++;
}

CUresult ctx_init_primary(int dev)
{
	struct CUctx_st *c = ctx_new(dev, 0, true);

	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->next = dbl.ctxs;
	dbl.ctxs = c;
	dbl.dev[dev].primary = c;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	struct CUctx_st *c;
	CUresult r;

	r = dev_check(!pctx || !flags_ok(flags), dev);
	if (r)
		return r;
	if (depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c = ctx_new(dev, flags, false);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	r = ctx_start(c);
	if (!r) {
		c->next = dbl.ctxs;
		dbl.ctxs = c;
	}
	unlock();
	if (r) {
		free(c);
		return r;
	}
	stack[depth++] = c;
	*pctx = c;
	return CUDA_SUCCESS;
}

ENTRY_V2(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev),
	 ctx_create(pctx, flags, dev))

static CUresult ctx_create_v3(CUcontext *pctx, CUexecAffinityParam *params,
			      int n, unsigned flags, CUdevice dev)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (n < 0 || (n > 0 && !params))
		return CUDA_ERROR_INVALID_VALUE;
	if (n > 0)
		return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
	return ctx_create(pctx, flags, dev);
}

ENTRY(cuCtxCreate_v3,
      (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
       unsigned int flags, CUdevice dev),
      ctx_create_v3(pctx, paramsArray, numParams, flags, dev))

static CUresult ctx_create_v4(CUcontext *pctx, CUctxCreateParams *params,
			      unsigned flags, CUdevice dev)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (params && params->cigParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (params)
		return ctx_create_v3(pctx, params->execAffinityParams,
				     params->numExecAffinityParams, flags, dev);
	return ctx_create(pctx, flags, dev);
}

ENTRY(cuCtxCreate_v4,
      (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
       CUdevice dev),
      ctx_create_v4(pctx, ctxCreateParams, flags, dev))

static CUresult ctx_destroy(struct CUctx_st *c)
{
	CUresult r = enter(false);

	if (r)
		return r;
	/* primary contexts go through cuDevicePrimaryCtxRelease/Reset */
	if (!ctx_live(c) || c->primary)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else
		ctx_stop(c);
	unlock();
	if (!r && ctx_top() == c)
		depth--;
	return r;
}

ENTRY_V2(cuCtxDestroy, (CUcontext ctx), ctx_destroy(ctx))

static CUresult ctx_get_current(CUcontext *pctx)
{
	CUresult r = arg_check(!pctx);

	if (!r)
		*pctx = ctx_top();
	return r;
}

ENTRY(cuCtxGetCurrent, (CUcontext *pctx), ctx_get_current(pctx))

/* Replace the top of the stack; NULL pops it. */
static CUresult ctx_set_current(struct CUctx_st *c)
{
	bool live;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!c) {
		if (depth)
			depth--;
		return CUDA_SUCCESS;
	}
	lock();
	live = ctx_live(c);
	unlock();
	if (!live)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth)
		stack[depth - 1] = c;
	else
		stack[depth++] = c;
	return CUDA_SUCCESS;
}

ENTRY(cuCtxSetCurrent, (CUcontext ctx), ctx_set_current(ctx))

static CUresult ctx_push(struct CUctx_st *c)
{
	bool live;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* A primary context that a reset made inactive is still a handle the
	 * driver takes (seen on an H200, driver 580): the calls made in it
	 * then fail with CONTEXT_IS_DESTROYED, until it is retained again. */
	lock();
	live = ctx_live(c) ||
	       (c && c->magic == CTX_MAGIC && c->primary);
	unlock();
	if (!live)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

ENTRY_V2(cuCtxPushCurrent, (CUcontext ctx), ctx_push(ctx))

static CUresult ctx_pop(CUcontext *pctx)
{
	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth--;
	if (pctx)
		*pctx = stack[depth];
	return CUDA_SUCCESS;
}

ENTRY_V2(cuCtxPopCurrent, (CUcontext *pctx), ctx_pop(pctx))

/* enter_ctx() for @c, or for the current context where @c is NULL. */
static CUresult enter_ctx_or(bool invalid, struct CUctx_st *c,
			     struct CUctx_st **out)
{
	CUresult r;

	if (!c)
		return enter_ctx(invalid, out);
	r = enter(invalid);
	if (r)
		return r;
	if (!ctx_live(c)) {
		unlock();
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	*out = c;
	return CUDA_SUCCESS;
}

static CUresult ctx_device(CUdevice *dev, struct CUctx_st *c)
{
	CUresult r = enter_ctx_or(!dev, c, &c);

	if (r)
		return r;
	*dev = c->dev;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY(cuCtxGetDevice, (CUdevice *device), ctx_device(device, NULL))

ENTRY(cuCtxGetDevice_v2, (CUdevice *device, CUcontext ctx),
      ctx_device(device, ctx))

/* A context's ID, which a reset primary context no longer has: its handle
 * is still known, so CONTEXT_IS_DESTROYED (as on an H200). */
static CUresult ctx_id(struct CUctx_st *c, unsigned long long *id)
{
	CUresult r = enter(!id);

	if (r)
		return r;
	if (!c)
		r = ctx_current(&c);
	else if (c->magic != CTX_MAGIC)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (c->dead)
		r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (!r)
		*id = c->id;
	unlock();
	return r;
}

ENTRY(cuCtxGetId, (CUcontext ctx, unsigned long long *ctxId),
      ctx_id(ctx, ctxId))

static CUresult ctx_synchronize(struct CUctx_st *c)
{
	CUresult r = enter_ctx_or(false, c, &c);

	if (r)
		return r;
	r = ctx_sync(c);
	unlock();
	return r;
}

ENTRY(cuCtxSynchronize, (void), ctx_synchronize(NULL))

ENTRY(cuCtxSynchronize_v2, (CUcontext ctx), ctx_synchronize(ctx))

static CUresult peer_access(struct CUctx_st *peer, unsigned flags, bool on)
{
	struct CUctx_st *c, **v;
	CUresult r = enter_ctx(flags, &c);
	size_t i;

	if (r)
		return r;
	if (!ctx_live(peer)) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	if (peer->dev == c->dev) {
		r = CUDA_ERROR_INVALID_DEVICE;
		goto out;
	}
	for (i = 0; i < c->npeers && c->peers[i] != peer; i++)
		;
	if (!on) {
		if (i == c->npeers)
			r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
		else
			peer_forget(c, peer);
		goto out;
	}
	if (i < c->npeers) {
		r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
		goto out;
	}
	v = realloc(c->peers, (c->npeers + 1) * sizeof(*v));
	if (!v) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	v[c->npeers++] = peer;
	c->peers = v;
out:
	unlock();
	return r;
}

ENTRY(cuCtxEnablePeerAccess, (CUcontext peerContext, unsigned int Flags),
      peer_access(peerContext, Flags, true))

ENTRY(cuCtxDisablePeerAccess, (CUcontext peerContext),
      peer_access(peerContext, 0, false))

static CUresult ctx_api_version(struct CUctx_st *c, unsigned *version)
{
	CUresult r = enter_ctx_or(!version, c, &c);

	if (r)
		return r;
	unlock();
	*version = 3020;
	return CUDA_SUCCESS;
}

ENTRY(cuCtxGetApiVersion, (CUcontext ctx, unsigned int *version),
      ctx_api_version(ctx, version))

static CUresult ctx_get_flags(unsigned *flags)
{
	struct CUctx_st *c;
	CUresult r = enter_ctx(!flags, &c);

	if (r)
		return r;
	*flags = c->flags;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY(cuCtxGetFlags, (unsigned int *flags), ctx_get_flags(flags))

static CUresult ctx_set_flags(unsigned flags)
{
	struct CUctx_st *c;
	CUresult r = enter_ctx(!flags_ok(flags), &c);

	if (r)
		return r;
	c->flags = flags;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY(cuCtxSetFlags, (unsigned int flags), ctx_set_flags(flags))

static CUresult ctx_priority_range(int *least, int *greatest)
{
	struct CUctx_st *c;
	CUresult r = enter_ctx(false, &c);

	if (r)
		return r;
	unlock();
	/* what a Hopper reports; cuStreamCreateWithPriority clamps to it */
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return CUDA_SUCCESS;
}

ENTRY(cuCtxGetStreamPriorityRange, (int *leastPriority, int *greatestPriority),
      ctx_priority_range(leastPriority, greatestPriority))

/* The primary context is created on the first retain, not before. */
static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
	struct device *d;
	CUresult r = dev_check(!pctx, dev);

	if (r)
		return r;
	d = &dbl.dev[dev];
	lock();
	if (d->primary->dead)
		r = ctx_start(d->primary);
	if (!r) {
		d->primary_refs++;
		*pctx = d->primary;
	}
	unlock();
	return r;
}

ENTRY(cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev),
      primary_retain(pctx, dev))

static CUresult primary_release(CUdevice dev)
{
	struct device *d;
	CUresult r = dev_check(false, dev);

	if (r)
		return r;
	d = &dbl.dev[dev];
	lock();
	if (!d->primary_refs)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (!--d->primary_refs && !d->primary->dead)
		ctx_stop(d->primary);
	unlock();
	return r;
}

ENTRY_V2(cuDevicePrimaryCtxRelease, (CUdevice dev), primary_release(dev))

/* Reset destroys the context but keeps the references: see cuda.h. */
static CUresult primary_reset(CUdevice dev)
{
	CUresult r = dev_check(false, dev);

	if (r)
		return r;
	lock();
	if (!dbl.dev[dev].primary->dead)
		ctx_stop(dbl.dev[dev].primary);
	unlock();
	return CUDA_SUCCESS;
}

ENTRY_V2(cuDevicePrimaryCtxReset, (CUdevice dev), primary_reset(dev))

static CUresult primary_state(CUdevice dev, unsigned *flags, int *active)
{
	CUresult r = dev_check(!flags || !active, dev);

	if (r)
		return r;
	lock();
	*flags = dbl.dev[dev].primary->flags;
	*active = !dbl.dev[dev].primary->dead;
	unlock();
	return CUDA_SUCCESS;
}

ENTRY(cuDevicePrimaryCtxGetState,
      (CUdevice dev, unsigned int *flags, int *active),
      primary_state(dev, flags, active))

/* The old entry point refused while the context was active. */
static CUresult primary_set_flags(CUdevice dev, unsigned flags, bool v1)
{
	struct CUctx_st *p;
	CUresult r = CUDA_SUCCESS;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev_ok(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!flags_ok(flags))
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	p = dbl.dev[dev].primary;
	if (v1 && !p->dead)
		r = CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
	else
		p->flags = flags;
	unlock();
	return r;
}

ENTRY(cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned int flags),
      primary_set_flags(dev, flags, true))

ENTRY(cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned int flags),
      primary_set_flags(dev, flags, false))
