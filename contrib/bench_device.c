/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The methods of mode 1 and --cross, and the two modes. Each method moves
 * len bytes from a direction's source buffer to its destination buffer of
 * this process:
 *   ceiling_async  cuMemcpyAsync on a non-blocking stream, cuStreamSynchronize
 *   ceiling_sync   cuMemcpy, cuStreamSynchronize of the legacy stream
 *   ceiling_peer   --cross: cuMemcpyPeerAsync on the source GPU's stream
 *   ceiling_uva    --cross: cuMemcpyAsync on the destination GPU's stream
 *   fi_write       endpoint a to its own address: a write, or a read, or
 *   fi_read        ... (through hmemloop)
 *   fi_send        a to endpoint b, into a receive posted on b
 *   staging        device to pinned host, a host fi_write through the
 *                  provider, pinned host to device, each step waited for
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "bench_dev.h"

/* Sizes up to which every operation outstanding has bytes of its own. */
#define SLOTS_UPTO (8UL << 20)

static const struct b_dir same_dirs[] = {
	{ "D2D", "device to device", DEV_A, DEV_B },
	{ "H2D", "host to device", HOST_A, DEV_B },
	{ "D2H", "device to host", DEV_A, HOST_B },
};

static const struct b_dir cross_dirs[] = {
	{ "G0toG1", "GPU 0 to GPU 1", DEV_A, DEV_B },
	{ "G1toG0", "GPU 1 to GPU 0", DEV_B, DEV_A },
};

/* Every operation gets a context of its own (struct b_lane). */
static void *ctx(struct b_lane *l)
{
	return &l->ctx[l->next++ % l->nctx];
}

static bool is_dev(enum b_loc l)
{
	return l == DEV_A || l == DEV_B;
}

static CUdeviceptr dp(const void *p)
{
	return (CUdeviceptr) (uintptr_t) p;
}

/* Slots: one for each operation outstanding, in one lane or all of
 * --mixed's. */
static unsigned slots(int window)
{
	return window > B_MIX_THREADS * B_MIX_WINDOW ?
	       window : B_MIX_THREADS * B_MIX_WINDOW;
}

/*
 * Where the k-th slot starts. In a message rate, each operation
 * outstanding moves bytes of its own, as an application's transfers do,
 * wherever the slots of all of them fit in the buffers (they do up to
 * SLOTS_UPTO: buf_len); else they share the start, and each operation
 * writes the bytes of the one before. The ceiling's copies take the same
 * slots; staging, one operation's path through the host, its buffers'
 * start.
 */
static size_t at(const struct b_ctx *c, unsigned k, size_t len)
{
	unsigned n = slots(c->lane.window);

	return (size_t) n * len <= c->len ? k % n * len : 0;
}

/* The buffers' length for sizes up to max: max, or room for the slots of
 * sizes up to SLOTS_UPTO. */
static size_t buf_len(size_t max)
{
	size_t room = slots(b_opt.window) *
		      (max < SLOTS_UPTO ? max : SLOTS_UPTO);

	return room > max ? room : max;
}

/* n copies, then one synchronization: of the bench's stream on the
 * destination's GPU (mode 1 has one) ... With spread, copy i takes slot
 * i. */
static int copy_async(struct b_ctx *c, enum b_loc dst, enum b_loc src,
		      size_t len, long n, bool spread)
{
	CUstream stream = c->stream[c->gpu[dst]];

	for (long i = 0; i < n; i++) {
		size_t off = spread ? at(c, i, len) : 0;

		if (b_cu_ok(cu.memcpy_async(dp(c->buf[dst]) + off,
					    dp(c->buf[src]) + off, len,
					    stream), "cuMemcpyAsync"))
			return -1;
	}
	return b_cu_ok(cu.stream_sync(stream), "cuStreamSynchronize");
}

/* ... or of the legacy stream, which cuMemcpy uses: a device-to-device
 * cuMemcpy returns before the bytes move. */
static int copy_sync(struct b_ctx *c, enum b_loc dst, enum b_loc src,
		     size_t len, long n, bool spread)
{
	for (long i = 0; i < n; i++) {
		size_t off = spread ? at(c, i, len) : 0;

		if (b_cu_ok(cu.memcpy(dp(c->buf[dst]) + off,
				      dp(c->buf[src]) + off, len), "cuMemcpy"))
			return -1;
	}
	return b_cu_ok(cu.stream_sync(CU_STREAM_LEGACY),
		       "cuStreamSynchronize");
}

static int ceil_async_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return copy_async(c, d->dst, d->src, len, 1, false);
}

static int ceil_sync_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return copy_sync(c, d->dst, d->src, len, 1, false);
}

typedef int (*copy_fn)(struct b_ctx *c, enum b_loc dst, enum b_loc src,
		       size_t len, long n, bool spread);

static long batches(struct b_ctx *c, const struct b_dir *d, size_t len,
		    long n, double deadline, copy_fn copy)
{
	long done = 0, k;

	while (done < n) {
		k = n - done < c->lane.window ? n - done : c->lane.window;
		if (copy(c, d->dst, d->src, len, k, true))
			return -1;
		done += k;
		if (b_now() > deadline)
			break;
	}
	return done;
}

static long ceil_async_rate(struct b_ctx *c, const struct b_dir *d,
			    size_t len, long n, double deadline)
{
	return batches(c, d, len, n, deadline, copy_async);
}

static long ceil_sync_rate(struct b_ctx *c, const struct b_dir *d,
			   size_t len, long n, double deadline)
{
	return batches(c, d, len, n, deadline, copy_sync);
}

/* --cross: n peer copies on the source GPU's stream, then one sync. */
static int copy_peer(struct b_ctx *c, enum b_loc dst, enum b_loc src,
		     size_t len, long n, bool spread)
{
	int dg = c->gpu[dst], sg = c->gpu[src];

	for (long i = 0; i < n; i++) {
		size_t off = spread ? at(c, i, len) : 0;

		if (b_cu_ok(cu.memcpy_peer_async(dp(c->buf[dst]) + off,
						 c->cuctx[dg],
						 dp(c->buf[src]) + off,
						 c->cuctx[sg], len,
						 c->stream[sg]),
			    "cuMemcpyPeerAsync"))
			return -1;
	}
	return b_cu_ok(cu.stream_sync(c->stream[sg]), "cuStreamSynchronize");
}

static int use_gpu(struct b_ctx *c, int g)
{
	return b_cu_ok(cu.ctx_set_current(c->cuctx[g]), "cuCtxSetCurrent");
}

/* A --cross ceiling issues its copies with its stream's context current,
 * as an application would; the switch is not timed. */
static int peer_prep(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	(void) len;
	return use_gpu(c, c->gpu[d->src]);
}

static int uva_prep(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	(void) len;
	return use_gpu(c, c->gpu[d->dst]);
}

static int peer_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return copy_peer(c, d->dst, d->src, len, 1, false);
}

static long peer_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
		      long n, double deadline)
{
	return peer_prep(c, d, len) ? -1 :
	       batches(c, d, len, n, deadline, copy_peer);
}

/* ceiling_async's copy, on the destination GPU's stream. */
static long uva_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
		     long n, double deadline)
{
	return uva_prep(c, d, len) ? -1 :
	       batches(c, d, len, n, deadline, copy_async);
}

/* RMA from a lane's endpoint to its own address. A read's local buffer
 * is the destination; a write's is the source. */
/* An fi_read or fi_write of len bytes at offset off of both buffers. */
static ssize_t rma_post(struct b_ctx *c, struct b_lane *l,
			const struct b_dir *d, size_t len, bool read,
			size_t off)
{
	char *dst = (char *) c->buf[d->dst] + off;
	char *src = (char *) c->buf[d->src] + off;

	if (read)
		return fi_read(l->e->ep, dst, len, c->desc[d->dst], l->self,
			       b_raddr(&c->fab, src), c->key[d->src], ctx(l));
	return fi_write(l->e->ep, src, len, c->desc[d->src], l->self,
			b_raddr(&c->fab, dst), c->key[d->dst], ctx(l));
}

static int rma_one(struct b_ctx *c, const struct b_dir *d, size_t len,
		   bool read)
{
	ssize_t ret;

	B_POST(ret, rma_post(c, &c->lane, d, len, read, 0));
	if (b_post_failed(ret, read ? "fi_read" : "fi_write"))
		return -1;
	return b_cq_wait_for(c->a.tx, 1, c->lane.alone);
}

static int write_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return rma_one(c, d, len, false);
}

static int read_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return rma_one(c, d, len, true);
}

static bool stalled(struct b_stall *st, long got)
{
	if (!b_stalled(st, got))
		return false;
	snprintf(b_errmsg, sizeof(b_errmsg), "no completion in %.0f s",
		 b_stall_s);
	return true;
}

/* Post until the window is outstanding (or the provider says
 * -FI_EAGAIN), then poll the CQ once, without waiting: one more is posted
 * for each completion read, and a copy hmemloop completes later overlaps
 * the ones posted after it. */
long b_rma_rate(struct b_ctx *c, struct b_lane *l, const struct b_dir *d,
		size_t len, long n, double deadline, bool read)
{
	struct b_stall st = { 0, 0, l->alone };
	long posted = 0, done = 0, got;
	ssize_t ret;

	while (done < n) {
		while (posted < n && posted - done < l->window) {
			ret = rma_post(c, l, d, len, read,
				       at(c, l->first + posted % l->window,
					  len));
			if (ret == -FI_EAGAIN)
				break;
			if (b_post_failed(ret, read ? "fi_read" : "fi_write"))
				return -1;
			posted++;
		}
		got = b_cq_poll(l->e->tx, posted - done);
		if (got < 0 || stalled(&st, got))
			return -1;
		done += got;
		if (posted < n && b_now() > deadline)
			n = posted;
	}
	return done;
}

static long write_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
		       long n, double deadline)
{
	return b_rma_rate(c, &c->lane, d, len, n, deadline, false);
}

static long read_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
		      long n, double deadline)
{
	return b_rma_rate(c, &c->lane, d, len, n, deadline, true);
}

/* Message i lands in receive i: both take slot i (off). */
static ssize_t recv_post(struct b_ctx *c, const struct b_dir *d, size_t len,
			 size_t off)
{
	return fi_recv(c->b.ep, (char *) c->buf[d->dst] + off, len,
		       c->desc[d->dst], FI_ADDR_UNSPEC, ctx(&c->lane));
}

static ssize_t send_post(struct b_ctx *c, const struct b_dir *d, size_t len,
			 size_t off)
{
	return fi_send(c->a.ep, (char *) c->buf[d->src] + off, len,
		       c->desc[d->src], c->peer, ctx(&c->lane));
}

static int send_prep(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	ssize_t ret;

	B_POST(ret, recv_post(c, d, len, 0));
	return b_post_failed(ret, "fi_recv");
}

/* Both completions: the sender's and the receiver's. */
static int send_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	ssize_t ret;

	B_POST(ret, send_post(c, d, len, 0));
	if (b_post_failed(ret, "fi_send"))
		return -1;
	if (b_cq_wait_for(c->a.tx, 1, c->lane.alone)) {
		b_prefix("send: ");
		return -1;
	}
	if (b_cq_wait_for(c->b.rx, 1, c->lane.alone)) {
		b_prefix("receive: ");
		return -1;
	}
	return 0;
}

/* Keep a window of receives posted and of sends in flight; never more
 * sends than receives, so that no message arrives unexpected, and no
 * receive left posted at the end. */
static long send_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
		      long n, double deadline)
{
	long precv = 0, psend = 0, drecv = 0, dsend = 0, got, got2;
	struct b_stall st = { 0, 0, c->lane.alone };
	ssize_t ret;

	while (drecv < n || dsend < n) {
		while (precv < n && precv - drecv < c->lane.window &&
		       (ret = recv_post(c, d, len,
					at(c, precv % c->lane.window, len))) !=
		       -FI_EAGAIN) {
			if (b_post_failed(ret, "fi_recv"))
				return -1;
			precv++;
		}
		while (psend < precv && psend - dsend < c->lane.window &&
		       (ret = send_post(c, d, len,
					at(c, psend % c->lane.window, len))) !=
		       -FI_EAGAIN) {
			if (b_post_failed(ret, "fi_send"))
				return -1;
			psend++;
		}
		got = b_cq_poll(c->a.tx, psend - dsend);
		got2 = got < 0 ? 0 : b_cq_poll(c->b.rx, precv - drecv);
		if (got < 0 || got2 < 0 || stalled(&st, got + got2))
			return -1;
		dsend += got;
		drecv += got2;
		if (precv < n && b_now() > deadline)
			n = precv;
	}
	return dsend;
}

static int stage_copy(struct b_ctx *c, enum b_loc dst, enum b_loc src,
		      size_t len, long n)
{
	return b_opt.staging_sync ? copy_sync(c, dst, src, len, n, false) :
				    copy_async(c, dst, src, len, n, false);
}

/* A host-memory write from HOST_A to HOST_B through the provider. Its
 * completion must mean the bytes are there: tcp;ofi_rxm completes a plain
 * write once it is sent, and the copy to the device would then read
 * bytes that have not landed. */
static ssize_t host_write(struct b_ctx *c, size_t len)
{
	struct iovec iov = { c->buf[HOST_A], len };
	struct fi_rma_iov riov = {
		b_raddr(&c->fab, c->buf[HOST_B]), len, c->key[HOST_B],
	};
	struct fi_msg_rma msg = {
		.msg_iov = &iov, .desc = &c->desc[HOST_A], .iov_count = 1,
		.addr = c->self, .rma_iov = &riov, .rma_iov_count = 1,
		.context = ctx(&c->lane),
	};

	return fi_writemsg(c->a.ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
}

static int host_writes(struct b_ctx *c, size_t len, long n)
{
	ssize_t ret;

	for (long i = 0; i < n; i++) {
		B_POST(ret, host_write(c, len));
		if (b_post_failed(ret, "fi_writemsg"))
			return -1;
	}
	return b_cq_wait(c->a.tx, n);
}

/* The pinned host ends double as the bounce buffers. */
static int staging_n(struct b_ctx *c, const struct b_dir *d, size_t len,
		     long n)
{
	if (is_dev(d->src) && stage_copy(c, HOST_A, d->src, len, n))
		return -1;
	if (host_writes(c, len, n))
		return -1;
	if (is_dev(d->dst) && stage_copy(c, d->dst, HOST_B, len, n))
		return -1;
	return 0;
}

static int staging_one(struct b_ctx *c, const struct b_dir *d, size_t len)
{
	return staging_n(c, d, len, 1);
}

static long staging_rate(struct b_ctx *c, const struct b_dir *d, size_t len,
			 long n, double deadline)
{
	long done = 0, k;

	while (done < n) {
		k = n - done < c->lane.window ? n - done : c->lane.window;
		if (staging_n(c, d, len, k))
			return -1;
		done += k;
		if (b_now() > deadline)
			break;
	}
	return done;
}

#define RMA_RATE "N posted, then one more per completion read (fi_cq_read " \
	"polled)"
#define SEND_RATE "N receives posted and N sends in flight; an operation " \
	"is its two completions"

static const struct b_method same_methods[NMETHODS] = {
	[M_CEIL_ASYNC] = { "ceiling_async", false, NULL, ceil_async_one,
		ceil_async_rate, "N cuMemcpyAsync, then one cuStreamSynchronize" },
	[M_CEIL_SYNC] = { "ceiling_sync", false, NULL, ceil_sync_one,
		ceil_sync_rate, "N cuMemcpy, then one cuStreamSynchronize "
		"of the legacy stream" },
	[M_WRITE] = { "fi_write", true, NULL, write_one, write_rate, RMA_RATE },
	[M_READ] = { "fi_read", true, NULL, read_one, read_rate, RMA_RATE },
	[M_SEND] = { "fi_send", true, send_prep, send_one, send_rate,
		SEND_RATE },
	[M_STAGING] = { "staging", false, NULL, staging_one, staging_rate,
		"per batch: N copies to pinned host and a sync, N host "
		"fi_write and their completions, N copies to device and a sync" },
};

/* The hmemloop methods are mode 1's own; no staging between GPUs. */
static const struct b_method cross_methods[NMETHODS] = {
	[M_CEIL_PEER] = { "ceiling_peer", false, peer_prep, peer_one,
		peer_rate, "N cuMemcpyPeerAsync, then one cuStreamSynchronize" },
	[M_CEIL_UVA] = { "ceiling_uva", false, uva_prep, ceil_async_one,
		uva_rate, "N cuMemcpyAsync, then one cuStreamSynchronize" },
	[M_WRITE] = { "fi_write", true, NULL, write_one, write_rate, RMA_RATE },
	[M_READ] = { "fi_read", true, NULL, read_one, read_rate, RMA_RATE },
	[M_SEND] = { "fi_send", true, send_prep, send_one, send_rate,
		SEND_RATE },
};

static int dev_alloc(struct b_ctx *c, enum b_loc l, size_t len)
{
	CUdeviceptr p;

	if (b_cu_ok(cu.mem_alloc(&p, len), "cuMemAlloc"))
		return -1;
	c->buf[l] = (void *) (uintptr_t) p;
	return b_cu_ok(cu.memset_d8(p, 0, len), "cuMemsetD8");
}

/* GPU g's primary context, current, and the bench's stream in it. */
static int gpu_open(struct b_ctx *c, int g)
{
	return b_cuda_context(g, &c->cuctx[g]) || use_gpu(c, g) ||
	       b_cu_ok(cu.stream_create(&c->stream[g], CU_STREAM_NON_BLOCKING),
		       "cuStreamCreate") ? -1 : 0;
}

static int alloc_same(struct b_ctx *c, size_t len)
{
	if (gpu_open(c, 0) || dev_alloc(c, DEV_A, len) ||
	    dev_alloc(c, DEV_B, len))
		return -1;
	for (int l = HOST_A; l <= HOST_B; l++) {
		if (b_cu_ok(cu.host_alloc(&c->buf[l], len, 0),
			    "cuMemHostAlloc"))
			return -1;
		memset(c->buf[l], 0, len);
	}
	return b_cu_ok(cu.ctx_sync(), "cuCtxSynchronize");
}

/* Let GPU g's context reach GPU peer's memory: 0, or -1 with the reason
 * in b_errmsg. An earlier enable counts. */
static int peer_enable(struct b_ctx *c, int g, int peer)
{
	CUdevice dev, pdev;
	int can = 0;
	CUresult r;

	if (b_cu_ok(cu.device_get(&dev, g), "cuDeviceGet") ||
	    b_cu_ok(cu.device_get(&pdev, peer), "cuDeviceGet") ||
	    b_cu_ok(cu.can_access_peer(&can, dev, pdev),
		    "cuDeviceCanAccessPeer"))
		return -1;
	if (!can) {
		snprintf(b_errmsg, sizeof(b_errmsg),
			 "cuDeviceCanAccessPeer says it cannot");
		return -1;
	}
	if (use_gpu(c, g))
		return -1;
	r = cu.ctx_enable_peer(c->cuctx[peer], 0);
	return r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ? 0 :
	       b_cu_ok(r, "cuCtxEnablePeerAccess");
}

/* Both ways, as a multi-GPU application sets up: without it the driver
 * stages copies between the GPUs through the host. Not fatal; c->p2p says
 * how it went, for the header. */
static void enable_peers(struct b_ctx *c)
{
	char way[2][272];
	int bad = 0;

	for (int g = 0; g < 2; g++) {
		if (!peer_enable(c, g, 1 - g)) {
			snprintf(way[g], sizeof(way[g]), "enabled");
			continue;
		}
		snprintf(way[g], sizeof(way[g]), "not enabled: %s", b_errmsg);
		bad++;
	}
	if (!bad)
		snprintf(c->p2p, sizeof(c->p2p), "enabled both ways "
			 "(cuCtxEnablePeerAccess)");
	else
		snprintf(c->p2p, sizeof(c->p2p), "could not be enabled: "
			 "GPU 0 to GPU 1's memory %s; GPU 1 to GPU 0's %s",
			 way[0], way[1]);
}

/* DEV_A on GPU 0, DEV_B on GPU 1, each allocated in its own context. */
static int alloc_cross(struct b_ctx *c, size_t len)
{
	if (b_cuda_count() < 2) {
		snprintf(b_errmsg, sizeof(b_errmsg), "--cross needs two CUDA "
			 "devices; this process sees %d", b_cuda_count());
		return -1;
	}
	for (int g = 0; g < 2; g++) {
		enum b_loc l = g ? DEV_B : DEV_A;

		c->gpu[l] = g;
		if (gpu_open(c, g) || dev_alloc(c, l, len) ||
		    b_cu_ok(cu.ctx_sync(), "cuCtxSynchronize"))
			return -1;
	}
	enable_peers(c);
	return b_ctx_home(c);
}

void b_lane_init(struct b_lane *l, struct b_ep *e, fi_addr_t self,
		 int window)
{
	memset(l, 0, sizeof(*l));
	l->e = e;
	l->self = self;
	l->window = window;
	l->nctx = 4 * window;
	l->ctx = calloc(l->nctx, sizeof(*l->ctx));
	if (!l->ctx)
		b_die("out of memory");
}

int b_ctx_home(struct b_ctx *c)
{
	return use_gpu(c, 0);
}

/* Buffers, then the provider: endpoint a with its own address in its AV,
 * endpoint b as fi_send's receiver, and the mode's buffers registered. */
int b_ctx_open(struct b_ctx *c, size_t len, char *why, size_t whylen)
{
	int ret;

	memset(c, 0, sizeof(*c));
	len = c->len = buf_len(len);
	if (b_mode->alloc(c, len)) {
		snprintf(why, whylen, "%s", b_errmsg);
		return -1;
	}
	ret = b_fab_open(&c->fab, b_opt.prov);
	if (ret) {
		snprintf(why, whylen, "provider %s is not available here",
			 b_opt.prov);
		return -1;
	}
	b_ep_open(&c->a, &c->fab);
	b_ep_open(&c->b, &c->fab);
	c->self = b_av_insert(&c->a, c->a.name);
	b_lane_init(&c->lane, &c->a, c->self, b_opt.window);
	/* hmemloop completes its operations without the provider's
	 * progress: its methods wait on their own CQs, as an application
	 * does (the ceiling and staging do not read the lane). */
	c->lane.alone = !b_opt.no_shim && !b_opt.hmem;
	c->peer = b_av_insert(&c->a, c->b.name);
	b_av_insert(&c->b, c->a.name);
	for (int l = 0; l < NLOC; l++) {
		if (!c->buf[l])
			continue;
		c->mr[l] = b_mr_reg(&c->fab, c->buf[l], len, l + 1,
				    l <= DEV_B ? c->gpu[l] : -1);
		c->desc[l] = fi_mr_desc(c->mr[l]);
		c->key[l] = fi_mr_key(c->mr[l]);
	}
	return 0;
}

void b_ctx_close(struct b_ctx *c)
{
	free(c->lane.ctx);
	for (int l = 0; l < NLOC; l++)
		b_mr_close(c->mr[l]);
	b_ep_close(&c->b);
	b_ep_close(&c->a);
	b_fab_close(&c->fab);
	for (int g = 0; g < 2; g++)
		if (c->stream[g])
			cu.stream_destroy(c->stream[g]);
	for (int l = DEV_A; l <= DEV_B; l++)
		if (c->buf[l])
			cu.mem_free(dp(c->buf[l]));
	for (int l = HOST_A; l <= HOST_B; l++)
		if (c->buf[l])
			cu.host_free(c->buf[l]);
}

static uint8_t pattern(size_t i, unsigned seed)
{
	uint32_t x = (uint32_t) i * 2654435761u + seed * 40503u + seed;

	return (uint8_t) (x >> 13 ^ x);
}

/* Set a buffer to the pattern, or to zeros, wherever it is. */
static int put(struct b_ctx *c, enum b_loc l, uint8_t *tmp, size_t len,
	       unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		tmp[i] = seed ? pattern(i, seed) : 0;
	if (!is_dev(l)) {
		memcpy(c->buf[l], tmp, len);
		return 0;
	}
	/* In the buffer's own context, so that the sync covers the copy. */
	return use_gpu(c, c->gpu[l]) ||
	       b_cu_ok(cu.memcpy(dp(c->buf[l]), dp(tmp), len), "cuMemcpy") ||
	       b_cu_ok(cu.ctx_sync(), "cuCtxSynchronize") ? -1 : 0;
}

static int check(struct b_ctx *c, enum b_loc l, uint8_t *tmp, size_t len,
		 unsigned seed)
{
	if (is_dev(l)) {
		if (use_gpu(c, c->gpu[l]) ||
		    b_cu_ok(cu.memcpy(dp(tmp), dp(c->buf[l]), len), "cuMemcpy") ||
		    b_cu_ok(cu.ctx_sync(), "cuCtxSynchronize"))
			return -1;
	} else {
		memcpy(tmp, c->buf[l], len);
	}
	for (size_t i = 0; i < len; i++)
		if (tmp[i] != pattern(i, seed)) {
			snprintf(b_errmsg, sizeof(b_errmsg), "completed, but "
				 "byte %zu of %zu is %#x, not %#x", i, len,
				 tmp[i], pattern(i, seed));
			return -1;
		}
	return 0;
}

int b_validate(struct b_ctx *c, int m, const struct b_dir *d, size_t len)
{
	const struct b_method *mt = &b_mode->methods[m];
	unsigned seed = (unsigned) (m * 7 + (d - b_mode->dirs) + 1);
	uint8_t *tmp = malloc(len);
	int ret;

	if (!tmp)
		b_die("out of memory");
	/* The method starts from GPU 0's context, as when it is timed. */
	ret = put(c, d->src, tmp, len, seed) || put(c, d->dst, tmp, len, 0) ||
	      b_ctx_home(c) || (mt->prep && mt->prep(c, d, len)) ||
	      mt->one(c, d, len) ||
	      check(c, d->dst, tmp, len, seed) ? -1 : 0;
	free(tmp);
	if (b_ctx_home(c))
		ret = -1;
	return ret;
}

long b_rate_ops(long w)
{
	long n = (b_opt.iters + w - 1) / w * w;

	return n < 2 * w ? 2 * w : n;
}

int b_rate(struct b_ctx *c, int m, const struct b_dir *d, size_t len,
	   long *ops, double *secs)
{
	const struct b_method *mt = &b_mode->methods[m];
	long w = b_opt.window, n = b_rate_ops(w);
	double t0;

	if (mt->rate(c, d, len, w, 0) < 0)	/* warm-up */
		return -1;
	t0 = b_now();
	*ops = mt->rate(c, d, len, n, t0 + b_opt.max_time);
	*secs = b_now() - t0;
	return *ops < 0 ? -1 : 0;
}

const struct b_mode b_mode_same = {
	.title = "same-process copies of CUDA device memory",
	.gpus = 1,
	.dirs = same_dirs,
	.ndirs = sizeof(same_dirs) / sizeof(same_dirs[0]),
	.methods = same_methods,
	.buffers = "cuMemAlloc on the device, cuMemHostAlloc (pinned) on the "
		"host",
	.ceiling = "the faster of ceiling_async (cuMemcpyAsync on a "
		"non-blocking stream + cuStreamSynchronize) and ceiling_sync "
		"(cuMemcpy + cuStreamSynchronize of the legacy stream) at "
		"each point; the CSV has both",
	.no_shim = "ceiling and staging",
	.alloc = alloc_same,
};

const struct b_mode b_mode_cross = {
	.title = "same-process copies between GPU 0 and GPU 1",
	.gpus = 2,
	.dirs = cross_dirs,
	.ndirs = sizeof(cross_dirs) / sizeof(cross_dirs[0]),
	.methods = cross_methods,
	.buffers = "cuMemAlloc on GPU 0 and on GPU 1, each in its device's "
		"primary context, on one endpoint pair",
	.ceiling = "the faster of ceiling_peer (cuMemcpyPeerAsync on a "
		"non-blocking stream of the source's context + "
		"cuStreamSynchronize) and ceiling_uva (cuMemcpyAsync, unified "
		"addressing, on a non-blocking stream of the destination's "
		"context + cuStreamSynchronize) at each point, each with its "
		"stream's context current; the CSV has both",
	.no_shim = "ceiling",
	.alloc = alloc_cross,
};
