/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One engine per pair (issue 28, cases 1 and 2): host and device
 * operations mixed between two endpoints of one process keep the order
 * the endpoint grants, as the provider alone keeps it on host memory.
 *
 *   msg-untagged, msg-tagged: the receiver posts a host receive, then a
 *     device receive; the sender sends a host message, then a device one.
 *     The host message lands in the host receive, the device one in the
 *     device receive. (The provider, given the host message while
 *     hmemloop took the first receive back for the device one, matched
 *     the host message with the device receive and crashed in memcpy.)
 *   waw-order, waw-fence: a host write of a host region, then a device
 *     write of the same bytes, with FI_ORDER_WAW granted, or FI_FENCE on
 *     the second: the region holds the second write's bytes.
 *   raw-order, raw-fence: a host write, then a device read of the same
 *     bytes: the read sees the write.
 *
 * Device buffers come from t_mem_alloc: with -H they are host memory, and
 * the program is the provider's alone to run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN 256
#define TAG 0x77

struct two {
	struct t_fabric f;
	struct t_ep a, b;		/* a sends, writes, reads; b receives */
	fi_addr_t to_b;
};

/* Two endpoints, with msg_order order granted, or FI_FENCE where fence. */
static bool two_open(struct two *t, uint64_t order, bool fence)
{
	struct t_opts o = {
		.msg_order = order,
		.caps = FI_MSG | FI_TAGGED | FI_RMA | (fence ? FI_FENCE : 0),
	};

	if (t_try_open(&t->f, &o) == -FI_ENODATA)
		return false;
	if ((t->f.info->tx_attr->msg_order & order) != order) {
		t_close(&t->f);
		return false;
	}
	t_ep_open(&t->a, &t->f, &o);
	t_ep_open(&t->b, &t->f, &o);
	/* b is in an address vector of this process before it posts. */
	t->to_b = t_insert(&t->a, t->b.name);
	t_insert(&t->b, t->a.name);
	return true;
}

static void two_close(struct two *t)
{
	t_ep_close(&t->a);
	t_ep_close(&t->b);
	t_close(&t->f);
}

/* The next entry on cq is a success for ctx. */
static void next_is(struct fid_cq *cq, void *ctx, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &e, &err);

	t_assert(ret != -FI_EAGAIN, "%s: no completion", what);
	t_assert(ret == 0, "%s: error completion %d (%s)", what, err.err,
		 fi_strerror(err.err));
	t_assert(e.op_context == ctx, "%s: completion for %p, expected %p",
		 what, e.op_context, ctx);
}

/* ---- messages ------------------------------------------------------------ */

static ssize_t send_one(struct two *t, void *buf, void *desc, bool tagged,
			void *ctx)
{
	return tagged ? fi_tsend(t->a.ep, buf, LEN, desc, t->to_b, TAG, ctx) :
			fi_send(t->a.ep, buf, LEN, desc, t->to_b, ctx);
}

static void msg_mixed(bool tagged)
{
	const char *what = tagged ? "tagged: host, then device" :
				    "untagged: host, then device";
	char *hsrc = malloc(LEN), *hdst = calloc(1, LEN), *got = malloc(LEN);
	void *dsrc = t_mem_alloc(LEN), *ddst = t_mem_alloc(LEN);
	struct fi_context2 r1, r2, s1, s2;
	struct t_mr m[4];
	struct two t;

	t_assert(hsrc && hdst && got, "out of memory");
	if (!two_open(&t, 0, false))
		t_skip("provider %s is not available", t_prov);
	t_fill(hsrc, LEN, 1);
	t_fill(got, LEN, 2);
	t_mem_put(dsrc, got, LEN);
	memset(got, 0, LEN);
	t_mem_put(ddst, got, LEN);
	t_reg(&t.f, hsrc, LEN, FI_SEND, 1, &m[0]);
	t_reg(&t.f, dsrc, LEN, FI_SEND, 2, &m[1]);
	t_reg(&t.f, hdst, LEN, FI_RECV, 3, &m[2]);
	t_reg(&t.f, ddst, LEN, FI_RECV, 4, &m[3]);

	if (tagged) {
		t_fi(fi_trecv(t.b.ep, hdst, LEN, m[2].desc, FI_ADDR_UNSPEC,
			      TAG, 0, &r1));
		t_fi(fi_trecv(t.b.ep, ddst, LEN, m[3].desc, FI_ADDR_UNSPEC,
			      TAG, 0, &r2));
	} else {
		t_fi(fi_recv(t.b.ep, hdst, LEN, m[2].desc, FI_ADDR_UNSPEC,
			     &r1));
		t_fi(fi_recv(t.b.ep, ddst, LEN, m[3].desc, FI_ADDR_UNSPEC,
			     &r2));
	}
	t_post(t.a.cq, send_one(&t, hsrc, m[0].desc, tagged, &s1));
	t_post(t.a.cq, send_one(&t, dsrc, m[1].desc, tagged, &s2));

	next_is(t.b.cq, &r1, what);
	next_is(t.b.cq, &r2, what);
	t_expect(t.a.cq, &s1, FI_SEND, (size_t) -1);
	t_expect(t.a.cq, &s2, FI_SEND, (size_t) -1);
	t_assert(t_check(hdst, LEN, 1), "%s: the host receive does not hold "
		 "the host message", what);
	t_mem_get(got, ddst, LEN);
	t_assert(t_check(got, LEN, 2), "%s: the device receive does not hold "
		 "the device message", what);
	t_ok("%s: each message in the receive posted for it", what);

	for (int i = 0; i < 4; i++)
		t_fi(fi_close(&m[i].mr->fid));
	two_close(&t);
	t_mem_free(dsrc);
	t_mem_free(ddst);
	free(hsrc);
	free(hdst);
	free(got);
}

static void case_msg_untagged(void)
{
	msg_mixed(false);
}

static void case_msg_tagged(void)
{
	msg_mixed(true);
}

/* ---- RMA ----------------------------------------------------------------- */

/* A host write of region's bytes, then a device write (or read) of the
 * same bytes, ordered by msg_order or, where order is 0, by FI_FENCE. */
static void rma_mixed(bool read, uint64_t order)
{
	char what[96], *hsrc = malloc(LEN), *region = calloc(1, LEN);
	char *got = malloc(LEN);
	void *dev = t_mem_alloc(LEN);
	struct fi_context2 c1, c2;
	struct t_mr hm, dm, rm;
	struct two t;
	struct iovec iov = { dev, LEN };
	struct fi_rma_iov riov = { 0, LEN, 0 };
	struct fi_msg_rma msg = {
		.msg_iov = &iov, .iov_count = 1, .addr = 0,
		.rma_iov = &riov, .rma_iov_count = 1, .context = &c2,
	};

	snprintf(what, sizeof(what), "host write, then device %s, %s",
		 read ? "read" : "write", order ? "ordered" : "fenced");
	t_assert(hsrc && region && got, "out of memory");
	if (!two_open(&t, order, !order)) {
		t_case_skip("%s: %s does not grant it", what, t_prov);
		goto out;
	}
	t_fill(hsrc, LEN, 3);
	t_fill(got, LEN, 4);
	t_mem_put(dev, got, LEN);
	t_reg(&t.f, hsrc, LEN, FI_WRITE, 5, &hm);
	t_reg(&t.f, dev, LEN, read ? FI_READ : FI_WRITE, 6, &dm);
	t_reg(&t.f, region, LEN, FI_REMOTE_WRITE | FI_REMOTE_READ, 7, &rm);
	riov.addr = t_raddr(&t.f, &rm, 0);
	riov.key = rm.key;
	msg.desc = &dm.desc;
	msg.addr = t.to_b;

	t_post(t.a.cq, fi_write(t.a.ep, hsrc, LEN, hm.desc, t.to_b, riov.addr,
				rm.key, &c1));
	if (read)
		t_post(t.a.cq, fi_readmsg(t.a.ep, &msg, FI_COMPLETION |
					  (order ? 0 : FI_FENCE)));
	else
		t_post(t.a.cq, fi_writemsg(t.a.ep, &msg, FI_COMPLETION |
					   (order ? 0 : FI_FENCE)));
	next_is(t.a.cq, &c1, what);
	next_is(t.a.cq, &c2, what);
	if (read) {
		t_mem_get(got, dev, LEN);
		t_assert(t_check(got, LEN, 3), "%s: the read did not see the "
			 "write", what);
	} else {
		t_assert(t_check(region, LEN, 4), "%s: the region holds the "
			 "first write's bytes", what);
	}
	t_ok("%s: in order", what);

	t_fi(fi_close(&hm.mr->fid));
	t_fi(fi_close(&dm.mr->fid));
	t_fi(fi_close(&rm.mr->fid));
	two_close(&t);
out:
	t_mem_free(dev);
	free(hsrc);
	free(region);
	free(got);
}

static void case_waw_order(void)
{
	rma_mixed(false, FI_ORDER_WAW);
}

static void case_waw_fence(void)
{
	rma_mixed(false, 0);
}

static void case_raw_order(void)
{
	rma_mixed(true, FI_ORDER_RAW);
}

static void case_raw_fence(void)
{
	rma_mixed(true, 0);
}

static const struct t_case cases[] = {
	T_CASE("msg-untagged", case_msg_untagged),
	T_CASE("msg-tagged", case_msg_tagged),
	T_CASE("waw-order", case_waw_order),
	T_CASE("waw-fence", case_waw_fence),
	T_CASE("raw-order", case_raw_order),
	T_CASE("raw-fence", case_raw_fence),
};

T_MAIN(cases, .flags = T_CUDA | T_HOST);
