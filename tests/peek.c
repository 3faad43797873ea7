/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_PEEK, FI_CLAIM and FI_DISCARD (fi_tagged(3)) on tagged messages an
 * endpoint sent to itself, as MPI_Probe, MPI_Improbe and MPI_Mrecv use them
 * (issue 28, case 6: through hmemloop the peek never found the message,
 * which hmemloop held, and the application waited for ever). Run by the
 * harness with and without hmemloop ("digest:" lines).
 *
 *   peek     a message sent, then injected: the peek finds its length and
 *            tag, the receive after it takes it
 *   none     a peek of a tag no message has: FI_ENOMSG
 *   claim    FI_PEEK | FI_CLAIM, then FI_CLAIM with the same context
 *            receives it; another receive does not
 *   discard  FI_PEEK | FI_DISCARD, and FI_CLAIM | FI_DISCARD after a
 *            claim: the message is gone
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

#define LEN 100

static struct t_fabric f;
static struct t_ep e;
static fi_addr_t self;

/* The next entry, success or error, as a digest line with the length
 * and tag where fi_tagged(3) defines them (a receive's, a peek's); 0 or
 * the error, FI_ENOMSG being an answer, not a failure. */
static int report(void *ctx, bool len, const char *what)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret = t_wait(e.cq, &ent, &err);

	t_assert(ret != -FI_EAGAIN, "%s: no completion", what);
	if (ret) {
		t_assert(err.op_context == ctx, "%s: error for %p, expected %p",
			 what, err.op_context, ctx);
		printf("digest: %s: error %s\n", what, fi_strerror(err.err));
		return err.err;
	}
	t_assert(ent.op_context == ctx, "%s: entry for %p, expected %p", what,
		 ent.op_context, ctx);
	if (len)
		printf("digest: %s: len %zu tag %#lx\n", what, ent.len,
		       (unsigned long) ent.tag);
	else
		printf("digest: %s: done\n", what);
	return 0;
}

static void tsend(uint64_t tag, bool inject, unsigned seed)
{
	static char buf[LEN];
	struct fi_context2 ctx;

	t_fill(buf, LEN, seed);
	if (inject) {
		t_post(e.cq, fi_tinject(e.ep, buf, LEN, self, tag));
		return;
	}
	t_post(e.cq, fi_tsend(e.ep, buf, LEN, NULL, self, tag, &ctx));
	report(&ctx, false, "send");
}

static ssize_t trecvmsg(void *buf, uint64_t tag, void *ctx, uint64_t flags)
{
	struct iovec iov = { buf, buf ? LEN : 0 };
	struct fi_msg_tagged m = {
		.msg_iov = &iov, .iov_count = buf ? 1 : 0,
		.addr = FI_ADDR_UNSPEC, .tag = tag, .context = ctx,
	};

	return fi_trecvmsg(e.ep, &m, flags | FI_COMPLETION);
}

/* A receive of tag; its bytes must be seed's. */
static void take(uint64_t tag, unsigned seed, const char *what)
{
	char buf[LEN] = { 0 };
	struct fi_context2 ctx;

	t_post(e.cq, trecvmsg(buf, tag, &ctx, 0));
	report(&ctx, true, what);
	t_assert(t_check(buf, LEN, seed), "%s: wrong bytes", what);
}

/* Peek (with more flags) until the message is found, as MPI_Probe does:
 * one still moving is not found yet. Quiet until the answer. */
static void peek(uint64_t tag, void *ctx, uint64_t flags, const char *what)
{
	double end = t_now() + t_wait_s();
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret;

	for (;;) {
		t_post(e.cq, trecvmsg(NULL, tag, ctx, FI_PEEK | flags));
		ret = t_wait(e.cq, &ent, &err);
		if (ret != 1 || err.err != FI_ENOMSG || t_now() > end)
			break;
		t_drive(e.cq);
	}
	t_assert(ret != -FI_EAGAIN, "%s: no completion", what);
	t_assert((ret ? err.op_context : ent.op_context) == ctx,
		 "%s: completion for another context", what);
	if (ret)
		printf("digest: %s: error %s\n", what, fi_strerror(err.err));
	else if (flags & FI_DISCARD)
		printf("digest: %s: tag %#lx\n", what, (unsigned long) ent.tag);
	else
		printf("digest: %s: len %zu tag %#lx\n", what, ent.len,
		       (unsigned long) ent.tag);
}

static void case_peek(void)
{
	struct fi_context2 p;

	for (int inject = 0; inject < 2; inject++) {
		const char *what = inject ? "peek injected" : "peek sent";

		tsend(0x11, inject, 1);
		peek(0x11, &p, 0, what);
		take(0x11, 1, "receive after the peek");
	}
}

static void case_none(void)
{
	struct fi_context2 p;

	t_post(e.cq, trecvmsg(NULL, 0x22, &p, FI_PEEK));
	report(&p, true, "peek of no message");
}

static void case_claim(void)
{
	char buf[LEN] = { 0 };
	struct fi_context2 p, other;

	tsend(0x33, false, 3);
	peek(0x33, &p, FI_CLAIM, "peek and claim");
	/* Claimed: a plain receive of the tag does not get it. */
	t_post(e.cq, trecvmsg(buf, 0x33, &other, 0));
	t_assert(t_quiet(e.cq, 200), "a claimed message went to another "
		 "receive");
	t_post(e.cq, trecvmsg(buf, 0x33, &p, FI_CLAIM));
	report(&p, true, "claimed receive");
	t_assert(t_check(buf, LEN, 3), "claimed receive: wrong bytes");
	t_fi(fi_cancel(&e.ep->fid, &other));
	report(&other, false, "the other receive, cancelled");
}

static void case_discard(void)
{
	struct fi_context2 p;

	tsend(0x44, false, 4);
	peek(0x44, &p, FI_DISCARD, "peek and discard");
	t_post(e.cq, trecvmsg(NULL, 0x44, &p, FI_PEEK));
	report(&p, true, "peek after the discard");

	tsend(0x55, false, 5);
	peek(0x55, &p, FI_CLAIM, "peek and claim");
	t_post(e.cq, trecvmsg(NULL, 0x55, &p, FI_CLAIM | FI_DISCARD));
	report(&p, false, "claimed, discarded");
	t_post(e.cq, trecvmsg(NULL, 0x55, &p, FI_PEEK));
	report(&p, true, "peek after the claim's discard");
}

static const struct t_case cases[] = {
	T_CASE("peek", case_peek),
	T_CASE("none", case_none),
	T_CASE("claim", case_claim),
	T_CASE("discard", case_discard),
};

static void setup(void)
{
	/* shm 1.17 (and the EFA double on it) answers a peek of a message
	 * it holds with FI_ETRUNC, and never receives it after. */
	if (!strcmp(t_prov, "shm") || !strcmp(t_prov, "efa")) {
		printf("digest: not run: %s's peek\n", t_prov);
		exit(0);
	}
	t_open(&f, NULL);
	t_ep_open(&e, &f, NULL);
	self = t_insert(&e, e.name);
}

static void teardown(void)
{
	t_ep_close(&e);
	t_close(&f);
}

T_MAIN(cases, .setup = setup, .teardown = teardown);
