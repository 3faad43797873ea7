/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 6: blocking reads where receives of a
 * tracked endpoint complete. */
#include "wait.h"

enum { RECV_FIRST, TAGGED, SEND_FIRST };

/* b's receive or a's send, tagged where how says. */
static void half(int how, bool recv, void *rctx, void *sctx)
{
	if (recv && how == TAGGED)
		dev_trecv(&x, 0x77, rctx);
	else if (recv)
		dev_recv(&x, rctx);
	else if (how == TAGGED)
		dev_tsend(&x, 0x77, sctx);
	else
		dev_send(&x, sctx);
}

static void tracked_one(enum fi_wait_obj w, int how)
{
	static const char *const hows[] = { "fi_recv posted, then fi_send",
		"fi_trecv posted, then fi_tsend",
		"fi_send, then fi_recv posted" };
	struct fx_opts o = { .await = FI_WAIT_UNSPEC, .bwait = w };
	struct sleeper sl = { .how = SREAD, .count = 4 };
	char what[128];
	int sctx, rctx;
	unsigned s;
	double dt;

	snprintf(what, sizeof(what), "fi_cq_sread of b's %s CQ asleep, %s by "
		 "another thread", wait_name(w), hows[how]);
	if (!fx_open(&x, &o, what))
		return;
	s = fill_src();
	half(how, how != SEND_FIRST, &rctx, &sctx);
	sl.cq = x.b.cq;
	sleeper_start(&sl);
	dt = t_now();
	half(how, how == SEND_FIRST, &rctx, &sctx);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == 1 && dt < EARLY_S, "%s: %zd (%s) %.2f s after it",
		 what, sl.ret, rstr(sl.ret), dt);
	check_entry(&sl.ent[0], &rctx, (how == TAGGED ? FI_TAGGED : FI_MSG) |
		    FI_RECV, what);
	t_assert(sl.ent[0].len == LEN, "%s: len %zu", what, sl.ent[0].len);
	check_dst(s, LEN, what);
	t_expect(x.a.cq, &sctx, FI_SEND, (size_t) -1);
	expect_empty(x.b.cq, what);
	fx_close(&x);
	t_ok("%s: woken %.3f s after it", what, dt);
}

void tracked_sread(void)
{
	for (int how = RECV_FIRST; how <= SEND_FIRST; how++) {
		tracked_one(FI_WAIT_UNSPEC, how);
		tracked_one(FI_WAIT_FD, how);
	}
}
