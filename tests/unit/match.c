/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The matcher (shim/msg/match.c, rxq.c, deliver.c), on a fake provider: a
 * same-process message goes to the first receive, in posting order, that
 * takes it, whatever its state (the provider's, kept, held), skipping
 * those being taken back, cancelled or that cannot be; a receive being
 * given to the provider is waited for. Tagged and untagged receives are
 * two lists; tags match but for the ignored bits; a directed receive takes
 * its source's messages alone. A multi-receive buffer stays in its place
 * while room is left, and is released below min_multi. A message no
 * receive takes waits, staged, for the next receive that matches it, in
 * order. A failure names the rule broken.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "fake_prov.h"
#include "unit.h"

#define SENDER 7		/* the sender's fi_addr in the receiver's AV */
#define OTHER 3

enum from { ANY, FROM_SENDER, FROM_OTHER };

struct rxdef {
	int state;		/* enum hml_rx_state */
	int list;		/* HML_UNTAGGED, HML_TAGGED */
	uint64_t tag, ignore;
	enum from from;
	bool unclaimable;
};

#define RX(st, ...) { .state = HML_RX_##st, __VA_ARGS__ }
#define TAGGED .list = HML_TAGGED

static const struct row {
	const char *rule;
	int n;
	struct rxdef rx[3];
	int tagged;		/* the message */
	uint64_t tag;
	bool undirected;	/* the endpoint lacks FI_DIRECTED_RECV */
	int want;		/* the receive that takes it; -1: staged */
} rows[] = {
	{ "the oldest receive that takes a message takes it",
	  2, { RX(POSTED), RX(POSTED) }, .want = 0 },
	{ "a kept receive takes it where it is first",
	  2, { RX(KEPT), RX(POSTED) }, .want = 0 },
	{ "a held receive takes it where it is first",
	  2, { RX(HELD), RX(KEPT) }, .want = 0 },
	{ "a receive the provider holds comes before a later kept one",
	  2, { RX(POSTED), RX(KEPT) }, .want = 0 },
	{ "a receive the provider holds comes before a later held one",
	  2, { RX(POSTED), RX(HELD) }, .want = 0 },
	{ "a receive being given to the provider is waited for, not passed",
	  2, { RX(POSTING), RX(KEPT) }, .want = 0 },
	{ "a receive another sender is taking back is skipped",
	  2, { RX(CANCELING), RX(KEPT) }, .want = 1 },
	{ "a receive the application is cancelling is skipped",
	  2, { RX(APP_CANCELING), RX(POSTED) }, .want = 1 },
	{ "a receive the provider would not give back is skipped",
	  2, { RX(POSTED, .unclaimable = true), RX(HELD) }, .want = 1 },
	{ "an untagged message skips tagged receives",
	  2, { RX(KEPT, TAGGED), RX(KEPT) }, .want = 1 },
	{ "a tagged message skips untagged receives",
	  2, { RX(KEPT), RX(POSTED, TAGGED, .tag = 5) }, HML_TAGGED, 5,
	  .want = 1 },
	{ "a tagged receive takes its tag only",
	  2, { RX(POSTED, TAGGED, .tag = 4), RX(POSTED, TAGGED, .tag = 5) },
	  HML_TAGGED, 5, .want = 1 },
	{ "the ignored bits of a tag match any",
	  2, { RX(KEPT, TAGGED, .tag = 0x10, .ignore = 0xf), RX(KEPT, TAGGED) },
	  HML_TAGGED, 0x1a, .want = 0 },
	{ "the bits not ignored must match",
	  2, { RX(KEPT, TAGGED, .tag = 0x20, .ignore = 0xf),
	       RX(KEPT, TAGGED, .tag = 0x1a) }, HML_TAGGED, 0x1a, .want = 1 },
	{ "a directed receive skips another source's messages",
	  2, { RX(POSTED, TAGGED, .from = FROM_OTHER),
	       RX(POSTED, TAGGED, .from = FROM_SENDER) }, HML_TAGGED, 0,
	  .want = 1 },
	{ "a directed untagged receive kept here takes its source's",
	  2, { RX(KEPT, .from = FROM_OTHER), RX(KEPT, .from = FROM_SENDER) },
	  .want = 1 },
	{ "without FI_DIRECTED_RECV a receive's source is no filter",
	  1, { RX(POSTED, TAGGED, .from = FROM_OTHER) }, HML_TAGGED, 0,
	  .undirected = true, .want = 0 },
	{ "a message no receive takes is staged",
	  2, { RX(KEPT, TAGGED), RX(CANCELING) }, .want = -1 },
};

static struct hml_fabric fabric;
static struct hml_domain dom;
static struct fake_ep s;	/* the sender */
static struct hml_av av;	/* the receivers' */

static ssize_t send_msg(struct fake_ep *t, int tagged, uint64_t tag,
			const char *msg)
{
	size_t n = strlen(msg) + 1;
	struct hml_side src = { .count = 1, .len = n };
	struct fi_msg_tagged m = { .tag = tag };
	struct hml_op op = {
		.e = &s.e, .t = &t->e, .kind = tagged ? HML_TSEND : HML_SEND,
		.cntr = HML_CNTR_NONE,
	};

	src.iov[0] = (struct iovec) { (void *) msg, n };
	src.mem[0].type = HML_MEM_HOST;
	return hml_msg_send(&op, t->q, &m, tagged, &src, false);
}

/* The rule under test, for what the fake provider sees. */
static const char *doing;

/* A sender takes back only what the provider was given. Said at once: a
 * sender that goes on may crash. */
static void cancelled(void *ctx)
{
	u_check(fake_holds(ctx), "%s: a sender cancels a receive the "
		"provider does not have", doing);
	fflush(stdout);
}

/* The receiver's queue for a row: the provider forgets the last. */
static void open_t(struct fake_ep *t, uint64_t caps, size_t min_multi)
{
	fake_reset();
	fake.min_multi = min_multi;
	fake.on_cancel = cancelled;
	fake_ep_open(t, &dom, caps, true);
	t->e.av = &av;
}

static void close_t(struct fake_ep *t)
{
	fake_reset();
	fake_ep_close(t);
}

/* A receive being given to the provider: another thread gives it, a
 * little later. Cancelled before, the provider would not have it. */
static void *given(void *arg)
{
	struct hml_rx *r = arg;

	usleep(20000);
	pthread_mutex_lock(&r->q->lock);
	/* Returns with the queue unlocked. */
	hml_rx_submit(r->q, r);
	return NULL;
}

static int which(const struct hml_cqe *e, const char *ctx, int n)
{
	for (int i = 0; i < n; i++)
		if (e->op_context == &ctx[i])
			return i;
	return -2;
}

static void run(const struct row *w)
{
	static const fi_addr_t src[] = { FI_ADDR_UNSPEC, SENDER, OTHER };
	char ctx[3], buf[3][16];
	struct hml_rx *r[3];
	struct hml_cqe e = { 0 };
	struct fake_ep t;
	pthread_t thread;
	bool got, busy = false;
	ssize_t ret;

	doing = w->rule;
	open_t(&t, w->undirected ? 0 : FI_DIRECTED_RECV, 0);
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < w->n; i++) {
		const struct rxdef *d = &w->rx[i];

		r[i] = fake_rx(t.q, d->list, &ctx[i], buf[i], sizeof(buf[i]),
			       0);
		r[i]->tag = d->tag;
		r[i]->ignore = d->ignore;
		r[i]->src = src[d->from];
		r[i]->unclaimable = d->unclaimable;
		if (d->state != HML_RX_POSTING) {
			fake_place(t.q, r[i], d->state);
		} else {
			fake_place(t.q, r[i], HML_RX_KEPT);
			r[i]->state = HML_RX_POSTING;
			pthread_create(&thread, NULL, given, r[i]);
			busy = true;
		}
	}
	ret = send_msg(&t, w->tagged, w->tag, "hello");
	if (busy)
		pthread_join(thread, NULL);
	u_check(ret == 0, "%s: the send returned %zd", w->rule, ret);
	got = fake_entry(&t.cq, &e);
	if (w->want < 0) {
		u_check(!got && t.q->nunexp == 1, "%s: receive %d took it, "
			"%zu staged", w->rule, got ? which(&e, ctx, w->n) : -1,
			t.q->nunexp);
	} else {
		u_check(got && which(&e, ctx, w->n) == w->want && !e.err,
			"%s: receive %d took it (error %d), expected %d",
			w->rule, got ? which(&e, ctx, w->n) : -1, e.err,
			w->want);
		u_check(!strcmp(buf[w->want], "hello"), "%s: receive %d's "
			"buffer holds \"%.16s\"", w->rule, w->want,
			buf[w->want]);
	}
	for (int i = 0; i < w->n; i++)
		u_check(i == w->want || !buf[i][0], "%s: receive %d written",
			w->rule, i);
	close_t(&t);
}

/* hml_rx_multi_left: room is at least min_multi bytes left. */
static void multi_left(void)
{
	static const struct {
		const char *rule;
		size_t len, used, min;
		bool room;
	} rows[] = {
		{ "an empty buffer has room", 64, 0, 16, true },
		{ "exactly min_multi left is room", 64, 48, 16, true },
		{ "less than min_multi left is none", 64, 49, 16, false },
		{ "with min_multi 0, a byte left is room", 64, 63, 0, true },
		{ "a full buffer has none, even with min_multi 0", 64, 64, 0,
		  false },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct hml_rx r = { .used = rows[i].used,
				    .min_multi = rows[i].min };

		r.iov = r.iov_in;
		r.iov_in[0].iov_len = rows[i].len;
		u_check(hml_rx_multi_left(&r) == rows[i].room, "%s",
			rows[i].rule);
	}
}

/*
 * A kept multi-receive buffer of 64 bytes, min_multi 16, then a receive:
 * messages fill the buffer in place, each at the next 8-byte boundary,
 * until less than 16 is left; it is released then, and the next message
 * goes to the receive after it.
 */
static void multi_in_place(void)
{
	static const struct {
		const char *rule;
		const char *msg;
		int rx;		/* 0: the buffer, 1: the receive */
		size_t off;
		bool released;
	} steps[] = {
		{ "a multi-receive buffer takes a message at its start",
		  "nineteen bytes ...", 0, 0, false },
		{ "with room left it stays first, and takes the next at the "
		  "8-byte boundary after the last", "nineteen bytes ...", 0,
		  24, false },
		{ "it is released with FI_MULTI_RECV once less than min_multi "
		  "is left", "abc", 0, 48, true },
		{ "released, the receive after it takes the next", "abc", 1, 0,
		  false },
	};
	char ctx[2], buf[64], other[16];
	struct hml_cqe e;
	struct hml_rx *m, *r;
	struct fake_ep t;

	doing = "a multi-receive buffer in place";
	open_t(&t, 0, 16);
	m = fake_rx(t.q, HML_UNTAGGED, &ctx[0], buf, sizeof(buf),
		    FI_MULTI_RECV);
	fake_place(t.q, m, HML_RX_KEPT);
	r = fake_rx(t.q, HML_UNTAGGED, &ctx[1], other, sizeof(other), 0);
	fake_place(t.q, r, HML_RX_KEPT);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		char *at = (steps[i].rx ? other : buf) + steps[i].off;

		u_check(send_msg(&t, HML_UNTAGGED, 0, steps[i].msg) == 0 &&
			fake_entry(&t.cq, &e), "%s: no completion",
			steps[i].rule);
		u_check(e.op_context == &ctx[steps[i].rx] &&
			(steps[i].rx || e.buf == at) &&
			!strcmp(at, steps[i].msg), "%s: not there",
			steps[i].rule);
		u_check(!(e.flags & FI_MULTI_RECV) == !steps[i].released,
			"%s: FI_MULTI_RECV %s", steps[i].rule,
			steps[i].released ? "missing" : "too early");
	}
	close_t(&t);
}

/* Messages staged, then receives posted: hml_rx_take_waiting. */
static bool post(struct fake_ep *t, struct hml_rx *r)
{
	bool left;

	pthread_mutex_lock(&t->q->lock);
	left = hml_rx_take_waiting(t->q, r);
	hml_rx_free(r);
	pthread_mutex_unlock(&t->q->lock);
	return left;
}

static void waiting(void)
{
	char ctx[4], a[16], b[16], c[16], d[64];
	struct hml_rx *r;
	struct hml_cqe e;
	struct fake_ep t;

	doing = "staged messages";
	open_t(&t, 0, 16);
	send_msg(&t, HML_UNTAGGED, 0, "one");
	send_msg(&t, HML_TAGGED, 1, "tag1");
	send_msg(&t, HML_TAGGED, 2, "tag2");
	send_msg(&t, HML_UNTAGGED, 0, "two");
	send_msg(&t, HML_UNTAGGED, 0, "three");
	u_check(t.q->nunexp == 5 && !fake_entry(&t.cq, &e),
		"messages with no receive are staged: %zu", t.q->nunexp);

	r = fake_rx(t.q, HML_TAGGED, &ctx[0], a, sizeof(a), 0);
	r->tag = 2;
	u_check(!post(&t, r) && fake_entry(&t.cq, &e) &&
		e.op_context == &ctx[0] && !strcmp(a, "tag2"),
		"a tagged receive takes the staged message of its tag, "
		"skipping another tag's, and is not given to the provider");
	r = fake_rx(t.q, HML_UNTAGGED, &ctx[1], b, sizeof(b), 0);
	u_check(!post(&t, r) && fake_entry(&t.cq, &e) &&
		e.op_context == &ctx[1] && !strcmp(b, "one"),
		"an untagged receive takes the oldest untagged message "
		"staged, skipping tagged ones: \"%s\"", b);
	r = fake_rx(t.q, HML_TAGGED, &ctx[2], c, sizeof(c), 0);
	r->ignore = ~0ULL;
	u_check(!post(&t, r) && !strcmp(c, "tag1") && fake_entry(&t.cq, &e),
		"a receive taking any tag takes the oldest tagged message "
		"staged: \"%s\"", c);
	u_check(t.q->nunexp == 2, "a plain receive takes one message: %zu "
		"left", t.q->nunexp);

	r = fake_rx(t.q, HML_UNTAGGED, &ctx[3], d, sizeof(d), FI_MULTI_RECV);
	u_check(post(&t, r), "a multi-receive buffer with room left after "
		"the messages waiting goes on to the provider");
	u_check(fake_entry(&t.cq, &e) && e.buf == d && !strcmp(d, "two") &&
		fake_entry(&t.cq, &e) && e.buf == d + 8 &&
		!strcmp(d + 8, "three") && t.q->nunexp == 0,
		"a multi-receive buffer takes every message waiting, oldest "
		"first, each after the last");
	close_t(&t);
}

static int av_lookup(struct fid_av *fav, fi_addr_t addr, void *buf,
		     size_t *len)
{
	(void) fav; (void) addr; (void) buf; (void) len;
	return -FI_ENOSYS;
}

int main(void)
{
	static struct fi_ops_av av_ops = {
		.size = sizeof(av_ops), .lookup = av_lookup,
	};
	fi_addr_t at = SENDER;
	struct fid_av fav;

	fake_domain(&dom, &fabric, FI_PROGRESS_MANUAL, 0);
	fake_ep_open(&s, &dom, 0, true);
	/* The sender is in the receivers' AV at SENDER: the source of its
	 * messages there. */
	s.e.addr_format = FI_ADDR_STR;
	strcpy(s.e.name, "fi_shm://s");
	s.e.namelen = strlen(s.e.name) + 1;
	hml_self_add(&s.e);
	hml_av_on_found(NULL);
	av.prov = &av_ops;
	av.av = &fav;
	av.addr_format = FI_ADDR_STR;
	pthread_mutex_init(&av.lock, NULL);
	hml_av_inserted(&av, s.e.name, 1, &at, true);
	u_check(hml_av_source(&av, &s.e) == SENDER, "the sender's address");

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(&rows[i]);
	multi_left();
	multi_in_place();
	waiting();

	hml_self_remove(&s.e);
	fake_ep_close(&s);
	hml_hold_domain_fini(&dom);
	return u_done("match: every rule's row");
}
