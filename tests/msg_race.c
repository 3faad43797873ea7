/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/msg: the race with another process (case 8): device messages from
 * this process and host messages from a peer process into one endpoint. */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "msg.h"

/* ---- the race (8) -------------------------------------------------------- */

static pid_t peer_pid;

static void end_peer(void)
{
	if (peer_pid > 0) {
		kill(peer_pid, SIGTERM);
		waitpid(peer_pid, NULL, 0);
		peer_pid = 0;
	}
}

static void xwrite(int fd, const void *p, size_t n)
{
	t_assert(write(fd, p, n) == (ssize_t) n, "pipe write failed");
}

/* Read n bytes, driving progress meanwhile (the other side may need it). */
static bool xread(int fd, void *p, size_t n, struct fid_cq *cq)
{
	double end = t_now() + 3 * t_wait_s();
	size_t got = 0;

	while (got < n && t_now() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, cq ? 0 : 100) > 0) {
			r = read(fd, (char *) p + got, n - got);
			if (r <= 0)
				return false;
			got += r;
		} else if (cq) {
			t_drive(cq);
		}
	}
	return got == n;
}

static size_t race_len(int sender, int seq)
{
	return RACE_LEN - 8 * (seq % 5) - sender;
}

static void payload(uint8_t *p, int sender, int seq)
{
	uint32_t h[2] = { sender, seq };

	memcpy(p, h, sizeof(h));
	t_fill(p + sizeof(h), race_len(sender, seq) - sizeof(h),
	       sender * 7919 + seq);
}

struct report {
	uint32_t ok, err, dup;
};

/* The peer: its own process, endpoint and host memory. */
int peer(int rfd, int wfd)
{
	struct t_fabric f;
	struct ep e;
	char name[256];
	size_t n;
	uint8_t *mem = malloc((RACE_N + 1) * SLOT), cmd;
	struct fi_context2 ctx[RACE_N + 1];
	bool seen[RACE_N + 1] = { false };
	struct report rep = { 0 };
	struct t_mr mr;
	fi_addr_t b;
	struct got g;

	t_assert(mem, "out of memory");
	t_assert(!open_fabric(&f, fx.caps, fx.sas, false), "peer: %s is "
		 "gone", t_prov);
	ep_open(&e, &f, "peer", false, NULL, 0);
	t_assert(xread(rfd, &n, sizeof(n), NULL) && n <= sizeof(name) &&
		 xread(rfd, name, n, NULL), "peer: no address");
	b = t_insert(&e.t, name);
	xwrite(wfd, &e.t.namelen, sizeof(e.t.namelen));
	xwrite(wfd, e.t.name, e.t.namelen);
	t_reg(&f, mem, (RACE_N + 1) * SLOT, FI_SEND, 0, &mr);

	t_assert(xread(rfd, &cmd, 1, e.t.cq) && cmd == 'w', "peer: no 'w'");
	payload(mem + RACE_N * SLOT, 2, RACE_N);
	RETRY(e.t.cq, fi_tsend(e.t.ep, mem + RACE_N * SLOT,
			       race_len(2, RACE_N), mr.desc, b, RACE_TAG + 1,
			       &ctx[RACE_N]), "peer: fi_tsend");
	t_assert(!next(&e, &g, t_wait_s()) && !g.err, "peer: warm-up send");
	t_assert(xread(rfd, &cmd, 1, e.t.cq) && cmd == 'g', "peer: no 'g'");
	for (int i = 0; i < RACE_N; i++) {
		payload(mem + i * SLOT, 2, i);
		RETRY(e.t.cq, fi_tsend(e.t.ep, mem + i * SLOT, race_len(2, i),
				       mr.desc, b, RACE_TAG, &ctx[i]),
		      "peer: fi_tsend");
		for (double end = t_now() + 100e-6; t_now() < end;)
			t_drive(e.t.cq);
	}
	for (int i = 0; i < RACE_N; i++) {
		void *c;
		long k;

		if (next(&e, &g, 3 * t_wait_s()))
			break;
		c = g.err ? g.x.op_context : g.e.op_context;
		k = (struct fi_context2 *) c - ctx;
		if (g.err || k < 0 || k >= RACE_N) {
			rep.err++;
			continue;
		}
		rep.dup += seen[k];
		rep.ok += !seen[k];
		seen[k] = true;
	}
	rep.dup += !t_quiet(e.t.cq, 50);
	xwrite(wfd, &rep, sizeof(rep));
	xread(rfd, &cmd, 1, e.t.cq);	/* 'b', or the parent is gone */
	t_fi(fi_close(&mr.mr->fid));
	ep_close(&e);
	t_close(&f);
	free(mem);
	return 0;
}

/* What b's receives hold, as their entries come. */
struct race {
	int slot_of[3][RACE_N];		/* [sender][seq]: the receive */
	bool done[2 * RACE_N];
	int delivered[3], n;
	fi_addr_t src[3];		/* each sender's source, to b */
};

static struct fi_context2 race_rctx[2 * RACE_N];

static void race_entry(struct race *rc, const struct got *g)
{
	const char *what = "race";
	uint8_t bytes[SLOT];
	uint32_t h[2];
	long i;

	t_assert(!g->err, "%s: error entry: err %d (%s), context %p", what,
		 g->x.err, fi_strerror(g->x.err), g->x.op_context);
	i = (struct fi_context2 *) g->e.op_context - race_rctx;
	t_assert(i >= 0 && i < 2 * RACE_N && !rc->done[i], "%s: entry for "
		 "context %p: not a receive, or its second entry", what,
		 g->e.op_context);
	rc->done[i] = true;
	memcpy(h, bufs[DH].p + i * SLOT, sizeof(h));
	t_assert((h[0] == 1 || h[0] == 2) && h[1] < RACE_N &&
		 rc->slot_of[h[0]][h[1]] < 0, "%s: receive %ld holds sender "
		 "%u message %u: %s", what, i, h[0], h[1],
		 h[0] == 1 || h[0] == 2 ? "delivered twice" : "no such message");
	/* sockets adds FI_MSG to tagged receives' flags. */
	t_assert((g->e.flags & ~(h[0] == 2 ? FI_MSG : 0)) ==
		 (FI_TAGGED | FI_RECV) && g->e.tag == RACE_TAG &&
		 g->e.len == race_len(h[0], h[1]), "%s: receive %ld (sender %u "
		 "message %u): flags %#lx, tag %#lx, len %zu (expected %zu)",
		 what, i, h[0], h[1], (unsigned long) g->e.flags,
		 (unsigned long) g->e.tag, g->e.len, race_len(h[0], h[1]));
	t_assert(!fx.source || g->src == rc->src[h[0]], "%s: sender %u's "
		 "message from source %#lx, expected %#lx", what, h[0],
		 (unsigned long) g->src, (unsigned long) rc->src[h[0]]);
	rc->slot_of[h[0]][h[1]] = i;
	rc->delivered[h[0]]++;
	rc->n++;
	payload(bytes, h[0], h[1]);
	memcpy(bufs[DH].shadow + i * SLOT, bytes, race_len(h[0], h[1]));
}

/* Take b's entries for a while (or until there are n). */
static void race_poll(struct race *rc, double seconds, int n)
{
	double end = t_now() + seconds;
	struct got g;

	while (rc->n < n && !next(&fx.ep[B], &g, 0))
		race_entry(rc, &g);
	while (rc->n < n && t_now() < end)
		if (!next(&fx.ep[B], &g, end - t_now()))
			race_entry(rc, &g);
}

void race(void)
{
	static struct fi_context2 sctx[RACE_N];
	static struct want ws[RACE_N];
	static struct race rc;
	static uint8_t bytes[SLOT];
	struct ep *a = &fx.ep[A], *b = &fx.ep[B];
	int to_peer, from_peer, st, switches = 0;
	char arg[80], name[256];
	const char *what = "race";
	struct report rep;
	fi_addr_t peer_addr;
	struct rx warm, r;
	struct tx x;
	struct got g;
	size_t n;
	CTX(wctx);

	peer_pid = t_fork_peer(&from_peer, &to_peer);
	if (!peer_pid) {
		snprintf(arg, sizeof(arg), "%d,%d,%#llx,%d", from_peer,
			 to_peer, (unsigned long long) fx.caps, fx.sas);
		execl("/proc/self/exe", "msg", "-p", t_prov, "-P", arg,
		      (char *) NULL);
		_exit(127);
	}
	atexit(end_peer);
	xwrite(to_peer, &b->t.namelen, sizeof(b->t.namelen));
	xwrite(to_peer, b->t.name, b->t.namelen);
	t_assert(xread(from_peer, &n, sizeof(n), NULL) && n <= sizeof(name) &&
		 xread(from_peer, name, n, NULL), "%s: the peer did not start",
		 what);
	peer_addr = t_insert(&b->t, name);

	/* A first message from the peer, to connect. */
	warm = (struct rx) {
		.op = TRECV, .ep = b->t.ep, .cq_of = b, .src = FI_ADDR_UNSPEC,
		.r = region(DH, 0, 2 * RACE_N * SLOT + PAD, RACE_LEN, 1),
		.tag = RACE_TAG + 1, .ctx = wctx,
	};
	poison_rx(&warm.r);
	do_recv(&warm);
	xwrite(to_peer, "w", 1);
	payload(bytes, 2, RACE_N);
	t_assert(!next(b, &g, t_wait_s()), "%s: the peer's first message did "
		 "not come", what);
	t_assert(!g.err && g.e.op_context == wctx && g.e.tag == RACE_TAG + 1 &&
		 g.e.len == race_len(2, RACE_N) &&
		 (g.e.flags & ~FI_MSG) == (FI_TAGGED | FI_RECV), "%s: the "
		 "peer's first message: err %d, context %p, tag %#lx, len "
		 "%zu, flags %#lx", what, g.err ? g.x.err : 0, g.e.op_context,
		 (unsigned long) g.e.tag, g.e.len, (unsigned long) g.e.flags);
	quiet(b, what);
	/* What the provider says the peer is, then held to for the rest:
	 * its business, not hmemloop's. */
	if (fx.source && g.src != peer_addr)
		note("%s: fi_cq_readfrom gives source %#lx for the other "
		     "process, not %#lx, its index in b's AV (a provider bug; "
		     "the same without hmemloop)", t_prov,
		     (unsigned long) g.src, (unsigned long) peer_addr);
	memset(&rc, 0, sizeof(rc));
	memset(rc.slot_of, 0xff, sizeof(rc.slot_of));
	rc.src[1] = fx.addr[B][A];
	rc.src[2] = g.src;
	b->want[1][0]++;
	land(&warm.r, bytes, race_len(2, RACE_N));
	verify_rx(&warm.r, what);

	/* 2 * RACE_N receives, one tag. The peer sends its RACE_N host
	 * messages one every 100 us; once the first is in, a sends its
	 * RACE_N device messages, as often. */
	poison(DH, 0, 2 * RACE_N * SLOT);
	for (int i = 0; i < 2 * RACE_N; i++) {
		r = (struct rx) {
			.op = TRECV, .ep = b->t.ep, .cq_of = b,
			.src = FI_ADDR_UNSPEC,
			.r = region(DH, 0, i * SLOT, RACE_LEN, 1),
			.tag = RACE_TAG, .ctx = &race_rctx[i],
		};
		do_recv(&r);
	}
	for (int i = 0; i < RACE_N; i++) {
		payload(bytes, 1, i);
		put(SD, i * SLOT, bytes, race_len(1, i));
	}
	xwrite(to_peer, "g", 1);
	race_poll(&rc, t_wait_s(), 1);
	t_assert(rc.n == 1, "%s: no message from the peer", what);
	for (int i = 0; i < RACE_N; i++) {
		x = (struct tx) {
			.op = TSEND, .from = a, .dest = fx.addr[A][B],
			.r = region(SD, 0, i * SLOT, race_len(1, i), 1),
			.tag = RACE_TAG, .ctx = &sctx[i],
		};
		do_send(&x);
		ws[i] = want_tx(&sctx[i], true);
		race_poll(&rc, 100e-6, 2 * RACE_N);
	}
	expect(a, ws, RACE_N, false, what);
	a->want[0][0] += RACE_N;
	race_poll(&rc, 3 * t_wait_s(), 2 * RACE_N);
	t_assert(rc.n == 2 * RACE_N, "%s: %d of %d receives completed (a %d, "
		 "the peer %d)", what, rc.n, 2 * RACE_N, rc.delivered[1],
		 rc.delivered[2]);
	quiet(b, what);
	b->want[1][0] += 2 * RACE_N;
	t_assert(xread(from_peer, &rep, sizeof(rep), b->t.cq), "%s: no report "
		 "from the peer", what);
	t_assert(rep.ok == RACE_N && !rep.err && !rep.dup, "%s: the peer's "
		 "sends: %u completed, %u in error, %u extra", what, rep.ok,
		 rep.err, rep.dup);
	xwrite(to_peer, "b", 1);
	t_assert(waitpid(peer_pid, &st, 0) == peer_pid, "waitpid");
	peer_pid = 0;
	t_assert(WIFEXITED(st) && !WEXITSTATUS(st), "%s: the peer ended "
		 "with status %#x", what, st);
	close(to_peer);
	close(from_peer);
	verify(DH, 0, 2 * RACE_N * SLOT, what);
	counts(what);
	for (int s = 1; s <= 2 && fx.sas; s++)
		for (int i = 1; i < RACE_N; i++)
			t_assert(rc.slot_of[s][i] > rc.slot_of[s][i - 1], "%s: "
				 "FI_ORDER_SAS: sender %d's message %d is in "
				 "receive %d, its message %d in receive %d",
				 what, s, i, rc.slot_of[s][i], i - 1,
				 rc.slot_of[s][i - 1]);
	for (int i = 1; i < 2 * RACE_N; i++)
		switches += memcmp(bufs[DH].p + (i - 1) * SLOT,
				   bufs[DH].p + i * SLOT, 4) != 0;
	t_ok("%s: %d device messages from a and %d host messages from another "
	     "process into %d receives on b: each delivered once, "
	     "byte-exact%s; the senders alternate %d times along the "
	     "receives", what, RACE_N, RACE_N, 2 * RACE_N,
	     fx.sas ? ", each sender's in order" : "", switches);
}
