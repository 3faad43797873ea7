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
	CUresult r;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	lock();
	r = ctx_current(&c);
	if (!r && x->peer[0] && (!ctx_live(x->peer[0]) || !ctx_live(x->peer[1])))
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

API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return traced(__func__, copy_sync(dst, src, ByteCount, false, ANY, ANY));
}

API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return traced(__func__, copy_sync(dst, src, ByteCount, true, ANY, ANY));
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
			   CUstream hStream)
{
	return traced(__func__, copy_async(dst, src, ByteCount, hStream, false,
					   ANY, ANY));
}

API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
				size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_async(dst, src, ByteCount, hStream, true,
					   ANY, ANY));
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
			     size_t ByteCount)
{
	return traced(__func__, copy_sync(dstDevice, (uintptr_t)srcHost,
					  ByteCount, false, DEVICE_SIDE,
					  HOST_SIDE));
}

API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
				  size_t ByteCount)
{
	return traced(__func__, copy_sync(dstDevice, (uintptr_t)srcHost,
					  ByteCount, true, DEVICE_SIDE,
					  HOST_SIDE));
}

API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
			     size_t ByteCount)
{
	return traced(__func__, copy_sync((uintptr_t)dstHost, srcDevice,
					  ByteCount, false, HOST_SIDE,
					  DEVICE_SIDE));
}

API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice,
				  size_t ByteCount)
{
	return traced(__func__, copy_sync((uintptr_t)dstHost, srcDevice,
					  ByteCount, true, HOST_SIDE,
					  DEVICE_SIDE));
}

API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
			     size_t ByteCount)
{
	return traced(__func__, copy_sync(dstDevice, srcDevice, ByteCount,
					  false, DEVICE_SIDE, DEVICE_SIDE));
}

API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				  size_t ByteCount)
{
	return traced(__func__, copy_sync(dstDevice, srcDevice, ByteCount,
					  true, DEVICE_SIDE, DEVICE_SIDE));
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
				  size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_async(dstDevice, (uintptr_t)srcHost,
					   ByteCount, hStream, false,
					   DEVICE_SIDE, HOST_SIDE));
}

API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice,
				       const void *srcHost, size_t ByteCount,
				       CUstream hStream)
{
	return traced(__func__, copy_async(dstDevice, (uintptr_t)srcHost,
					   ByteCount, hStream, true,
					   DEVICE_SIDE, HOST_SIDE));
}

API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
				  size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_async((uintptr_t)dstHost, srcDevice,
					   ByteCount, hStream, false,
					   HOST_SIDE, DEVICE_SIDE));
}

API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
				       size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_async((uintptr_t)dstHost, srcDevice,
					   ByteCount, hStream, true,
					   HOST_SIDE, DEVICE_SIDE));
}

API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				  size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_async(dstDevice, srcDevice, ByteCount,
					   hStream, false, DEVICE_SIDE,
					   DEVICE_SIDE));
}

API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice,
				       CUdeviceptr srcDevice, size_t ByteCount,
				       CUstream hStream)
{
	return traced(__func__, copy_async(dstDevice, srcDevice, ByteCount,
					   hStream, true, DEVICE_SIDE,
					   DEVICE_SIDE));
}

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

API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
			  CUdeviceptr srcDevice, CUcontext srcContext,
			  size_t ByteCount)
{
	return traced(__func__, copy_peer(dstDevice, dstContext, srcDevice,
					  srcContext, ByteCount, NULL, false,
					  false));
}

API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
			       CUdeviceptr srcDevice, CUcontext srcContext,
			       size_t ByteCount)
{
	return traced(__func__, copy_peer(dstDevice, dstContext, srcDevice,
					  srcContext, ByteCount, NULL, false,
					  true));
}

API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
			       CUdeviceptr srcDevice, CUcontext srcContext,
			       size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_peer(dstDevice, dstContext, srcDevice,
					  srcContext, ByteCount, hStream, true,
					  false));
}

API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
				    CUdeviceptr srcDevice, CUcontext srcContext,
				    size_t ByteCount, CUstream hStream)
{
	return traced(__func__, copy_peer(dstDevice, dstContext, srcDevice,
					  srcContext, ByteCount, hStream, true,
					  true));
}

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

API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs,
				   size_t *sizes, size_t count,
				   CUmemcpyAttributes *attrs,
				   size_t *attrsIdxs, size_t numAttrs,
				   CUstream hStream)
{
	return traced(__func__, batch(dsts, srcs, sizes, count, attrs,
				      attrsIdxs, numAttrs, hStream));
}

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
	CUresult r;
	char *p;

	if (!ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	lock();
	r = ctx_current(&c);
	if (!r)
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

API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return traced(__func__, set(dstDevice, uc, N, 1, NULL, false, false));
}

API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc,
				size_t N)
{
	return traced(__func__, set(dstDevice, uc, N, 1, NULL, true, false));
}

API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return traced(__func__, set(dstDevice, us, N, 2, NULL, false, false));
}

API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us,
				 size_t N)
{
	return traced(__func__, set(dstDevice, us, N, 2, NULL, true, false));
}

API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return traced(__func__, set(dstDevice, ui, N, 4, NULL, false, false));
}

API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui,
				 size_t N)
{
	return traced(__func__, set(dstDevice, ui, N, 4, NULL, true, false));
}

API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
			     CUstream hStream)
{
	return traced(__func__, set(dstDevice, uc, N, 1, hStream, false, true));
}

API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc,
				  size_t N, CUstream hStream)
{
	return traced(__func__, set(dstDevice, uc, N, 1, hStream, true, true));
}

API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us,
			      size_t N, CUstream hStream)
{
	return traced(__func__, set(dstDevice, us, N, 2, hStream, false, true));
}

API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us,
				   size_t N, CUstream hStream)
{
	return traced(__func__, set(dstDevice, us, N, 2, hStream, true, true));
}

API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
			      CUstream hStream)
{
	return traced(__func__, set(dstDevice, ui, N, 4, hStream, false, true));
}

API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui,
				   size_t N, CUstream hStream)
{
	return traced(__func__, set(dstDevice, ui, N, 4, hStream, true, true));
}
