/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What hmemloop keeps must stay bounded, and stay right, while the
 * application's objects come and go (issues 14 and 15):
 *
 *   cqfull  writes to this process whose CQ is never read (the writer's,
 *           or with remote CQ data the target's): the writer is pushed
 *           back with -FI_EAGAIN, a refused write writes nothing, and
 *           every accepted one completes once when the CQs are read;
 *           sends to posted receives too
 *   churn   (insert, write, remove) cycles, with an endpoint opened and
 *           closed now and then: the process does not grow
 *   stale   A1 sends to B and is closed without fi_av_remove, then A2
 *           sends, and so on: B sees each one's address as the source,
 *           and a receive directed at it takes the message
 *
 * By default on device memory: without hmemloop the provider touches it
 * and the run fails. With -H on host memory. Either way it traces what it
 * sees (t_trace_on), and the harness (kind diff) compares the traces of
 * device memory and of host memory through hmemloop with the provider alone's on host memory. Where each stops taking
 * writes or sends is not compared: hmemloop bounds what it keeps by the
 * CQ's size on purpose (README), the provider by queues of its own; and
 * churn's growth is the process's, each run its own. "-c NAME,..." runs
 * only those.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN		256
#define CQ_SIZE		64
#define MAXW		100000		/* writes before cqfull gives up */
#define NRECV		200		/* receives cqfull's sends go to */
#define CYCLES		9000
#define WARM		2000		/* cycles before churn's first sample */
#define ROUNDS		8		/* senders of stale */
/* What churn tolerates, in bytes: a 32-byte allocation a cycle would be
 * 224 KiB. */
#define GROWTH		(64 << 10)

static uint8_t scratch[2 * LEN];

static bool holds(const char *p, size_t n, unsigned seed)
{
	t_mem_get(scratch, p, n);
	return t_check(scratch, n, seed);
}

/* An RMA write's completion may come before its bytes are at the target
 * (tcp;ofi_rxm): drive progress until they are. */
static bool landed(struct fid_cq *cq, const char *p, size_t n, unsigned seed)
{
	double end = t_now() + t_wait_s();

	while (!holds(p, n, seed)) {
		if (t_now() > end)
			return false;
		t_drive(cq);
	}
	return true;
}

static void load(char *p, size_t n, unsigned seed)
{
	t_fill(scratch, n, seed);
	t_mem_put(p, scratch, n);
}

/* Two endpoints, a source region at A and a destination at B. */
struct rig {
	struct t_fabric f;
	struct t_ep a, b;
	struct t_mr smr, dmr;
	char *src, *dst;
};

static void rig_open(struct rig *r, size_t a_cq, size_t b_cq)
{
	r->src = t_mem_alloc(2 * LEN);
	r->dst = t_mem_alloc(2 * LEN);
	t_open(&r->f, &(struct t_opts) { .caps = FI_RMA | FI_MSG });
	t_ep_open(&r->a, &r->f, &(struct t_opts) { .cq_size = a_cq });
	t_ep_open(&r->b, &r->f, &(struct t_opts) { .cq_size = b_cq });
	t_reg(&r->f, r->src, 2 * LEN, FI_WRITE | FI_SEND, 1, &r->smr);
	t_reg(&r->f, r->dst, 2 * LEN, FI_REMOTE_WRITE | FI_RECV, 2, &r->dmr);
	t_name_buf(r->src, 2 * LEN, "src");
	t_name_buf(r->dst, 2 * LEN, "dst");
}

static void rig_close(struct rig *r)
{
	t_fi(fi_close(&r->smr.mr->fid));
	t_fi(fi_close(&r->dmr.mr->fid));
	t_ep_close(&r->a);
	t_ep_close(&r->b);
	t_close(&r->f);
	t_mem_free(r->src);
	t_mem_free(r->dst);
}

/* ---- cqfull ----------------------------------------------------------- */

/* A write from slot of the source to the same slot at B; with remote CQ
 * data (its context's address) where data. */
static ssize_t write_slot(struct rig *r, fi_addr_t to, int slot, bool data,
			  void *ctx)
{
	uint64_t addr = t_raddr(&r->f, &r->dmr, slot * LEN);
	char *buf = r->src + slot * LEN;

	if (data)
		return fi_writedata(r->a.ep, buf, LEN, r->smr.desc,
				    (uintptr_t) ctx, to, addr, r->dmr.key, ctx);
	return fi_write(r->a.ep, buf, LEN, r->smr.desc, to, addr, r->dmr.key,
			ctx);
}

/* Each of the n entries cq gives, once each, in ctx[0..n). */
static void drain(struct fid_cq *cq, int *ctx, int n, bool data,
		  const char *what)
{
	bool *seen = calloc(n, 1);
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret, id;

	t_assert(seen, "out of memory");
	for (int i = 0; i < n; i++) {
		ret = t_wait(cq, &ent, &err);
		t_assert(ret >= 0, "%s: %d of %d completed", what, i, n);
		t_assert(!ret, "%s: error completion %d (%s)", what, err.err,
			 fi_strerror(err.err));
		id = (data ? (int *) (uintptr_t) ent.data :
			     (int *) ent.op_context) - ctx;
		t_assert(id >= 0 && id < n && !seen[id], "%s: entry %d: "
			 "context %p data %#lx", what, i, ent.op_context,
			 (unsigned long) ent.data);
		seen[id] = true;
	}
	t_assert(t_quiet(cq, 50), "%s: an entry more", what);
	free(seen);
}

/* Writes with no progress driven: pushed back, when the writer's CQ (or
 * with remote CQ data, the target's) is full. */
static void cqfull_run(bool data)
{
	const char *what = data ? "writes with data to a CQ never read" :
			   "writes whose CQ is never read";
	int *ctx = calloc(MAXW + 1, sizeof(*ctx));
	struct rig r;
	bool refused;
	fi_addr_t to;
	ssize_t ret;
	int n;

	t_assert(ctx, "out of memory");
	t_name_array(ctx, MAXW + 1, sizeof(*ctx), "ctx");
	rig_open(&r, data ? 0 : CQ_SIZE, data ? CQ_SIZE : 0);
	to = t_insert(&r.a, r.b.name);
	load(r.src, LEN, 51);
	load(r.src + LEN, LEN, 52);
	load(r.dst + LEN, LEN, 53);
	/* One write first: connections and peers set up. */
	t_post(r.a.cq, write_slot(&r, to, 0, false, &ctx[0]));
	t_expect(r.a.cq, &ctx[0], FI_WRITE, (size_t) -1);
	t_unprogress(r.a.cq);
	t_unprogress(r.b.cq);
	/* Where the writer is pushed back, and each entry, is not compared:
	 * see above. */
	t_trace_pause(true);
	for (n = 0; n < MAXW; n++) {
		ret = write_slot(&r, to, 0, data, &ctx[n]);
		if (ret == -FI_EAGAIN)
			break;
		t_fi(ret);
	}
	t_assert(n < MAXW, "%s: %d writes, none pushed back", what, MAXW);
	/* Pushed back: a write to the other slot is refused whole, or, where
	 * the provider made room meanwhile, taken and completed. */
	ret = write_slot(&r, to, 1, data, &ctx[n]);
	refused = ret == -FI_EAGAIN;
	if (!refused && !t_fi(ret))
		n++;
	t_assert(!refused || holds(r.dst + LEN, LEN, 53), "%s: a write "
		 "refused with -FI_EAGAIN wrote its target", what);
	/* On device memory every write is hmemloop's: its bound. */
	t_assert(t_host || n <= CQ_SIZE + 1, "%s: %d writes taken for a CQ "
		 "of %d", what, n, CQ_SIZE);
	t_progress(r.a.cq);
	t_progress(r.b.cq);
	drain(r.a.cq, ctx, n, false, what);
	if (data)
		drain(r.b.cq, ctx, n, true, what);
	t_trace_pause(false);
	t_assert(landed(r.b.cq, r.dst, LEN, 51), "%s: the writes did not land",
		 what);
	t_assert(refused || landed(r.b.cq, r.dst + LEN, LEN, 52), "%s: the "
		 "last write did not land", what);
	t_trace_bytes(r.dst, LEN);
	rig_close(&r);
	free(ctx);
	t_trace("cqfull%s: pushed back; a refused write wrote nothing; "
		"every accepted write completed once", data ? " data" : "");
	t_ok("%s: pushed back after %d, each completed once", what, n);
}

/* Sends to posted receives, the sender's CQ never read: each send taken
 * completes once and fills one receive. */
static void cqfull_sends(void)
{
	const char *what = "sends whose CQ is never read";
	int *ctx = calloc(NRECV, sizeof(*ctx));
	int *rctx = calloc(NRECV, sizeof(*rctx));
	struct rig r;
	fi_addr_t to;
	ssize_t ret;
	int n;

	t_assert(ctx && rctx, "out of memory");
	t_name_array(ctx, NRECV, sizeof(*ctx), "ctx");
	t_name_array(rctx, NRECV, sizeof(*rctx), "rctx");
	rig_open(&r, CQ_SIZE, 0);
	to = t_insert(&r.a, r.b.name);
	load(r.src, LEN, 54);
	for (int i = 0; i < NRECV; i++)
		t_post(r.b.cq, fi_recv(r.b.ep, r.dst, LEN, r.dmr.desc,
				       FI_ADDR_UNSPEC, &rctx[i]));
	/* One message first: connections and peers set up. */
	t_post(r.a.cq, fi_send(r.a.ep, r.src, LEN, r.smr.desc, to, &ctx[0]));
	t_expect(r.a.cq, &ctx[0], FI_SEND, (size_t) -1);
	t_expect(r.b.cq, &rctx[0], FI_RECV, (size_t) -1);
	load(r.dst, LEN, 55);
	t_unprogress(r.a.cq);
	t_unprogress(r.b.cq);
	t_trace_pause(true);
	for (n = 0; n < NRECV - 1; n++) {
		ret = fi_send(r.a.ep, r.src, LEN, r.smr.desc, to, &ctx[n]);
		if (ret == -FI_EAGAIN)
			break;
		t_fi(ret);
	}
	/* The provider alone may take them all; hmemloop what the CQ holds. */
	t_assert(t_host || n <= CQ_SIZE, "%s: %d sends taken for a CQ of %d",
		 what, n, CQ_SIZE);
	t_progress(r.a.cq);
	t_progress(r.b.cq);
	drain(r.a.cq, ctx, n, false, what);
	drain(r.b.cq, rctx + 1, n, false, what);
	t_trace_pause(false);
	t_assert(!n || landed(r.b.cq, r.dst, LEN, 54), "%s: the messages did "
		 "not land", what);
	t_trace_bytes(r.dst, LEN);
	rig_close(&r);
	free(ctx);
	free(rctx);
	t_trace("cqfull sends: every send taken completed once, into "
		"a receive of its own");
	t_ok("%s: %d taken, each completed once", what, n);
}

static void cqfull(void)
{
	cqfull_run(false);
	cqfull_run(true);
	cqfull_sends();
}

/* ---- churn ------------------------------------------------------------ */

/* Bytes the process has allocated: what the provider and the shim hold. */
static long heap(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

static void churn(void)
{
	const char *what = "insert, write, remove";
	long before = 0, grew;
	struct rig r;
	struct t_ep c;
	fi_addr_t to;
	int ctx;

	/* sockets hands out a new fi_addr for every insert: its own table
	 * grows, and it fails after about 10^4. shm of libfabric 2.x (and
	 * efa's shm) keeps a removed peer and crashes writing at the 256th
	 * insert: on host memory, which it then moves itself, not here. */
	if (!strcmp(t_prov, "sockets") ||
	    (FI_MAJOR(fi_version()) >= 2 &&
	     (!strcmp(t_prov, "shm") || !strcmp(t_prov, "efa")) &&
	     t_no_oracle("churn: not compared, %s alone cannot churn",
			 t_prov))) {
		t_trace("churn: not measured here");
		t_ok("%s: %s alone cannot churn", what, t_prov);
		return;
	}
	t_name(&ctx, "ctx");
	rig_open(&r, 0, 0);
	for (int i = 0; i < CYCLES; i++) {
		/* Each cycle traces the same: the first one does. */
		if (i == 1)
			t_trace_pause(true);
		if (i == WARM)
			before = heap();
		/* An endpoint enabled and closed changes every verdict. */
		if (i % 1024 == 1023) {
			t_ep_open(&c, &r.f, NULL);
			t_ep_close(&c);
		}
		to = t_insert(&r.a, r.b.name);
		load(r.src, LEN, i);
		t_post(r.a.cq, write_slot(&r, to, 0, false, &ctx));
		t_expect(r.a.cq, &ctx, FI_WRITE, (size_t) -1);
		t_assert(landed(r.b.cq, r.dst, LEN, i), "%s: cycle %d: the "
			 "write did not land", what, i);
		t_fi(fi_av_remove(r.a.av, &to, 1, 0));
	}
	t_trace_pause(false);
	t_trace_bytes(r.dst, LEN);
	grew = heap() - before;
	t_assert(grew < GROWTH, "%s: the process grew %ld KiB over %d cycles",
		 what, grew >> 10, CYCLES - WARM);
	rig_close(&r);
	t_trace("churn: the process stays the same size");
	t_ok("%s: %d cycles, grew %ld KiB", what, CYCLES - WARM, grew >> 10);
}

/* ---- stale ------------------------------------------------------------ */

/* B's next receive entry and its source, within the wait. */
static void *recv_from(struct t_ep *b, fi_addr_t *from, const char *what)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret = t_wait_from(b->cq, &ent, &err, from);

	t_assert(ret >= 0, "%s: no receive entry in %.0f s", what,
		 t_wait_s());
	t_assert(!ret, "%s: an error entry, %d (%s)", what, err.err,
		 fi_strerror(err.err));
	return ent.op_context;
}

/* Whether B may report source from for the sender named name: its own
 * fi_addr, or an earlier sender's with the same name (sockets and tcp
 * reuse a closed endpoint's port: the AV then answers the insert with the
 * earlier entry, or sockets reports the first of the AV's entries for it,
 * alone as through hmemloop). names: the senders' names by fi_addr, up to
 * last. */
static bool reused(char names[][256], fi_addr_t last, fi_addr_t from,
		   const void *name, size_t len)
{
	return from >= 1 && from <= last && !memcmp(names[from], name, len);
}

static void stale(void)
{
	const char *what = "a sender closed without fi_av_remove";
	struct t_opts o = { .caps = FI_MSG | FI_SOURCE | FI_DIRECTED_RECV };
	struct t_fabric f;
	struct t_ep a, b;
	struct t_mr smr, dmr;
	char *src = t_mem_alloc(LEN), *dst = t_mem_alloc(LEN);
	char names[ROUNDS + 1][256];	/* the senders', by fi_addr */
	fi_addr_t last, from, to, got;
	int s, r;

	/* udp;ofi_rxd alone reports A1's message as B's own (fi_addr 0). */
	if (!strcmp(t_prov, "udp;ofi_rxd") ||
	    t_try_open(&f, &o) == -FI_ENODATA) {
		t_trace("stale: not tested here");
		t_ok("%s: %s has no FI_SOURCE and FI_DIRECTED_RECV, or reports "
		     "a wrong source alone", what, t_prov);
		t_mem_free(src);
		t_mem_free(dst);
		return;
	}
	t_ep_open(&b, &f, &o);
	t_reg(&f, src, LEN, FI_SEND, 1, &smr);
	t_reg(&f, dst, LEN, FI_RECV, 2, &dmr);
	t_name_buf(dst, LEN, "dst");
	t_name(&s, "s");
	t_name(&r, "r");
	/* B's own address first: the senders' are 1, 2, ..., a new one
	 * each, or an earlier one's where the name is the same. */
	last = t_insert(&b, b.name);
	for (int i = 0; i < ROUNDS; i++) {
		t_ep_open(&a, &f, &o);
		from = t_insert(&b, a.name);
		t_assert((from == last + 1 && from <= ROUNDS) ||
			 reused(names, last, from, a.name, a.namelen),
			 "%s: sender %d inserted as fi_addr %#lx, after %#lx",
			 what, i + 1, (unsigned long) from,
			 (unsigned long) last);
		if (from > last)
			last = from;
		memcpy(names[from], a.name, sizeof(names[from]));
		to = t_insert(&a, b.name);
		load(src, LEN, 60 + i);
		t_post(b.cq, fi_recv(b.ep, dst, LEN, dmr.desc, from, &r));
		t_post(a.cq, fi_send(a.ep, src, LEN, smr.desc, to, &s));
		t_expect(a.cq, &s, FI_SEND, (size_t) -1);
		t_assert(recv_from(&b, &got, what) == &r &&
			 reused(names, last, got, a.name, a.namelen),
			 "%s: sender %d's message from %#lx, expected %#lx",
			 what, i + 1, (unsigned long) got,
			 (unsigned long) from);
		t_assert(holds(dst, LEN, 60 + i), "%s: sender %d's message "
			 "did not land", what, i + 1);
		t_trace_bytes(dst, LEN);
		/* It goes, its address stays in B's AV. The next one's
		 * wrapper may well be where its was. */
		t_ep_close(&a);
	}
	t_fi(fi_close(&smr.mr->fid));
	t_fi(fi_close(&dmr.mr->fid));
	t_ep_close(&b);
	t_close(&f);
	t_mem_free(src);
	t_mem_free(dst);
	t_trace("stale: each sender's message from its own address, "
		"into the receive directed at it");
	t_ok("%s: the source is the sender's", what);
}

static const struct t_case cases[] = {
	T_CASE("cqfull", cqfull),
	T_CASE("churn", churn),
	T_CASE("stale", stale),
};

T_MAIN(cases, .flags = T_CUDA | T_HOST | T_TRACE);
