/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --peers: two processes on one GPU move device memory through a provider,
 * as two ranks of a job do (libfabric issue 12328's configuration: hints
 * with FI_MR_HMEM and without FI_HMEM, device memory registered as host
 * memory, so that HMEMLOOP_HMEM=auto asks for FI_HMEM). Each provider's
 * fi_write, fi_read and fi_send, initiator A (this process) to target B (a
 * child), are timed against the driver's own copy between the two
 * processes' memory (cuMemcpyAsync between A's buffer and B's, opened in A
 * through a CUDA IPC handle), and against the same transfers through
 * tcp;ofi_rxm, which stands in for the NIC loopback of the workaround
 * FI_EFA_ENABLE_SHM_TRANSFER=0.
 *
 * B is this program again ("--peers-child PROV"), started once per
 * provider; A drives it over a socket, one line a command:
 *	B: hello IPC NAME | skip WHY	IPC and NAME hex, "-" where none
 *	peer NAME	B inserts A's address			-> ok
 *	fill V LEN	B sets its buffer's first LEN bytes to V	-> ok
 *	check V LEN	... and says whether they are V		-> ok | bad
 *	serve LEN N PONG  B says "serving" and drives progress, taking N
 *			messages of LEN bytes (each answered with one of
 *			LEN bytes if PONG, else the last with a 1-byte ack),
 *			until "stop"			-> done | fail WHY
 *	quit
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "bench_peers.h"
#include "hml_config.h"

const char *const b_op_name[NOPS] = { "fi_write", "fi_read", "fi_send" };
const char *const b_status_name[] = { "", "ok", "unavailable", "failed" };
struct b_peers b_pr;

#define MIN_OPS 3
/* Bytes a bandwidth point moves at most (and at least 4 operations). */
#define RATE_BYTES (2ULL << 30)

struct peer {
	pid_t pid;
	int fd;
	char line[1200];
	char ipc[2 * sizeof(CUipcMemHandle) + 2];
	char name[1100];
	unsigned long long key, raddr;
};

static void spawn(struct peer *p, const char *prov)
{
	char range[64];
	char *argv[] = { NULL, "--peers-child", (char *) prov, "--sizes", range,
			 b_opt.host ? "--host" : NULL, NULL };

	snprintf(range, sizeof(range), "%zu:%zu", b_opt.min_size,
		 b_opt.max_size);
	p->pid = b_spawn(argv, NULL, &p->fd);
}

/* Send a command and wait for its answer: 0 for "ok" (or what want
 * says), else -1 with the reason in b_errmsg. */
static int ask(struct peer *p, const char *want, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int ask(struct peer *p, const char *want, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = b_vask(p->fd, p->line, sizeof(p->line), B_CTL_TIMEOUT_S, cmd,
		     sizeof(cmd), fmt, ap);
	va_end(ap);
	if (ret) {
		snprintf(b_errmsg, sizeof(b_errmsg), "B gave no answer to %.40s",
			 cmd);
		return -1;
	}
	if (strcmp(p->line, want ? want : "ok")) {
		snprintf(b_errmsg, sizeof(b_errmsg), "B: %.40s: %.150s", cmd,
			 p->line);
		return -1;
	}
	return 0;
}

/* What a path measures, between A's buffer and B's. */
struct path {
	struct side a;
	struct peer b;
	char *bptr;			/* the driver: B's buffer, opened here */
	bool driver;
};

/* Post one fabric operation of op from A's buffer. */
static ssize_t post_op(struct path *x, int op, size_t len)
{
	struct side *a = &x->a;
	void *desc = fi_mr_desc(a->mr);

	switch (op) {
	case OP_SEND:
		return fi_send(a->e.ep, a->buf, len, desc, a->peer, b_ctx());
	case OP_WRITE:
		return fi_write(a->e.ep, a->buf, len, desc, a->peer, a->raddr,
				a->key, b_ctx());
	default:
		return fi_read(a->e.ep, a->buf, len, desc, a->peer, a->raddr,
			       a->key, b_ctx());
	}
}

/* The driver's copy in op's direction, queued on st. */
static int copy(struct path *x, int op, size_t len, CUstream st)
{
	CUdeviceptr l = (CUdeviceptr) (uintptr_t) x->a.buf;
	CUdeviceptr r = (CUdeviceptr) (uintptr_t) x->bptr;

	return b_cu_ok(op == OP_READ ? cu.memcpy_async(l, r, len, st) :
		       cu.memcpy_async(r, l, len, st), "cuMemcpyAsync");
}

/* One operation of op, to its initiator's completion (fi_send: the
 * message's); the driver's: cuMemcpyAsync and its synchronization. */
static int one(struct path *x, int op, size_t len, CUstream st)
{
	ssize_t ret;

	if (x->driver)
		return copy(x, op, len, st) ||
		       b_cu_ok(cu.stream_sync(st), "cuStreamSynchronize") ?
		       -1 : 0;
	B_POST(ret, post_op(x, op, len));
	return b_post_failed(ret, b_op_name[op]) || b_cq_wait(x->a.e.tx, 1) ? -1 : 0;
}

/* n operations with B_WINDOW in flight, to their completions. */
static int stream(struct path *x, int op, size_t len, long n)
{
	long posted = 0, done = 0, got;
	struct b_stall st = { 0, 0, false };
	ssize_t ret;

	while (done < n) {
		while (posted < n && posted - done < B_WINDOW) {
			ret = post_op(x, op, len);
			if (ret == -FI_EAGAIN)
				break;
			if (b_post_failed(ret, b_op_name[op]))
				return -1;
			posted++;
		}
		got = b_cq_poll(x->a.e.tx, posted - done);
		if (got < 0)
			return -1;
		if (b_stalled(&st, got)) {
			snprintf(b_errmsg, sizeof(b_errmsg), "%s: no "
				 "completion in %.0f s", b_op_name[op], b_stall_s);
			return -1;
		}
		done += got;
	}
	return 0;
}

/* B serving n messages (0: RMA only) while the caller's ops run. */
static int serving(struct path *x, size_t len, long n, bool pong)
{
	return x->driver ? 0 : ask(&x->b, "serving", "serve %zu %ld %d", len,
				   n, pong);
}

static int served(struct path *x)
{
	return x->driver ? 0 : ask(&x->b, "done", "stop");
}

/* n sends, the last of which B acknowledges with a byte. */
static int acked_sends(struct path *x, size_t len, long n)
{
	return b_post_recv(&x->a, x->a.ack, x->a.ack_mr, 1) ||
	       stream(x, OP_SEND, len, n) || b_cq_wait(x->a.e.rx, 1) ? -1 : 0;
}

/* The bytes land where they should, once. */
static int validate(struct path *x, int op, size_t len, CUstream st)
{
	int v = 0x41 + op, ok;

	if (op == OP_READ) {
		if (ask(&x->b, NULL, "fill %d %zu", v, len) ||
		    b_fill(x->a.buf, 0, len) || serving(x, len, 0, false) ||
		    one(x, op, len, st) || served(x))
			return -1;
		ok = b_holds(x->a.buf, v, len);
	} else {
		if (b_fill(x->a.buf, v, len) ||
		    ask(&x->b, NULL, "fill 0 %zu", len) ||
		    serving(x, len, op == OP_SEND, false) ||
		    (op == OP_SEND && !x->driver ? acked_sends(x, len, 1) :
		     one(x, op, len, st)) || served(x))
			return -1;
		ok = !ask(&x->b, NULL, "check %d %zu", v, len);
	}
	if (!ok)
		snprintf(b_errmsg, sizeof(b_errmsg), "wrong bytes at %s",
			 op == OP_READ ? "A" : "B");
	return ok ? 0 : -1;
}

/* n timed operations into lat (fi_send: half a ping-pong each), while
 * B serves them. */
static int timed(struct path *x, int op, size_t len, CUstream st, long n,
		 double *lat)
{
	bool pp = op == OP_SEND && !x->driver;
	double t0;

	if (serving(x, len, pp ? n : 0, pp))
		return -1;
	for (long i = 0; i < n; i++) {
		if (pp && b_post_recv(&x->a, x->a.buf, x->a.mr, len))
			return -1;
		t0 = b_now();
		if (one(x, op, len, st) || (pp && b_cq_wait(x->a.e.rx, 1)))
			return -1;
		lat[i] = (b_now() - t0) / (pp ? 2 : 1);
	}
	return served(x);
}

/* Latency: as many operations as --max-time lets, at least MIN_OPS, at
 * most --iters, after two that warm up and say how many fit. */
static int latency(struct path *x, int op, size_t len, CUstream st,
		   struct b_stats *s)
{
	double warm[2], *lat;
	long n;
	int ret;

	if (timed(x, op, len, st, 2, warm))
		return -1;
	n = (long) (b_opt.max_time / (warm[1] > 0 ? warm[1] : 1e-9));
	n = n < MIN_OPS ? MIN_OPS : n > b_opt.iters ? b_opt.iters : n;
	lat = malloc(n * sizeof(*lat));
	if (!lat)
		b_die("out of memory");
	ret = timed(x, op, len, st, n, lat);
	if (!ret)
		b_stats(lat, n, s);
	free(lat);
	return ret;
}

/* Bandwidth: a stream with B_WINDOW operations in flight (the driver: all
 * queued on one stream, then one synchronization; fi_send: until B's
 * acknowledgement of the last). */
static int bandwidth(struct path *x, int op, size_t len, CUstream st,
		     double *gbps)
{
	long n = (long) (RATE_BYTES / len);
	double t0;
	int ret = 0;

	n = n < 4 ? 4 : n > 4 * b_opt.iters ? 4 * b_opt.iters : n;
	if (serving(x, len, op == OP_SEND ? n : 0, false))
		return -1;
	t0 = b_now();
	if (x->driver) {
		for (long i = 0; i < n && !ret; i++)
			ret = copy(x, op, len, st);
		ret = ret || b_cu_ok(cu.stream_sync(st), "cuStreamSynchronize");
	} else if (op == OP_SEND) {
		ret = acked_sends(x, len, n);
	} else {
		ret = stream(x, op, len, n);
	}
	if (ret)
		return -1;
	*gbps = (double) n * len / (b_now() - t0) / 1e9;
	return served(x);
}

static void mark(int path, enum b_status status, int op0, int s0,
		 const char *note)
{
	for (int op = op0; op < NOPS; op++)
		for (int s = op == op0 ? s0 : 0; s < b_pr.nsizes; s++) {
			b_pr.res[path][op][s].status = status;
			snprintf(b_pr.res[path][op][s].note,
				 sizeof(b_pr.res[path][op][s].note), "%s", note);
		}
}

/* Can prov register CUDA memory at all? Without that its device copies
 * between processes are host copies, which fault on device memory. */
static int cuda_registers(const char *prov, char *buf, char *why,
			  size_t len)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct iovec iov = { buf, 1 };
	struct fi_mr_attr attr = {
		.mr_iov = &iov, .iov_count = 1, .access = FI_SEND | FI_RECV,
		.iface = FI_HMEM_CUDA,
	};
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_mr *mr;
	int ret;

	hints->caps = FI_MSG | FI_RMA | FI_HMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_HMEM;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		snprintf(why, len, "%s does not grant FI_HMEM here (%s)", prov,
			 fi_strerror(-ret));
		return -1;
	}
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (!ret)
		ret = fi_mr_regattr(domain, &attr, 0, &mr);
	if (!ret)
		fi_close(&mr->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	fi_freeinfo(info);
	if (ret)
		snprintf(why, len, "%s cannot register CUDA memory here (%s): "
			 "a libfabric without CUDA support, or whose CUDA "
			 "support did not start", prov, fi_strerror(-ret));
	return ret ? -1 : 0;
}

static int path_open(struct path *x, const char *prov, char *why,
		     size_t len)
{
	struct peer *b = &x->b;
	char name[512];
	CUipcMemHandle h;
	CUdeviceptr d;

	spawn(b, prov);
	if (b_hear(b->fd, b->line, sizeof(b->line), b_now() + B_CTL_TIMEOUT_S)) {
		snprintf(why, len, "B did not start: %s", b_ended(b->pid, true));
		b->pid = 0;
		return -1;
	}
	if (!strncmp(b->line, "skip ", 5) ||
	    sscanf(b->line, "hello %129s %1099s %llu %llu", b->ipc, b->name,
		   &b->key, &b->raddr) != 4) {
		snprintf(why, len, "%.150s", b->line);
		return 1;
	}
	if (x->driver) {
		if (b_opt.host) {
			snprintf(why, len, "--host: no device memory");
			return 1;
		}
		b_hex_get(&h, sizeof(h), b->ipc);
		if (b_cu_ok(cu.ipc_open(&d, h,
					CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
			    "cuIpcOpenMemHandle")) {
			snprintf(why, len, "%s", b_errmsg);
			return 1;
		}
		x->bptr = (char *) (uintptr_t) d;
		return 0;
	}
	if (b_side_open(&x->a, prov, b_opt.max_size)) {
		snprintf(why, len, "provider %s is not available here", prov);
		return 1;
	}
	b_hex_get(name, sizeof(name), b->name);
	x->a.peer = b_av_insert(&x->a.e, name);
	x->a.key = b->key;
	x->a.raddr = b->raddr;
	b_hex_put(b->line, x->a.e.name, x->a.e.namelen);
	if (ask(b, NULL, "peer %s", b->line)) {
		snprintf(why, len, "%s", b_errmsg);
		return -1;
	}
	return 0;
}

/* Every op and size of one path; B is started for it and ended after. */
static void run_path(int path, const char *prov, char *abuf, CUstream st)
{
	struct path x = { .a.buf = abuf, .driver = !strcmp(prov, B_DRIVER) };
	char why[320];
	int ret;

	if (!x.driver && !b_opt.host &&
	    cuda_registers(prov, abuf, why, sizeof(why))) {
		if (strcmp(prov, B_TCP)) {
			mark(path, P_UNAVAIL, 0, 0, why);
			return;
		}
		/* The NIC loopback's stand-in cannot touch device memory:
		 * its speed on host memory is the most it could give. */
		snprintf(b_pr.note[path], sizeof(b_pr.note[path]),
			 "host buffers: %s", why);
		b_pr.host[path] = b_opt.host = true;
		x.a.buf = b_buf_alloc(b_opt.max_size);
	}
	ret = path_open(&x, prov, why, sizeof(why));
	if (ret) {
		mark(path, ret > 0 ? P_UNAVAIL : P_FAILED, 0, 0, why);
		goto out;
	}
	for (int op = 0; op < NOPS; op++) {
		for (int s = 0; s < b_pr.nsizes; s++) {
			struct b_point *p = &b_pr.res[path][op][s];

			if (validate(&x, op, b_pr.sizes[s], st) ||
			    latency(&x, op, b_pr.sizes[s], st, &p->lat) ||
			    bandwidth(&x, op, b_pr.sizes[s], st, &p->gbps)) {
				snprintf(why, sizeof(why), "%s (B %s)",
					 b_errmsg, b_ended(x.b.pid, true));
				mark(path, P_FAILED, op, s, "not run: an "
				     "earlier point failed");
				p->status = P_FAILED;
				snprintf(p->note, sizeof(p->note), "%s", why);
				x.b.pid = 0;
				goto out;
			}
			p->status = P_OK;
		}
	}
out:
	if (x.bptr)
		cu.ipc_close((CUdeviceptr) (uintptr_t) x.bptr);
	b_side_close(&x.a);
	if (x.b.pid) {
		b_say(x.b.fd, "quit\n");
		b_ended(x.b.pid, false);
	}
	if (x.b.fd > 0)
		close(x.b.fd);
	if (b_pr.host[path] && !x.driver && x.a.buf != abuf) {
		b_buf_free(x.a.buf);
		b_opt.host = false;
	}
}

int b_peers_main(void)
{
	bool env;
	const char *hmem = b_setting("HMEMLOOP_HMEM", &env);
	const char **paths = b_pr.paths;
	int bad = 0;
	bool tcp = false;
	CUstream st = NULL;
	char why[256], *abuf;

	/* -p may repeat up to 8 times: room for tcp and the driver. */
	for (int i = 0; i < b_opt.nprovs; i++) {
		paths[b_pr.npaths++] = b_opt.provs[i];
		tcp |= !strcmp(b_opt.provs[i], B_TCP);
	}
	if (!b_pr.npaths)
		paths[b_pr.npaths++] = "shm";
	if (!tcp)
		paths[b_pr.npaths++] = B_TCP;
	paths[b_pr.npaths++] = B_DRIVER;
	for (int p = 0; p < b_pr.npaths - 1; p++)
		b_pr.host[p] = b_opt.host;
	for (size_t s = b_opt.min_size; s < b_opt.max_size &&
	     b_pr.nsizes < B_SIZES - 1; s *= 4)
		b_pr.sizes[b_pr.nsizes++] = s;
	b_pr.sizes[b_pr.nsizes++] = b_opt.max_size;
	if (!b_opt.host && b_cuda_open(why, sizeof(why))) {
		printf("SKIP: --peers: the CUDA driver: %s\n", why);
		return 77;
	}
	if (!b_opt.host && b_cu_ok(cu.stream_create(&st, CU_STREAM_NON_BLOCKING),
				   "cuStreamCreate"))
		b_die("%s", b_errmsg);
	/* A dead B is a note, not the end of the bench. */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("hmemloop-bench --peers: two processes on %s move %s memory\n",
	       b_opt.host ? "the host" : b_cuda_device(0),
	       b_opt.host ? "host" : "device");
	printf("hmemloop: %s; HMEMLOOP_HMEM=%s%s\n",
	       hml_config.enable ? "enabled" : "not enabled", hmem,
	       env ? "" : " (the default)");
	printf("the application's hints: FI_MR_HMEM, no FI_HMEM; buffers "
	       "registered as host memory\n");
	printf("lat: median of single operations (fi_send: half a ping-pong); "
	       "GB/s: %d in flight; %s: cuMemcpyAsync between A's buffer and "
	       "B's, opened through cuIpcOpenMemHandle\n", B_WINDOW, B_DRIVER);
	abuf = b_buf_alloc(b_opt.max_size);
	for (int p = 0; p < b_pr.npaths; p++)
		run_path(p, paths[p], abuf, st);
	b_buf_free(abuf);
	b_peers_report();
	if (b_opt.csv)
		b_peers_csv(b_opt.csv);
	for (int p = 0; p < b_pr.npaths; p++)
		for (int op = 0; op < NOPS; op++)
			for (int s = 0; s < b_pr.nsizes; s++)
				bad |= b_pr.res[p][op][s].status == P_FAILED;
	return bad;
}
