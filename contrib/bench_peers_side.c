/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-bench --peers: what both processes do (the control channel,
 * buffers, the fabric), and B, the target, which A (bench_peers.c) starts
 * as "--peers-child PROV" and drives over a socket on its stdin and
 * stdout; bench_peers.c's top comment lists the commands.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "bench_peers.h"

/* ---- the control channel's hex ---- */

void b_hex_put(char *out, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *) p)[i]);
	if (!n)
		strcpy(out, "-");
}

size_t b_hex_get(void *p, size_t max, const char *hex)
{
	size_t n;

	for (n = 0; n < max && hex[2 * n] && hex[2 * n + 1]; n++)
		sscanf(hex + 2 * n, "%2hhx", (unsigned char *) p + n);
	return n;
}

/* ---- buffers ---- */

char *b_buf_alloc(size_t len)
{
	CUdeviceptr d;
	void *p;

	if (b_opt.host) {
		if (posix_memalign(&p, 4096, len))
			b_die("out of memory");
		return p;
	}
	if (b_cu_ok(cu.mem_alloc(&d, len), "cuMemAlloc"))
		b_die("%s", b_errmsg);
	return (char *) (uintptr_t) d;
}

void b_buf_free(char *buf)
{
	if (b_opt.host)
		free(buf);
	else
		cu.mem_free((CUdeviceptr) (uintptr_t) buf);
}

int b_fill(char *buf, int v, size_t len)
{
	if (b_opt.host) {
		memset(buf, v, len);
		return 0;
	}
	return b_cu_ok(cu.memset_d8((CUdeviceptr) (uintptr_t) buf,
				    (unsigned char) v, len), "cuMemsetD8") ||
	       b_cu_ok(cu.ctx_sync(), "cuCtxSynchronize") ? -1 : 0;
}

bool b_holds(const char *buf, int v, size_t len)
{
	static char *h;
	static size_t hlen;
	bool ok = true;

	if (!b_opt.host) {
		if (hlen < len) {
			free(h);
			h = malloc(len);
			hlen = h ? len : 0;
		}
		if (!h || b_cu_ok(cu.memcpy((CUdeviceptr) (uintptr_t) h,
					    (CUdeviceptr) (uintptr_t) buf,
					    len), "cuMemcpy"))
			return false;
		buf = h;
	}
	for (size_t i = 0; i < len && ok; i++)
		ok = buf[i] == (char) v;
	return ok;
}

/* ---- both sides ---- */

static struct fi_context ctxs[4 * B_WINDOW];
static unsigned next_ctx;

void *b_ctx(void)
{
	return &ctxs[next_ctx++ % (4 * B_WINDOW)];
}

int b_post_recv(struct side *s, char *buf, struct fid_mr *mr, size_t len)
{
	ssize_t ret;

	B_POST(ret, fi_recv(s->e.ep, buf, len, fi_mr_desc(mr), FI_ADDR_UNSPEC,
			    b_ctx()));
	return b_post_failed(ret, "fi_recv");
}

int b_post_send(struct side *s, char *buf, struct fid_mr *mr, size_t len)
{
	ssize_t ret;

	B_POST(ret, fi_send(s->e.ep, buf, len, fi_mr_desc(mr), s->peer, b_ctx()));
	return b_post_failed(ret, "fi_send");
}

/* The fabric, as issue 12328's application opens it. */
int b_side_open(struct side *s, const char *prov, size_t len)
{
	int ret;

	b_opt.mr_hmem = true;
	ret = b_fab_open(&s->fab, prov);
	if (ret)
		return ret;
	s->fabric = true;
	b_ep_open(&s->e, &s->fab);
	s->mr = b_mr_reg(&s->fab, s->buf, len, 1, -1);
	s->ack = calloc(1, 64);
	if (!s->ack)
		b_die("out of memory");
	s->ack_mr = b_mr_reg(&s->fab, s->ack, 64, 2, -1);
	return 0;
}

void b_side_close(struct side *s)
{
	if (!s->fabric)
		return;
	b_mr_close(s->mr);
	b_mr_close(s->ack_mr);
	b_ep_close(&s->e);
	b_fab_close(&s->fab);
	free(s->ack);
	s->fabric = false;
}

/* ---- B ---- */

static bool stop_asked(void)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	char line[64];

	return poll(&p, 1, 0) == 1 &&
	       (b_hear(0, line, sizeof(line), b_now() + B_CTL_TIMEOUT_S) ||
		!strcmp(line, "stop"));
}

struct serving {
	size_t len;
	long n, posted, got;
	bool pong, acked;
};

/* Keep B_WINDOW receives posted, answer what came: 0 or -1. */
static int serve_step(struct side *s, struct serving *v)
{
	long k;

	/* A ping-pong has one message in flight: one receive posted. */
	while (v->posted < v->n &&
	       v->posted - v->got < (v->pong ? 1 : B_WINDOW)) {
		if (b_post_recv(s, s->buf, s->mr, v->len))
			return -1;
		v->posted++;
	}
	k = v->n ? b_cq_poll(s->e.rx, B_WINDOW) : 0;
	if (k < 0)
		return -1;
	for (; k > 0; k--, v->got++)
		if (v->pong && (b_post_send(s, s->buf, s->mr, v->len) ||
				b_cq_wait(s->e.tx, 1)))
			return -1;
	if (!v->acked && v->got == v->n) {
		v->acked = true;
		return b_post_send(s, s->ack, s->ack_mr, 1) ||
		       b_cq_wait(s->e.tx, 1) ? -1 : 0;
	}
	return 0;
}

/* Until A says stop; a failure is told then. */
static void serve(struct side *s, size_t len, long n, bool pong)
{
	struct serving v = { .len = len, .n = n, .pong = pong,
			     .acked = !n || pong };
	int ret = 0;

	b_say(1, "serving\n");
	for (unsigned spin = 1;; spin++) {
		if (!ret)
			ret = serve_step(s, &v);
		b_progress();
		if (!(spin % 256) && stop_asked())
			break;
	}
	if (ret)
		b_say(1, "fail %s\n", b_errmsg);
	else
		b_say(1, "done\n");
}

/* The bytes A wrote, once they are here: a provider may complete the
 * write at A before it places them (tcp's transmit completion), so B
 * progresses and looks again, for a while. */
static bool arrived(const char *buf, int v, size_t len)
{
	double end = b_now() + 5;

	while (!b_holds(buf, v, len)) {
		if (b_now() > end)
			return false;
		b_progress();
	}
	return true;
}

static void child_command(struct side *s, char *line)
{
	char hex[1100], name[512];
	size_t len;
	long n;
	int v, pong;

	if (sscanf(line, "peer %1099s", hex) == 1) {
		b_hex_get(name, sizeof(name), hex);
		s->peer = b_av_insert(&s->e, name);
		b_say(1, "ok\n");
	} else if (sscanf(line, "fill %d %zu", &v, &len) == 2) {
		b_say(1, b_fill(s->buf, v, len) ? "fail %s\n" : "ok\n", b_errmsg);
	} else if (sscanf(line, "check %d %zu", &v, &len) == 2) {
		b_say(1, arrived(s->buf, v, len) ? "ok\n" : "bad\n");
	} else if (sscanf(line, "serve %zu %ld %d", &len, &n, &pong) == 3) {
		serve(s, len, n, pong);
	} else {
		b_die("B: unknown command '%s'", line);
	}
}

int b_peers_child(void)
{
	const char *prov = b_opt.peers_child;
	char why[256], line[1200], ipc[2 * sizeof(CUipcMemHandle) + 2];
	char name[2 * sizeof(((struct b_ep *) 0)->name) + 2];
	CUipcMemHandle h;
	struct side s = { 0 };

	if (!b_opt.host && b_cuda_open(why, sizeof(why))) {
		b_say(1, "skip the CUDA driver: %s\n", why);
		return 0;
	}
	s.buf = b_buf_alloc(b_opt.max_size);
	b_hex_put(ipc, NULL, 0);
	if (!b_opt.host &&
	    !b_cu_ok(cu.ipc_get(&h, (CUdeviceptr) (uintptr_t) s.buf),
		     "cuIpcGetMemHandle"))
		b_hex_put(ipc, &h, sizeof(h));
	b_hex_put(name, NULL, 0);
	if (strcmp(prov, B_DRIVER)) {
		if (b_side_open(&s, prov, b_opt.max_size)) {
			b_say(1, "skip provider %s is not available here\n", prov);
			return 0;
		}
		b_hex_put(name, s.e.name, s.e.namelen);
	}
	b_say(1, "hello %s %s %llu %llu\n", ipc, name,
	      (unsigned long long) (s.fabric ? fi_mr_key(s.mr) : 0),
	      (unsigned long long) (s.fabric ? b_raddr(&s.fab, s.buf) : 0));
	while (!b_hear(0, line, sizeof(line), b_now() + 24 * 3600) &&
	       strcmp(line, "quit"))
		child_command(&s, line);
	b_side_close(&s);
	b_buf_free(s.buf);
	return 0;
}

