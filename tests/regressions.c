/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Regressions: shapes of an application that libfabric allows and the shim
 * once tripped on, each with a same-process device message:
 *   crowd     many endpoints on one CQ and one AV, a message to the last;
 *   nulladdr  the target inserted with fi_addr NULL (FI_AV_TABLE), its
 *             receive posted after that, the message sent to index 0;
 *   ctxdup    a receive and a send of one endpoint with the same context,
 *             the send completing first;
 *   inject    injects of device memory over inject_size: -FI_EINVAL, as
 *             the provider refuses them, and nothing written.
 */
#include <stdio.h>
#include <string.h>

#include "hmltest.h"

#define LEN 8192
#define CROWD 12

static struct t_fabric f;
static void *src, *dst;
static struct t_mr ms, md;
static char host[LEN];

/* Fresh bytes in the source, zeros in the destination. */
static void load(unsigned seed)
{
	t_fill(host, LEN, seed);
	t_dev_put(src, host, LEN);
	memset(host, 0, LEN);
	t_dev_put(dst, host, LEN);
}

static void landed(unsigned seed, const char *what)
{
	t_dev_get(host, dst, LEN);
	t_assert(t_check(host, LEN, seed), "%s: wrong bytes in the receive",
		 what);
}

/* A send's and a receive's entries on one CQ, in either order. */
static void both(struct fid_cq *cq, void *sctx, void *rctx)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	bool sent = false, got = false;

	while (!sent || !got) {
		int ret = t_wait(cq, &e, &err);

		t_assert(ret != 1, "error entry: %s", fi_strerror(err.err));
		t_assert(ret == 0, "crowd: an entry is missing");
		if (e.op_context == sctx && !sent && (e.flags & FI_SEND))
			sent = true;
		else if (e.op_context == rctx && !got && (e.flags & FI_RECV) &&
			 e.len == LEN)
			got = true;
		else
			t_fail("crowd: unexpected entry, context %p",
			       e.op_context);
	}
}

static void crowd(void)
{
	struct t_ep ep[CROWD];
	fi_addr_t addr[CROWD];
	struct fid_cq *cq;
	struct fi_context2 sctx, rctx;

	t_ep_open(&ep[0], &f, NULL);
	cq = ep[0].cq;
	for (int i = 1; i < CROWD; i++)
		t_ep_open(&ep[i], &f, &(struct t_opts) { .cq = cq,
							  .av = ep[0].av });
	for (int i = 0; i < CROWD; i++)
		addr[i] = t_insert(&ep[0], ep[i].name);
	load(11);
	t_post(cq, fi_recv(ep[CROWD - 1].ep, dst, LEN, md.desc, FI_ADDR_UNSPEC,
			   &rctx));
	t_post(cq, fi_send(ep[0].ep, src, LEN, ms.desc, addr[CROWD - 1],
			   &sctx));
	both(cq, &sctx, &rctx);
	landed(11, "crowd");
	t_assert(t_quiet(cq, 10), "crowd: an entry too many");
	for (int i = CROWD; i-- > 0;)
		t_ep_close(&ep[i]);
	t_ok("%d endpoints on one CQ and AV: a device message to the last",
	     CROWD);
}

static void nulladdr(void)
{
	struct t_ep a, b;
	struct fi_context2 sctx, rctx;

	/* Its fi_av_lookup fails for the first address of an AV, and with
	 * fi_addr NULL the shim has no other way to learn its index. */
	if (!strcmp(t_prov, "udp;ofi_rxd")) {
		printf("note: nulladdr not run: udp;ofi_rxd 1.17 cannot look "
		       "up the first address inserted (README, Limits)\n");
		return;
	}
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	t_assert(fi_av_insert(a.av, b.name, 1, NULL, 0, NULL) == 1,
		 "fi_av_insert with fi_addr NULL");
	load(12);
	t_post(b.cq, fi_recv(b.ep, dst, LEN, md.desc, FI_ADDR_UNSPEC, &rctx));
	t_post(a.cq, fi_send(a.ep, src, LEN, ms.desc, 0, &sctx));
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	t_expect(b.cq, &rctx, FI_RECV, LEN);
	landed(12, "nulladdr");
	t_ep_close(&a);
	t_ep_close(&b);
	t_ok("target inserted with fi_addr NULL: a device message to it");
}

static void ctxdup(void)
{
	static char hsend[LEN], hrecv[LEN];
	struct t_mr mhs, mhr;
	struct t_ep a, b;
	fi_addr_t ab, ba;
	struct fi_context2 same, other, third;

	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	t_reg(&f, hsend, LEN, FI_SEND, 3, &mhs);
	t_reg(&f, hrecv, LEN, FI_RECV, 4, &mhr);
	ab = t_insert(&a, b.name);
	ba = t_insert(&b, a.name);
	load(13);
	t_post(a.cq, fi_recv(a.ep, hrecv, LEN, mhr.desc, FI_ADDR_UNSPEC,
			     &other));
	t_post(b.cq, fi_recv(b.ep, dst, LEN, md.desc, FI_ADDR_UNSPEC, &same));
	/* Host memory both ways: the provider carries it. */
	t_post(b.cq, fi_send(b.ep, hsend, LEN, mhs.desc, ba, &same));
	t_expect(b.cq, &same, FI_SEND, (size_t) -1);
	t_expect(a.cq, &other, FI_RECV, LEN);
	t_post(a.cq, fi_send(a.ep, src, LEN, ms.desc, ab, &third));
	t_expect(a.cq, &third, FI_SEND, (size_t) -1);
	t_expect(b.cq, &same, FI_RECV, LEN);
	landed(13, "ctxdup");
	t_fi(fi_close(&mhs.mr->fid));
	t_fi(fi_close(&mhr.mr->fid));
	t_ep_close(&a);
	t_ep_close(&b);
	t_ok("a send with its endpoint's receive's context: the receive "
	     "still takes a device message");
}

static void inject(void)
{
	struct t_ep a, b;
	size_t over;
	fi_addr_t ab;

	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	ab = t_insert(&a, b.name);
	over = f.info->tx_attr->inject_size + 1;
	if (over > LEN) {
		printf("note: inject not run: inject_size %zu is not below "
		       "%d\n", over - 1, LEN);
		goto out;
	}
	load(14);
	t_assert(fi_inject_write(a.ep, src, over, ab, t_raddr(&f, &md, 0),
				 md.key) == -FI_EINVAL,
		 "fi_inject_write over inject_size: not -FI_EINVAL");
	t_assert(fi_inject(a.ep, src, over, ab) == -FI_EINVAL,
		 "fi_inject over inject_size: not -FI_EINVAL");
	t_assert(t_quiet(a.cq, 10) && t_quiet(b.cq, 10),
		 "a refused inject completed");
	t_dev_get(host, dst, LEN);
	for (size_t i = 0; i < LEN; i++)
		t_assert(!host[i], "byte %zu of the target written", i);
	t_ok("fi_inject_write and fi_inject of %zu device bytes (inject_size "
	     "+ 1): -FI_EINVAL, nothing written", over);
out:
	t_ep_close(&a);
	t_ep_close(&b);
}

static const struct t_case cases[] = {
	T_CASE("crowd", crowd),
	T_CASE("nulladdr", nulladdr),
	T_CASE("ctxdup", ctxdup),
	T_CASE("inject", inject),
};

static void setup(void)
{
	t_open(&f, NULL);
	src = t_dev_alloc(LEN);
	dst = t_dev_alloc(LEN);
	t_reg(&f, src, LEN, FI_SEND | FI_RECV, 1, &ms);
	t_reg(&f, dst, LEN, FI_SEND | FI_RECV, 2, &md);
}

static void teardown(void)
{
	t_fi(fi_close(&ms.mr->fid));
	t_fi(fi_close(&md.mr->fid));
	t_close(&f);
}

T_MAIN(cases, .flags = T_CUDA, .setup = setup, .teardown = teardown);
