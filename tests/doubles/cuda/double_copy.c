/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: copies and memsets.
 *
 * Every copy is queued on a stream.  Whether the call then waits for it
 * follows "API synchronization behavior" in the driver documentation;
 * work with a device destination is usually left queued, so code that
 * reads it back without synchronising sees the old bytes.
 */
#include "double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M(kind)		(1u << (kind))
#define ANY		(M(MEM_HOST) | M(MEM_PINNED) | M(MEM_DEVICE) | M(MEM_MANAGED))
#define DEVICE_SIDE	(M(MEM_PINNED) | M(MEM_DEVICE) | M(MEM_MANAGED))
#define HOST_SIDE	(M(MEM_HOST) | M(MEM_PINNED) | M(MEM_MANAGED))

struct side {
	enum mem kind;
	bool sync_memops;
};

struct xfer {
	uintptr_t dst, src;
	size_t len;
	CUstream stream;	/* NULL for the synchronous calls */
	bool ptds;		/* NULL stream is the per-thread stream */
	bool async;
	unsigned dst_ok, src_ok;	/* what the entry point accepts */
	struct CUctx_st *peer[2];	/* cuMemcpyPeer: dst and src contexts */
	bool batched;		/* one of a batch, whose fault is the batch's */
};

/* A copy that fault injection failed in a batch is bad: queued again
 * alone, it fails again (once), as a copy the driver refuses would. */
static struct {
	uintptr_t dst, src;
	size_t len;
	bool set;
} bad;

/* Is x the bad copy? Under the lock. */
static bool bad_again(const struct xfer *x)
{
	if (!bad.set || bad.dst != x->dst || bad.src != x->src ||
	    bad.len != x->len)
		return false;
	bad.set = false;
	return true;
}

/* What a call does around queueing the copy. */
struct plan {
	bool drain_first;	/* synchronise the stream before */
	bool stage;		/* snapshot a pageable source now */
	bool wait;		/* complete the copy before returning */
};

static bool device_kind(enum mem m)
{
	return m == MEM_DEVICE || m == MEM_MANAGED;
}

static struct plan plan_copy(struct side d, struct side s, bool async,
			     bool sync_memops)
{
	bool to_dev = device_kind(d.kind), from_dev = device_kind(s.kind);
	struct plan p = { false, false, false };

	p.stage = to_dev && s.kind == MEM_HOST;
	if (async) {
		/* host to host, and device to pageable memory, complete */
		p.wait = (!to_dev && !from_dev) || d.kind == MEM_HOST;
		return p;
	}
	if (d.kind == MEM_MANAGED || s.kind == MEM_MANAGED)
		p.wait = true;		/* unified memory: fully synchronous */
	else if (!to_dev)
		p.wait = true;		/* to host memory: done on return */
	else if (s.kind == MEM_HOST)
		p.drain_first = true;	/* staged: the DMA is left pending */
	else if (s.kind == MEM_PINNED)
		p.wait = true;
	/* device to device: no host-side synchronisation */
	if (sync_memops)
		p.wait = true;
	return p;
}

static void set_key(uint64_t key[2], uint64_t lo, size_t len)
{
	key[0] = lo;
	key[1] = lo + len;
}

/*
 * Queue the copy, one op per piece that is contiguous in the memfd on
 * both sides.  All ops exist before any is queued: failure moves nothing.
 */
static CUresult queue_copy(struct CUstream_st *st, const struct xfer *x,
			   bool stage, bool from_sync, uint64_t *last)
{
	struct op *first = NULL, **link = &first, *op;
	size_t off, k;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

	for (off = 0; off < x->len; off += k) {
		uint64_t dkey, skey;
		char *dp, *sp;

		k = mem_piece(x->dst + off, x->len - off, &dp, &dkey);
		k = mem_piece(x->src + off, k, &sp, &skey);
		op = calloc(1, sizeof(*op));
		if (!op)
			goto fail;
		*link = op;
		link = &op->next;
		op->kind = OP_COPY;
		op->from_sync = from_sync;
		op->dst = dp;
		op->src = sp;
		op->len = k;
		set_key(op->key[0], dkey, k);
		if (!stage) {
			set_key(op->key[1], skey, k);
			continue;
		}
		op->snap = malloc(k);
		if (!op->snap)
			goto fail;
		memcpy(op->snap, sp, k);
		op->src = op->snap;
	}
	r = join(st);
	if (r)
		goto fail;
	while ((op = first)) {
		first = op->next;
		push(st, op);
		*last = op->seq;
	}
	return CUDA_SUCCESS;
fail:
	free_ops(first);
	return r;
}

static CUresult side_of(uintptr_t addr, size_t len, bool write, unsigned ok,
			struct side *sd)
{
	CUresult r = mem_range(addr, len, write, &sd->kind, &sd->sync_memops);

	if (!r && !(ok & M(sd->kind)))
		r = CUDA_ERROR_INVALID_VALUE;
	return r;
}

/* cuMemcpyPeer is serialised with all pending work of the contexts. */
static CUresult serialise(struct CUstream_st *st, struct CUctx_st *const *c,
			  int n)
{
	struct CUstream_st *s;
	struct op *op;
	CUresult r;
	int i;

	for (i = 0; i < n; i++) {
		for (s = dbl.busy; s; s = s->busy_next) {
			if (s == st || s->ctx != c[i])
				continue;
			op = calloc(1, sizeof(*op));
			if (!op)
				return CUDA_ERROR_OUT_OF_MEMORY;
			op->kind = OP_WAIT;
			op->wait = s;
			op->wait_seq = s->tail->seq;
			r = enqueue(st, op);
			if (r)
				return r;
		}
	}
	return CUDA_SUCCESS;
}

static CUresult copy(const struct xfer *x)
{
	struct CUctx_st *c, *ctxs[3];
	struct CUstream_st *st;
	struct side d, s;
	struct plan p;
	uint64_t last = 0;
	CUresult r = enter_ctx(false, &c);

	if (r)
		return r;
	if (x->peer[0] && (!ctx_live(x->peer[0]) || !ctx_live(x->peer[1])))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r)
		r = stream_get(x->stream, x->ptds, &st);
	if (r)
		goto out;
	if (x->len) {
		r = side_of(x->dst, x->len, true, x->dst_ok, &d);
		if (!r)
			r = side_of(x->src, x->len, false, x->src_ok, &s);
		if (r)
			goto out;
	}
	/* fault injection: the copy fails and moves no byte */
	if (!x->batched && (copy_fails() || bad_again(x))) {
		r = CUDA_ERROR_ILLEGAL_ADDRESS;
		goto out;
	}
	if (!x->len)
		goto out;
	p = plan_copy(d, s, x->async, !x->async &&
		      (d.sync_memops || s.sync_memops ||
		       (c->flags & CU_CTX_SYNC_MEMOPS)));
	if (p.drain_first)
		r = stream_drain(st);
	if (!r && x->peer[0] && !x->async) {
		ctxs[0] = c;
		ctxs[1] = x->peer[0];
		ctxs[2] = x->peer[1];
		r = serialise(st, ctxs, 3);
	}
	if (!r)
		r = queue_copy(st, x, p.stage, !x->async, &last);
	if (!r && p.wait)
		stream_run(st, last);
out:
	unlock();
	return r;
}

static CUresult copy_sync(CUdeviceptr dst, CUdeviceptr src, size_t len,
			  bool ptds, unsigned dst_ok, unsigned src_ok)
{
	struct xfer x = {
		.dst = dst, .src = src, .len = len, .ptds = ptds,
		.dst_ok = dst_ok, .src_ok = src_ok,
	};

	return copy(&x);
}

static CUresult copy_async(CUdeviceptr dst, CUdeviceptr src, size_t len,
			   CUstream h, bool ptds, unsigned dst_ok,
			   unsigned src_ok)
{
	struct xfer x = {
		.dst = dst, .src = src, .len = len, .stream = h, .ptds = ptds,
		.async = true, .dst_ok = dst_ok, .src_ok = src_ok,
	};

	return copy(&x);
}

/* A copy's entry points: synchronous (sync, sync_ptds) and on a stream
 * (async, async_ptsz), from a src_t where src_ok to a dst_t where dst_ok. */
#define COPY(sync, async, dst_t, dst_ok, src_t, src_ok)			\
	ENTRY_PT(sync, _ptds, (dst_t dst, src_t src, size_t ByteCount),	\
		 copy_sync((uintptr_t)dst, (uintptr_t)src, ByteCount,	\
			   ptds, dst_ok, src_ok))			\
	ENTRY_PT(async, _ptsz,						\
		 (dst_t dst, src_t src, size_t ByteCount, CUstream hStream), \
		 copy_async((uintptr_t)dst, (uintptr_t)src, ByteCount,	\
			    hStream, ptds, dst_ok, src_ok))

COPY(cuMemcpy, cuMemcpyAsync, CUdeviceptr, ANY, CUdeviceptr, ANY)
COPY(cuMemcpyHtoD_v2, cuMemcpyHtoDAsync_v2,
     CUdeviceptr, DEVICE_SIDE, const void *, HOST_SIDE)
COPY(cuMemcpyDtoH_v2, cuMemcpyDtoHAsync_v2,
     void *, HOST_SIDE, CUdeviceptr, DEVICE_SIDE)
COPY(cuMemcpyDtoD_v2, cuMemcpyDtoDAsync_v2,
     CUdeviceptr, DEVICE_SIDE, CUdeviceptr, DEVICE_SIDE)

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
			  CUcontext src_ctx, size_t len, CUstream h,
			  bool async, bool ptds)
{
	struct xfer x = {
		.dst = dst, .src = src, .len = len, .stream = h, .ptds = ptds,
		.async = async, .dst_ok = DEVICE_SIDE, .src_ok = DEVICE_SIDE,
		.peer = { dst_ctx, src_ctx },
	};

	if (!dst_ctx || !src_ctx)
		return ready() ? CUDA_ERROR_INVALID_CONTEXT :
				 CUDA_ERROR_NOT_INITIALIZED;
	return copy(&x);
}

ENTRY_PT(cuMemcpyPeer, _ptds,
	 (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
	  CUcontext srcContext, size_t ByteCount),
	 copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
		   NULL, false, ptds))

ENTRY_PT(cuMemcpyPeerAsync, _ptsz,
	 (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
	  CUcontext srcContext, size_t ByteCount, CUstream hStream),
	 copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
		   hStream, true, ptds))

/*
 * The copies of a batch, or of a launch of hmemloop's copy kernel, are
 * checked whole before any of them is queued. A batch fails whole. A
 * kernel that touches memory outside the device's allocations and pinned
 * host memory, or writes host memory registered read-only, kills its
 * context on a GPU, which the application does not survive: the double
 * stops the process. The copies run in no promised order: the double runs
 * them last to first, so that a caller that batches dependent copies sees
 * it.
 */
CUresult copies_async(const CUdeviceptr *dsts, const CUdeviceptr *srcs,
		      const size_t *sizes, size_t count, CUstream h,
		      bool kernel)
{
	unsigned ok = kernel ? M(MEM_DEVICE) | M(MEM_MANAGED) | M(MEM_PINNED) :
			       ANY;
	struct side d, s;
	CUresult r = CUDA_SUCCESS;
	size_t i;

	lock();
	for (i = 0; i < count && !r; i++)
		if (sizes[i] && !(r = side_of(dsts[i], sizes[i], true, ok, &d)))
			r = side_of(srcs[i], sizes[i], false, ok, &s);
	if (r && kernel) {
		i--;
		fprintf(stderr, "cuda double: the copy kernel's copy of %zu "
			"bytes from %#llx to %#llx leaves the memory the "
			"device may touch: on a GPU the context is lost\n",
			sizes[i],
			(unsigned long long) srcs[i],
			(unsigned long long) dsts[i]);
		abort();
	}
	/* fault injection counts each copy; the call fails whole */
	for (i = 0; i < count && !r; i++)
		if (copy_fails()) {
			bad.dst = dsts[i];
			bad.src = srcs[i];
			bad.len = sizes[i];
			bad.set = true;
			r = kernel ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES :
				     CUDA_ERROR_ILLEGAL_ADDRESS;
		}
	unlock();
	if (r)
		return r;
	for (i = count; i-- > 0 && !r;) {
		struct xfer x = {
			.dst = dsts[i], .src = srcs[i], .len = sizes[i],
			.stream = h, .async = true, .dst_ok = ok,
			.src_ok = ok, .batched = true,
		};

		r = copy(&x);
	}
	return r;
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
		      size_t count, CUmemcpyAttributes *attrs,
		      size_t *attrs_idxs, size_t nattrs, CUstream h)
{
	size_t i;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dsts || !srcs || !sizes || !count || !attrs || !attrs_idxs ||
	    !nattrs || nattrs > count || attrs_idxs[0] ||
	    !h || h == CU_STREAM_LEGACY)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < nattrs; i++)
		if ((i && attrs_idxs[i] <= attrs_idxs[i - 1]) ||
		    attrs_idxs[i] >= count ||
		    attrs[i].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
		    attrs[i].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
			return CUDA_ERROR_INVALID_VALUE;
	return copies_async(dsts, srcs, sizes, count, h, false);
}

ENTRY(cuMemcpyBatchAsync_v2,
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
       CUstream hStream),
      batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream))

/*
 * Memsets are late too, except that the synchronous ones complete on
 * pinned host memory and unified memory.
 */
static CUresult set(CUdeviceptr dst, uint32_t val, size_t n, int width,
		    CUstream h, bool ptds, bool async)
{
	struct CUctx_st *c;
	struct CUstream_st *st;
	struct op *first = NULL, **link = &first, *op;
	struct side d;
	uint64_t last = 0, key;
	size_t len, off, k;
	bool wait;
	CUresult r = enter_ctx(false, &c);
	char *p;

	if (r)
		return r;
	r = stream_get(h, ptds, &st);
	if (r || !n)
		goto out;
	if (dst % width || n > SIZE_MAX / width) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	len = n * width;
	r = side_of(dst, len, true, DEVICE_SIDE, &d);
	if (r)
		goto out;
	wait = !async && (d.kind != MEM_DEVICE || d.sync_memops ||
			  (c->flags & CU_CTX_SYNC_MEMOPS));
	for (off = 0; off < len; off += k) {
		k = mem_piece(dst + off, len - off, &p, &key);
		op = calloc(1, sizeof(*op));
		if (!op) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		*link = op;
		link = &op->next;
		op->kind = OP_SET;
		op->from_sync = !async;
		op->dst = p;
		op->len = k;
		op->val = val;
		op->width = width;
		set_key(op->key[0], key, k);
	}
	r = join(st);
	while (!r && (op = first)) {
		first = op->next;
		push(st, op);
		last = op->seq;
	}
	if (!r && wait)
		stream_run(st, last);
out:
	free_ops(first);
	unlock();
	return r;
}

/* cuMemsetD8, D16 and D32 of a type: synchronous (_v2, _v2_ptds) and on a
 * stream (Async, Async_ptsz). */
#define MEMSET(bits, type)						\
	ENTRY_PT(cuMemsetD##bits##_v2, _ptds,				\
		 (CUdeviceptr dstDevice, type v, size_t N),		\
		 set(dstDevice, v, N, bits / 8, NULL, ptds, false))	\
	ENTRY_PT(cuMemsetD##bits##Async, _ptsz,				\
		 (CUdeviceptr dstDevice, type v, size_t N, CUstream hStream), \
		 set(dstDevice, v, N, bits / 8, hStream, ptds, true))

MEMSET(8, unsigned char)
MEMSET(16, unsigned short)
MEMSET(32, unsigned int)
