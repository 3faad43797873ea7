/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/msg: what holds messages on the receiving side: multi-receive
 * buffers, shared receive contexts, closing with messages held (cases
 * 9-11). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

/* ---- multi-receive buffers (9) --------------------------------------------- */

/*
 * Four messages into one multi-receive buffer on m. On device memory, two
 * wait before it is posted and two come after. On host memory the first
 * is a host message the provider places, so that the buffer is in use by
 * the provider when the device messages come. Each message either lands
 * packed after the previous one, or (the provider cannot give the buffer
 * back) its send fails with FI_EOPNOTSUPP and nothing lands.
 */
static void multi_run(bool host)
{
	static const size_t mlen[4] = { 1001, 999, 1024, 700 };
	static uint8_t bytes[4][1100];
	struct path am = path(A, M);
	struct region buf = region(host ? DH : DD, 0, PAD, MULTI_SIZE, 1);
	char *base = bufs[buf.b].p + buf.off;
	struct fi_context2 sctx[4];
	struct tx x[4];
	struct iovec iov = { base, MULTI_SIZE };
	void *desc = bufs[buf.b].mr[0].desc;
	CTX(mctx);
	struct fi_msg msg = {
		.msg_iov = &iov, .desc = &desc, .iov_count = 1,
		.addr = FI_ADDR_UNSPEC, .context = mctx,
	};
	int st[4], nok = 0, nfail = 0, nput = 0;
	size_t end = 0;
	bool released = false;
	char what[120], how[200] = "";
	struct got g;

	snprintf(what, sizeof(what), "multi-receive buffer in %s memory",
		 host ? "host" : "device");
	poison_rx(&buf);
	for (int i = 0; i < 4; i++) {
		x[i] = (struct tx) {
			.op = SEND, .from = am.from, .dest = am.dest,
			.r = region(host && !i ? SH : SD, 0, PAD + i * SLOT,
				    mlen[i], 1),
			.ctx = &sctx[i],
		};
		t_fill(bytes[i], mlen[i], next_seed());
		load(&x[i].r, bytes[i]);
	}
	if (!host) {
		do_send(&x[0]);
		do_send(&x[1]);
	}
	RETRY(am.to->t.cq, fi_recvmsg(am.to->t.ep, &msg,
				      FI_MULTI_RECV | FI_COMPLETION),
	      "fi_recvmsg(FI_MULTI_RECV)");
	for (int i = host ? 0 : 2; i < 4; i++) {
		do_send(&x[i]);
		/* The provider's message first, so that the buffer is in
		 * use when the device messages come. */
		if (host && !i) {
			t_assert(!next(am.to, &g, t_wait_s()), "%s: the host "
				 "message did not arrive", what);
			t_assert(!g.err && g.e.op_context == mctx &&
				 (char *) g.e.buf == base && g.e.len == mlen[0],
				 "%s: the host message: err %d, context %p, "
				 "buf %p (expected %p), len %zu", what,
				 g.err ? g.x.err : 0, g.e.op_context, g.e.buf,
				 (void *) base, g.e.len);
			memcpy(bufs[buf.b].shadow + buf.off, bytes[0], mlen[0]);
			end = mlen[0];
			nput = 1;
			am.to->want[1][0]++;
		}
	}
	for (int k = 0; k < 4; k++)
		st[k] = -1;
	for (int k = 0; k < 4; k++) {
		void *c;
		int i;

		t_assert(!next(am.from, &g, t_wait_s()), "%s: %d of 4 sends "
			 "completed", what, k);
		c = g.err ? g.x.op_context : g.e.op_context;
		i = (struct fi_context2 *) c - sctx;
		t_assert(i >= 0 && i < 4 && st[i] < 0, "%s: a send entry for "
			 "context %p", what, c);
		st[i] = g.err ? g.x.err : 0;
		t_assert(!st[i] || (st[i] == FI_EOPNOTSUPP && i >= host),
			 "%s: send %d: error %d (%s)", what, i + 1, st[i],
			 fi_strerror(st[i]));
		t_assert(st[i] || g.e.flags == (FI_MSG | FI_SEND), "%s: send "
			 "%d: flags %#lx", what, i + 1,
			 (unsigned long) g.e.flags);
		am.from->want[0][!!st[i]]++;
		nok += !st[i];
		nfail += !!st[i];
	}
	quiet(am.from, what);

	/* The receiver: each delivered message in order, packed. */
	for (int i = nput; i < 4; i++) {
		size_t off;

		if (st[i])
			continue;
		t_assert(!next(am.to, &g, t_wait_s()), "%s: message %d did not "
			 "arrive", what, i + 1);
		t_assert(!g.err, "%s: message %d: error %d (%s)", what, i + 1,
			 g.x.err, fi_strerror(g.x.err));
		t_assert(g.e.op_context == mctx && g.e.len == mlen[i] &&
			 (g.e.flags & ~FI_MULTI_RECV) == (FI_MSG | FI_RECV),
			 "%s: message %d: context %p, len %zu (expected %zu), "
			 "flags %#lx", what, i + 1, g.e.op_context, g.e.len,
			 mlen[i], (unsigned long) g.e.flags);
		off = (char *) g.e.buf - base;
		t_assert((char *) g.e.buf >= base + end &&
			 off - end < 64 && off + mlen[i] <= MULTI_SIZE,
			 "%s: message %d placed at offset %zd, the previous "
			 "ends at %zu", what, i + 1, (char *) g.e.buf - base,
			 end);
		memcpy(bufs[buf.b].shadow + buf.off + off, bytes[i], mlen[i]);
		end = off + mlen[i];
		t_assert(!released, "%s: a message after the release", what);
		released = g.e.flags & FI_MULTI_RECV;
		am.to->want[1][0]++;
		snprintf(how + strlen(how), sizeof(how) - strlen(how),
			 "%s%zu", strlen(how) ? ", " : "", off);
	}
	if (!released && !nfail) {
		/* The release on an entry of its own. */
		t_assert(!next(am.to, &g, t_wait_s()), "%s: the buffer was not "
			 "released", what);
		t_assert(!g.err && g.e.op_context == mctx &&
			 (g.e.flags & FI_MULTI_RECV) && !g.e.len, "%s: "
			 "expected the release, got err %d, context %p, flags "
			 "%#lx, len %zu", what, g.err ? g.x.err : 0,
			 g.e.op_context, (unsigned long) g.e.flags, g.e.len);
		released = true;
	}
	t_assert(released == !nfail, "%s: all four delivered, but the "
		 "buffer is not released", what);
	if (nfail) {
		/* Take the rest of the buffer back. sockets counts the
		 * application's own cancel as a receive error. */
		uint64_t errs = fi_cntr_readerr(am.to->t.cntr[1]);

		t_fi(fi_cancel(&am.to->t.ep->fid, mctx));
		am.to->want[1][1] += fi_cntr_readerr(am.to->t.cntr[1]) - errs;
		t_assert(!next(am.to, &g, t_wait_s()) && g.err &&
			 g.x.op_context == mctx && g.x.err == FI_ECANCELED,
			 "%s: cancelling the buffer: no FI_ECANCELED entry",
			 what);
	}
	quiet(am.to, what);
	counts(what);
	verify_rx(&buf, what);
	if (!nfail)
		t_ok("%s: %d messages%s packed in order at offsets %s, "
		     "released with FI_MULTI_RECV", what, 4,
		     host ? " (the first from the provider)" : "", how);
	else
		t_ok("%s: the provider could not give the buffer back: %d "
		     "send(s) failed with FI_EOPNOTSUPP, nothing of them "
		     "landed; %d delivered%s%s", what, nfail, nok,
		     *how ? " at offsets " : "", how);
}

void multi(void)
{
	if (!fx.multi) {
		printf("skip: %s has no FI_MULTI_RECV: multi-receive buffers "
		       "not tested\n", t_prov);
		return;
	}
	multi_run(false);
	multi_run(true);
}

/* ---- shared receive contexts (10) ------------------------------------------ */

void srx(void)
{
	uint64_t caps = FI_MSG | FI_TAGGED;
	struct t_fabric f;
	struct fid_ep *ctx;
	struct ep d, e;
	fi_addr_t dd, de, ed, ee;
	int ret;

	/* shm 1.17 opens an SRX without FI_SHARED_CONTEXT in the hints, but
	 * no endpoint for it, and crashes closing it: ask getinfo. */
	if (!supported(caps, fx.sas, true)) {
		printf("skip: %s has no endpoints with shared receive contexts "
		       "(fi_getinfo with rx_ctx_cnt FI_SHARED_CONTEXT: no "
		       "match)\n", t_prov);
		return;
	}
	t_fi(open_fabric(&f, caps, fx.sas, true));
	ret = t_srx_try_open(&f, &ctx);
	if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
		printf("skip: %s: fi_srx_context: %s\n", t_prov,
		       fi_strerror(-ret));
		t_close(&f);
		return;
	}
	t_fi(ret);
	ep_open(&d, &f, "d", false, ctx, 0);
	ep_open(&e, &f, "e", false, ctx, 0);
	dd = t_insert(&d.t, d.t.name);
	de = t_insert(&d.t, e.t.name);
	ee = t_insert(&e.t, e.t.name);
	ed = t_insert(&e.t, d.t.name);
	for (int i = 0; i < NBUF; i++)
		t_reg(&f, bufs[i].p, BUFSZ, FI_SEND | FI_RECV, 11 + i,
		      &bufs[i].mr[1]);
	{
		struct path ps[] = {
			{ &d, &e, ctx, de, FI_ADDR_UNSPEC, 1 },
			{ &e, &d, ctx, ed, FI_ADDR_UNSPEC, 1 },
			{ &d, &d, ctx, dd, FI_ADDR_UNSPEC, 1 },
			{ &e, &e, ctx, ee, FI_ADDR_UNSPEC, 1 },
		};
		static const char *const names[] = {
			"d to e", "e to d", "d to itself", "e to itself",
		};
		static const struct { enum sop s; enum rop r; } ops[] = {
			{ SEND, RECV }, { SENDV, RECVMSG }, { TSEND, TRECV },
			{ TSENDDATA, TRECVV },
		};
		unsigned v = 0;

		for (int p = 0; p < 4; p++) {
			for (size_t o = 0; o < 4; o++) {
				for (int m = 0; m < 3; m++) {
					for (int first = 0; first < 2; first++) {
						char what[160];
						struct mc k = {
							.p = &ps[p],
							.s = ops[o].s,
							.r = ops[o].r,
							.sb = mems[m].src,
							.db = mems[m].dst,
							.len = 100 + 997 * (v++ % 9),
							.send_first = first,
							.rflags = FI_COMPLETION,
						};

						k.rcap = k.len + EXTRA;
						snprintf(what, sizeof(what),
							 "shared receive context, "
							 "%s: %s -> %s, %s, %s "
							 "first", names[p],
							 sop_names[k.s],
							 rop_names[k.r],
							 mems[m].name, first ?
							 "send" : "receive");
						message(&k, what);
					}
				}
			}
			t_ok("shared receive context, %s: fi_send, fi_sendv, "
			     "fi_tsend, fi_tsenddata into receives posted on "
			     "the SRX, before and after, completed on the "
			     "receiving endpoint's CQ", names[p]);
		}
	}
	for (int i = 0; i < NBUF; i++)
		t_fi(fi_close(&bufs[i].mr[1].mr->fid));
	ep_close(&d);
	ep_close(&e);
	t_fi(fi_close(&ctx->fid));
	t_close(&f);
}

/* ---- closing with messages held (11) --------------------------------------- */

void closing(void)
{
	static uint8_t bytes[MSLOT];
	struct ep h, *a = &fx.ep[A];
	struct path ah;
	size_t free0, free1, tot;
	struct want w[5];
	struct fi_context2 sctx[5];
	int nw = 0;
	static const enum sop ops[] = { SEND, TSEND, SENDV, INJECT, SENDDATA };

	ep_open(&h, &fx.f, "h", false, NULL, 0);
	ah = (struct path) { a, &h, h.t.ep, t_insert(&a->t, h.t.name),
			     FI_ADDR_UNSPEC, 0 };
	t_cu(cuMemGetInfo(&free0, &tot));
	for (int i = 0; i < 5; i++) {
		size_t len = ops[i] == INJECT ?
			     (fx.inject < 64 ? fx.inject : 64) : 3000u + i;
		struct tx x = slot_tx(&ah, ops[i], i, len, 0x99, &sctx[i],
				      bytes);

		if (i == 4)
			x.r.b = SH;
		if (ops[i] == INJECT && !fx.inject)
			continue;
		do_send(&x);
		if (!s_inject(ops[i]))
			w[nw++] = want_tx(&sctx[i], s_tagged(ops[i]));
		a->want[0][0]++;
	}
	expect(a, w, nw, false, "closing");
	quiet(&h, "closing");
	counts("closing");
	ep_close(&h);
	t_cu(cuMemGetInfo(&free1, &tot));
	if (fx.dbl)
		t_assert(free1 == free0, "closing: device memory free %zu "
			 "before the held messages, %zu after closing their "
			 "endpoint", free0, free1);
	else
		note("real GPU: device memory in use is not exact here; "
		     "leak of held messages not checked");
	t_ok("closing h with messages held (device and host, tagged and "
	     "untagged): closed cleanly%s", fx.dbl ? ", held device memory "
	     "freed" : "");
}
