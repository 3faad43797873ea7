/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A scripted run for tests/stats, through the wrapper with HMEMLOOP_STATS
 * set. Endpoints a, b and c of this process; c forbids CUDA calls.
 *   fi_write a to b, device to device, 4096 bytes, from a thread that
 *     ends before the process does (its counts must stay)
 *   fi_write a to b, host to device, 100 bytes
 *   fi_read a from b, device to host, 200 bytes
 *   fi_write a to b, host to host, 300 bytes (done here: one engine per
 *     pair)
 *   fi_write a to b, device to device, to a key no region has (FI_EINVAL)
 *   fi_write c to b, host to host (passed: CUDA forbidden)
 *   fi_send a to b, device to device, 1000 bytes, to a receive posted
 *     first (held where the data progress is manual, else taken back)
 *   fi_tsend a to b, host, 500 bytes, before any receive (staged), then
 *     fi_trecv on b into device memory
 *   fi_send a to b, host to host, 50 bytes, to a posted receive (held
 *     or taken back)
 *   fi_send a to b, device, 20 bytes, to a posted receive of 10 (held or
 *     taken back, FI_ETRUNC)
 *   with -r NAME: fi_send a to the endpoint NAME (hex) of another process,
 *     host memory, 8 bytes (passed: not this process)
 * then everything closed, and a fork whose child exits at once: its report
 * must be its own, empty. Printed: the process id, the data progress
 * granted ("manual" or "auto"), and the number of
 * calls each passed operation took (each -FI_EAGAIN of the provider's is
 * a call passed).
 * With -s: the other process, which prints its address in hex and takes
 * one message.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN 4096
#define OPT_CUDA_API_PERMITTED 10
#define RIGHTS (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | \
		FI_REMOTE_WRITE)

static struct t_fabric f;
static struct t_ep a, b, c;
static fi_addr_t ab, cb;
static void *dev1, *dev2;
static char host[LEN], host2[LEN];
static struct t_mr d1, d2, h1, h2;

/* An RMA of ep to b, completed; the number of calls it took. */
static int rma(struct t_ep *ep, fi_addr_t to, bool read, void *buf,
	       size_t len, struct t_mr *mine, struct t_mr *theirs,
	       uint64_t key, int fails)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err = { 0 };
	int ctx, ret, calls = 0;
	ssize_t r;

	do {
		if (calls++)
			t_drive(ep->cq);
		r = read ? fi_read(ep->ep, buf, len, mine->desc, to,
				   t_raddr(&f, theirs, 0), key, &ctx) :
			   fi_write(ep->ep, buf, len, mine->desc, to,
				    t_raddr(&f, theirs, 0), key, &ctx);
	} while (r == -FI_EAGAIN);
	t_fi(r);
	if (!fails) {
		t_expect(ep->cq, &ctx, FI_RMA, (size_t) -1);
		return calls;
	}
	ret = t_wait(ep->cq, &ent, &err);
	t_assert(ret == 1 && err.err == fails,
		 "an RMA to key %#lx: %d, error %d", (unsigned long) key, ret,
		 err.err);
	return calls;
}

/* A send from a, tagged or not; the number of calls it took. */
static int send(struct t_ep *ep, fi_addr_t to, bool tagged, void *buf,
		size_t len, void *desc, void *ctx)
{
	int calls = 0;
	ssize_t r;

	do {
		if (calls++)
			t_drive(ep->cq);
		r = tagged ? fi_tsend(ep->ep, buf, len, desc, to, 7, ctx) :
			     fi_send(ep->ep, buf, len, desc, to, ctx);
	} while (r == -FI_EAGAIN);
	t_fi(r);
	return calls;
}

static void recv(bool tagged, void *buf, size_t len, void *desc, void *ctx)
{
	t_post(b.cq, tagged ? fi_trecv(b.ep, buf, len, desc, FI_ADDR_UNSPEC,
				       7, 0, ctx) :
			      fi_recv(b.ep, buf, len, desc, FI_ADDR_UNSPEC,
				      ctx));
}

/* The other process: its address on stdout, then one message. */
static int serve(void)
{
	int ctx;

	t_open(&f, NULL);
	t_ep_open(&b, &f, NULL);
	t_reg(&f, host, LEN, RIGHTS, 3, &h1);
	recv(false, host, LEN, h1.desc, &ctx);
	for (size_t i = 0; i < b.namelen; i++)
		printf("%02x", (unsigned char) b.name[i]);
	printf("\n");
	fflush(stdout);
	t_expect(b.cq, &ctx, FI_RECV, 8);
	t_fi(fi_close(&h1.mr->fid));
	t_ep_close(&b);
	t_close(&f);
	return 0;
}

/* A message to the other process, whose address is hex. */
static int remote(const char *hex)
{
	static char name[256];
	fi_addr_t to;
	int ctx, calls;

	for (size_t i = 0; i < sizeof(name) && sscanf(hex + 2 * i, "%2hhx",
						      &name[i]) == 1; i++)
		;
	to = t_insert(&a, name);
	calls = send(&a, to, false, host, 8, h1.desc, &ctx);
	t_expect(a.cq, &ctx, FI_SEND, (size_t) -1);
	return calls;
}

static void *thread_write(void *arg)
{
	(void) arg;
	rma(&a, ab, false, dev1, LEN, &d1, &d2, d2.key, 0);
	return NULL;
}

static void rma_part(void)
{
	pthread_t th;
	bool no = false;

	t_assert(!pthread_create(&th, NULL, thread_write, NULL) &&
		 !pthread_join(th, NULL), "a thread");
	rma(&a, ab, false, host, 100, &h1, &d2, d2.key, 0);
	rma(&a, ab, true, host, 200, &h1, &d2, d2.key, 0);
	rma(&a, ab, false, host, 300, &h1, &h2, h2.key, 0);
	rma(&a, ab, false, dev1, 10, &d1, &d2, 0x7e57, FI_EINVAL);
	fi_setopt(&c.ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &no,
		  sizeof(no));
	printf("forbidden calls: %d\n",
	       rma(&c, cb, false, host, 30, &h1, &h2, h2.key, 0));
}

static void msg_part(void)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err = { 0 };
	int sctx, rctx, ret;

	recv(false, dev2, LEN, d2.desc, &rctx);
	send(&a, ab, false, dev1, 1000, d1.desc, &sctx);
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	t_expect(b.cq, &rctx, FI_RECV, 1000);

	send(&a, ab, true, host, 500, h1.desc, &sctx);
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	recv(true, dev2, LEN, d2.desc, &rctx);
	t_expect(b.cq, &rctx, FI_RECV | FI_TAGGED, 500);

	recv(false, host2, LEN, h2.desc, &rctx);
	send(&a, ab, false, host, 50, h1.desc, &sctx);
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	t_expect(b.cq, &rctx, FI_RECV, 50);

	recv(false, dev2, 10, d2.desc, &rctx);
	send(&a, ab, false, dev1, 20, d1.desc, &sctx);
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	ret = t_wait(b.cq, &ent, &err);
	t_assert(ret == 1 && err.err == FI_ETRUNC && err.op_context == &rctx,
		 "a receive of 10 of 20 bytes: %d, error %d", ret, err.err);
}

/* -s serves, -r PEER calls a server. */
static bool serving;
static const char *peer;

static void opt(int c, const char *arg)
{
	if (c == 's')
		serving = true;
	else
		peer = arg;
}

/* Its own run, not a case: tests/stats reads its output. */
static void script(void)
{
	pid_t child;
	int st;

	if (serving)
		exit(serve());
	printf("pid: %d\n", (int) getpid());
	t_cuda_init();
	dev1 = t_dev_alloc(LEN);
	dev2 = t_dev_alloc(LEN);
	t_open(&f, NULL);
	printf("progress: %s\n", f.info->domain_attr->data_progress ==
	       FI_PROGRESS_MANUAL ? "manual" : "auto");
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	t_ep_open(&c, &f, NULL);
	ab = t_insert(&a, b.name);
	cb = t_insert(&c, b.name);
	t_reg(&f, dev1, LEN, RIGHTS, 1, &d1);
	t_reg(&f, dev2, LEN, RIGHTS, 2, &d2);
	t_reg(&f, host, LEN, RIGHTS, 3, &h1);
	t_reg(&f, host2, LEN, RIGHTS, 4, &h2);
	rma_part();
	msg_part();
	if (peer)
		printf("remote calls: %d\n", remote(peer));
	t_ok("the scripted operations");
	t_fi(fi_close(&d1.mr->fid));
	t_fi(fi_close(&d2.mr->fid));
	t_fi(fi_close(&h1.mr->fid));
	t_fi(fi_close(&h2.mr->fid));
	t_ep_close(&a);
	t_ep_close(&b);
	t_ep_close(&c);
	t_close(&f);
	t_dev_free(dev1);
	t_dev_free(dev2);

	fflush(stdout);
	child = fork();
	if (!child)
		exit(0);
	t_assert(child > 0 && waitpid(child, &st, 0) == child && !st,
		 "fork: the child failed");
}

static const struct t_case cases[] = {
	T_CASE("script", script),
};

T_MAIN(cases, .opts = "r:s", .opt = opt, .run = script);
