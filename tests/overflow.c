/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Buffer lengths that wrap past 2^64: an iov of 2^64 - 4032 bytes and one
 * of 4096 add up to 64. A same-process fi_writev, fi_readv, fi_sendv or
 * fi_tsendv of them must be refused with -FI_EINVAL, with nothing written
 * and nothing completed, not carried out as a 64-byte transfer. Run on
 * device memory, and through hmemloop again on host memory (the case
 * "host", in a process of its own).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN	8192
#define HUGE	((size_t) 0 - 4032)	/* + 4096 wraps to 64 */

static bool host;

static void *mem_alloc(void)
{
	void *p;

	if (!host)
		return t_dev_alloc(LEN);
	t_assert(!posix_memalign(&p, 4096, LEN), "posix_memalign");
	return p;
}

static void put(void *dst, unsigned seed)
{
	char buf[LEN];

	t_fill(buf, LEN, seed);
	if (host)
		memcpy(dst, buf, LEN);
	else
		t_dev_put(dst, buf, LEN);
}

static void expect(const void *mem, unsigned seed, const char *what)
{
	char buf[LEN];

	if (host)
		memcpy(buf, mem, LEN);
	else
		t_dev_get(buf, mem, LEN);
	t_assert(t_check(buf, LEN, seed), "%s: bytes changed", what);
}

static void refused(ssize_t ret, struct t_ep *a, struct t_ep *b,
		    const char *what)
{
	t_assert(ret == -FI_EINVAL, "%s: %zd (%s), expected -FI_EINVAL", what,
		 ret, fi_strerror((int) -ret));
	t_assert(t_quiet(a->cq, 200) && t_quiet(b->cq, 200),
		 "%s: refused, yet something completed", what);
	t_ok("%s: -FI_EINVAL, nothing completed", what);
}

static void run(void)
{
	struct t_fabric f;
	struct t_ep a, b;
	struct t_mr ma, mb;
	struct iovec iov[2];
	void *desc[2];
	char *src, *dst;
	fi_addr_t to_b;
	int rctx, sctx;

	t_open(&f, NULL);
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	to_b = t_insert(&a, b.name);
	t_insert(&b, a.name);
	src = mem_alloc();
	dst = mem_alloc();
	put(src, 1);
	put(dst, 2);
	t_reg(&f, src, LEN, FI_READ | FI_WRITE | FI_SEND | FI_RECV, 1, &ma);
	t_reg(&f, dst, LEN, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND |
	      FI_RECV, 2, &mb);
	iov[0] = (struct iovec) { src, HUGE };
	iov[1] = (struct iovec) { src + 4096, 4096 };
	desc[0] = desc[1] = ma.desc;

	refused(fi_writev(a.ep, iov, desc, 2, to_b, t_raddr(&f, &mb, 0),
			  mb.key, &sctx), &a, &b, "fi_writev");
	expect(dst, 2, "fi_writev: target");
	refused(fi_readv(a.ep, iov, desc, 2, to_b, t_raddr(&f, &mb, 0),
			 mb.key, &sctx), &a, &b, "fi_readv");
	expect(src, 1, "fi_readv: destination");

	/* The receive a refused send would have taken stays posted. */
	t_fi(fi_recv(b.ep, dst, LEN, mb.desc, FI_ADDR_UNSPEC, &rctx));
	refused(fi_sendv(a.ep, iov, desc, 2, to_b, &sctx), &a, &b, "fi_sendv");
	refused(fi_tsendv(a.ep, iov, desc, 2, to_b, 5, &sctx), &a, &b,
		"fi_tsendv");
	expect(dst, 2, "fi_sendv: receive buffer");
	t_post(a.cq, fi_send(a.ep, src, 64, ma.desc, to_b, &sctx));
	t_expect(a.cq, &sctx, FI_SEND, 64);
	t_expect(b.cq, &rctx, FI_RECV, 64);
	t_ok("a good send after them lands in the receive");

	t_fi(fi_close(&ma.mr->fid));
	t_fi(fi_close(&mb.mr->fid));
	t_ep_close(&a);
	t_ep_close(&b);
	t_close(&f);
}

static void on_device(void)
{
	t_cuda_init();
	run();
}

/* Host memory between endpoints of this process: hmemloop's too. */
static void on_host(void)
{
	host = true;
	run();
}

static const struct t_case cases[] = {
	T_CASE("device", on_device),
	{ .name = "host", .run = on_host, .need = T_NEED_SHIM, .fresh = true },
};

T_MAIN(cases);
