/*
 * Same-process messages under uses libfabric allows that a take-back by
 * the application's context gets wrong (issue 14). Each case checks what
 * the provider alone does with host memory:
 *
 *   shared   two receives posted with one context: the first message
 *            fills the first, the second the second; nothing is cancelled
 *   format   CQs of FI_CQ_FORMAT_CONTEXT, where a receive and a send of
 *            one endpoint share a context: the send's entry is not the
 *            receive's, and a message later fills the receive
 *   cancel   the application cancels receive c2, then a message comes:
 *            c2 ends FI_ECANCELED, untouched, and c3 takes the message
 *   nocontext a receive posted without a context takes a message
 *   bounded  messages sent with no receive posted: the sender is pushed
 *            back with -FI_EAGAIN, and every message it was not is
 *            received once, intact, when receives come
 *
 * By default on device memory: without hmemloop the provider touches it
 * and the run fails. With -H on host memory, printing "digest:" lines that
 * must be the same without hmemloop and through it with
 * HMEMLOOP_SELF=all (tests/exact-host). "-c NAME,..." runs only those.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN		1000		/* a message of shared, format, cancel */
#define SLOT		4096
#define NSLOT		4
#define SMALL		64		/* a message of bounded */
#define MAXQ		20000		/* sends before bounded gives up */

enum { A, B, C, D, NEP };	/* c, d: CQs of FI_CQ_FORMAT_CONTEXT */

static struct t_fabric fab;
static struct t_ep ep[NEP];
static fi_addr_t addr[NEP][NEP];	/* [in whose AV][whose address] */
static bool shared_ok;			/* contexts may be shared */
static char *src, *dst, *qsrc;		/* device memory unless -H */
static struct t_mr src_mr, dst_mr, qsrc_mr, hsrc_mr, hdst_mr;
static char hsrc[SLOT], hdst[SLOT];	/* host memory, always */
static uint8_t scratch[SLOT];

/* Slot i of the source holds the message seeded seed. */
static void load(int i, unsigned seed)
{
	t_fill(scratch, LEN, seed);
	t_mem_put(src + i * SLOT, scratch, LEN);
}

/* Slot i of the destination: poisoned, or checked to hold seed's bytes. */
static void poison(int i)
{
	memset(scratch, 0xa5, SLOT);
	t_mem_put(dst + i * SLOT, scratch, SLOT);
}

static bool holds(int i, unsigned seed)
{
	t_mem_get(scratch, dst + i * SLOT, LEN);
	return t_check(scratch, LEN, seed);
}

static bool poisoned(int i)
{
	t_mem_get(scratch, dst + i * SLOT, SLOT);
	for (size_t k = 0; k < SLOT; k++)
		if (scratch[k] != 0xa5)
			return false;
	return true;
}

static void recv_slot(int e, int i, void *ctx)
{
	t_post(ep[e].cq, fi_recv(ep[e].ep, dst + i * SLOT, SLOT, dst_mr.desc,
				 FI_ADDR_UNSPEC, ctx));
}

static void send_slot(int from, int to, int i, void *ctx)
{
	t_post(ep[from].cq, fi_send(ep[from].ep, src + i * SLOT, LEN,
				    src_mr.desc, addr[from][to], ctx));
}

/* The next entry of e's CQ, success or error, within the wait. */
struct ent {
	void *ctx;
	int err;
	size_t len;
	uint64_t flags;
};

static struct ent next(int e, const char *what)
{
	struct fi_cq_tagged_entry t = { 0 };
	struct fi_cq_err_entry x = { 0 };
	int ret = t_wait(ep[e].cq, &t, &x);

	t_assert(ret >= 0, "%s: no completion in %.0f s", what, t_wait_s());
	if (ret)
		return (struct ent) { x.op_context, x.err, x.len, x.flags };
	return (struct ent) { t.op_context, 0, t.len, t.flags };
}

static void quiet(int e, const char *what)
{
	t_assert(t_quiet(ep[e].cq, 50), "%s: a completion more", what);
}

static void tx_done(int e, void *ctx, const char *what)
{
	struct ent g = next(e, what);

	t_assert(g.ctx == ctx && !g.err, "%s: send entry: context %p err %d, "
		 "expected %p", what, g.ctx, g.err, ctx);
}

/* ---- the cases ------------------------------------------------------------ */

static void shared(void)
{
	const char *what = "two receives with one context";
	struct fi_context2 x, s1, s2;
	struct ent g;

	if (!shared_ok) {
		printf("digest: shared: not legal here (FI_CONTEXT mode)\n");
		return;
	}
	poison(0);
	poison(1);
	load(0, 11);
	load(1, 12);
	recv_slot(B, 0, &x);
	recv_slot(B, 1, &x);
	send_slot(A, B, 0, &s1);
	tx_done(A, &s1, what);
	g = next(B, what);
	t_assert(g.ctx == &x && !g.err && g.len == LEN, "%s: first receive "
		 "entry: context %p err %d (%s) len %zu", what, g.ctx, g.err,
		 fi_strerror(g.err), g.len);
	send_slot(A, B, 1, &s2);
	tx_done(A, &s2, what);
	g = next(B, what);
	t_assert(g.ctx == &x && !g.err && g.len == LEN, "%s: second receive "
		 "entry: context %p err %d (%s) len %zu", what, g.ctx, g.err,
		 fi_strerror(g.err), g.len);
	quiet(B, what);
	t_assert(holds(0, 11), "%s: the first buffer lacks the first message",
		 what);
	t_assert(holds(1, 12), "%s: the second buffer lacks the second "
		 "message", what);
	printf("digest: shared: first buffer first message, second buffer "
	       "second message\n");
	t_ok("%s: each message in its receive, in posting order", what);
}

static void format(void)
{
	const char *what = "FI_CQ_FORMAT_CONTEXT, a send and a receive "
			   "sharing a context";
	struct fi_context2 x, y, z;
	struct ent g;

	poison(2);
	load(2, 21);
	memset(hsrc, 0x5a, LEN);
	recv_slot(D, 2, &x);
	/* d's host send to c, with the context of d's receive */
	t_post(ep[C].cq, fi_recv(ep[C].ep, hdst, SLOT, hdst_mr.desc,
				 FI_ADDR_UNSPEC, &y));
	t_post(ep[D].cq, fi_send(ep[D].ep, hsrc, LEN, hsrc_mr.desc,
				 addr[D][C], &x));
	g = next(D, what);
	t_assert(g.ctx == &x && !g.err, "%s: d's send: context %p err %d",
		 what, g.ctx, g.err);
	g = next(C, what);
	t_assert(g.ctx == &y && !g.err, "%s: c's receive: context %p err %d",
		 what, g.ctx, g.err);
	send_slot(C, D, 2, &z);
	tx_done(C, &z, what);
	g = next(D, what);
	t_assert(g.ctx == &x && !g.err, "%s: d's receive: context %p err %d",
		 what, g.ctx, g.err);
	quiet(D, what);
	t_assert(holds(2, 21), "%s: the message is not in d's receive", what);
	printf("digest: format: the send's entry, then the receive's, which "
	       "holds the message\n");
	t_ok("%s: the message completes the receive", what);
}

static void cancel(void)
{
	const char *what = "the application's fi_cancel";
	struct fi_context2 c2, c3, s;
	struct ent g[2];
	ssize_t ret;
	int k;

	poison(0);
	poison(1);
	load(3, 31);
	recv_slot(B, 0, &c2);
	recv_slot(B, 1, &c3);
	ret = fi_cancel(&ep[B].ep->fid, &c2);
	t_assert(!ret, "%s: fi_cancel returned %zd (%s)", what, ret,
		 fi_strerror((int) -ret));
	send_slot(A, B, 3, &s);
	tx_done(A, &s, what);
	g[0] = next(B, what);
	g[1] = next(B, what);
	quiet(B, what);
	k = g[0].ctx == &c3;
	t_assert(g[k].ctx == &c2 && g[k].err == FI_ECANCELED, "%s: c2's "
		 "entry: context %p err %d (%s), expected FI_ECANCELED", what,
		 g[k].ctx, g[k].err, fi_strerror(g[k].err));
	t_assert(g[!k].ctx == &c3 && !g[!k].err && g[!k].len == LEN, "%s: "
		 "c3's entry: context %p err %d (%s) len %zu", what,
		 g[!k].ctx, g[!k].err, fi_strerror(g[!k].err), g[!k].len);
	t_assert(poisoned(0), "%s: c2's buffer was written", what);
	t_mem_get(scratch, dst + SLOT, LEN);
	t_assert(t_check(scratch, LEN, 31), "%s: c3 lacks the message", what);
	printf("digest: cancel: c2 FI_ECANCELED and untouched, c3 holds the "
	       "message\n");
	t_ok("%s: c2 ends cancelled, c3 takes the message", what);
}

static void nocontext(void)
{
	const char *what = "a receive without a context";
	struct fi_context2 s;
	struct ent g;

	poison(0);
	load(2, 41);
	recv_slot(B, 0, NULL);
	send_slot(A, B, 2, &s);
	tx_done(A, &s, what);
	g = next(B, what);
	t_assert(!g.ctx && !g.err && g.len == LEN, "%s: entry context %p err "
		 "%d (%s) len %zu", what, g.ctx, g.err, fi_strerror(g.err),
		 g.len);
	quiet(B, what);
	t_assert(holds(0, 41), "%s: the message is not in the receive", what);
	printf("digest: nocontext: the message in the receive\n");
	t_ok("%s: takes a message", what);
}

/* A send of bounded, with no progress driven on either side: the
 * provider alone pushes back once its queues are full. */
static bool pushed_back(int i, struct fi_context2 *ctx)
{
	ssize_t ret = fi_send(ep[A].ep, qsrc + (size_t) i * SMALL, SMALL,
			      qsrc_mr.desc, addr[A][B], &ctx[i]);

	if (ret == -FI_EAGAIN)
		return true;
	t_fi(ret);
	return false;
}

static void bounded(void)
{
	const char *what = "messages with no receive posted";
	struct fi_context2 *ctx = calloc(MAXQ, sizeof(*ctx)), r;
	bool *seen = calloc(MAXQ, 1);
	int n, i, id;
	struct ent g;

	t_assert(ctx && seen, "out of memory");
	qsrc = t_mem_alloc((size_t) MAXQ * SMALL);
	t_reg(&fab, qsrc, (size_t) MAXQ * SMALL, FI_SEND, 5, &qsrc_mr);
	for (i = 0; i < MAXQ; i++) {
		t_fill(scratch, SMALL, 1000 + i);
		memcpy(scratch, &i, sizeof(i));
		t_mem_put(qsrc + (size_t) i * SMALL, scratch, SMALL);
	}
	/* One message first: connections and peers set up. */
	recv_slot(B, 0, &r);
	send_slot(A, B, 0, &ctx[0]);
	tx_done(A, &ctx[0], what);
	g = next(B, what);
	t_assert(g.ctx == &r && !g.err, "%s: the first message", what);
	for (n = 0; n < MAXQ && !pushed_back(n, ctx); n++)
		;
	t_assert(n < MAXQ, "%s: %d sends, none pushed back", what, MAXQ);
	for (i = 0; i < n; i++)
		tx_done(A, &ctx[i], what);
	quiet(A, what);
	/* Every accepted message, once each, into one receive at a time. */
	for (i = 0; i < n; i++) {
		poison(0);
		recv_slot(B, 0, &r);
		g = next(B, what);
		t_assert(g.ctx == &r && !g.err && g.len == SMALL, "%s: receive "
			 "%d: context %p err %d (%s) len %zu", what, i, g.ctx,
			 g.err, fi_strerror(g.err), g.len);
		t_mem_get(scratch, dst, SMALL);
		memcpy(&id, scratch, sizeof(id));
		t_assert(id >= 0 && id < n && !seen[id], "%s: receive %d: "
			 "message %d", what, i, id);
		seen[id] = true;
		memcpy(scratch, &(int) { 0 }, sizeof(id));
		t_fill(scratch + SMALL, SMALL, 1000 + id);
		memcpy(scratch + SMALL, &(int) { 0 }, sizeof(id));
		t_assert(!memcmp(scratch, scratch + SMALL, SMALL), "%s: "
			 "message %d arrived corrupt", what, id);
	}
	recv_slot(B, 0, &r);
	quiet(B, what);
	t_assert(!fi_cancel(&ep[B].ep->fid, &r), "%s: fi_cancel", what);
	g = next(B, what);
	t_assert(g.ctx == &r && g.err == FI_ECANCELED, "%s: the last receive: "
		 "context %p err %d", what, g.ctx, g.err);
	t_fi(fi_close(&qsrc_mr.mr->fid));
	t_mem_free(qsrc);
	free(ctx);
	free(seen);
	printf("digest: bounded: pushed back; every message it accepted "
	       "received once, intact\n");
	t_ok("%s: pushed back after %d, all %d received", what, n, n);
}

/* ---- set-up ---------------------------------------------------------------- */

static void open_all(void)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = FI_MSG;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS;
	h->fabric_attr->prov_name = strdup(t_prov);
	if (t_open_hints(&fab, h) == -FI_ENODATA)
		t_skip("provider %s is not available here with FI_MSG and "
		       "FI_ORDER_SAS", t_prov);
	shared_ok = !(fab.info->mode & (FI_CONTEXT | FI_CONTEXT2));
	for (int e = 0; e < NEP; e++)
		t_ep_open(&ep[e], &fab, &(struct t_opts) {
			.cq_format = e >= C ? FI_CQ_FORMAT_CONTEXT :
					      FI_CQ_FORMAT_TAGGED });
	for (int from = 0; from < NEP; from++)
		for (int to = 0; to < NEP; to++)
			addr[from][to] = t_insert(&ep[from], ep[to].name);
	src = t_mem_alloc(NSLOT * SLOT);
	dst = t_mem_alloc(NSLOT * SLOT);
	t_reg(&fab, src, NSLOT * SLOT, FI_SEND, 1, &src_mr);
	t_reg(&fab, dst, NSLOT * SLOT, FI_RECV, 2, &dst_mr);
	t_reg(&fab, hsrc, SLOT, FI_SEND, 3, &hsrc_mr);
	t_reg(&fab, hdst, SLOT, FI_RECV, 4, &hdst_mr);
}

static void close_all(void)
{
	struct t_mr *mrs[] = { &src_mr, &dst_mr, &hsrc_mr, &hdst_mr };

	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		t_fi(fi_close(&mrs[i]->mr->fid));
	for (int e = 0; e < NEP; e++)
		t_ep_close(&ep[e]);
	t_close(&fab);
	t_mem_free(src);
	t_mem_free(dst);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "shared", shared },
	{ "format", format },
	{ "cancel", cancel },
	{ "nocontext", nocontext },
	{ "bounded", bounded },
};

int main(int argc, char **argv)
{
	const char *only = NULL;
	int c;

	t_init(argc, argv, "Hc:");
	while ((c = getopt(argc, argv, "p:Hc:")) != -1) {
		if (c == 'H')
			t_host = true;
		else if (c == 'c')
			only = optarg;
	}
	if (!t_host)
		t_cuda_init();
	open_all();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!only || strstr(only, cases[i].name))
			cases[i].run();
	close_all();
	return 0;
}
