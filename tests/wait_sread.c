/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 1: fi_cq_sread and fi_cq_sreadfrom. */
#include "wait.h"

/* (a) A completion already queued: returned at once. */
static void sread_queued_one(enum fi_wait_obj w, bool from)
{
	struct fx_opts o = { .await = w };
	struct sleeper sl = { .how = from ? SREADFROM : SREAD, .count = 4 };
	char what[96];
	unsigned s;
	double dt;
	int ctx;

	snprintf(what, sizeof(what), "%s on a %s CQ, entry queued",
		 from ? "fi_cq_sreadfrom" : "fi_cq_sread", wait_name(w));
	if (!fx_open(&x, &o, what))
		return;
	s = fill_src();
	dev_write(&x, &ctx);
	sl.cq = x.a.cq;
	dt = sleeper_now(&sl, what);
	t_assert(sl.ret == 1, "%s: %zd (%s) after %.2f s, expected 1 entry",
		 what, sl.ret, rstr(sl.ret), dt);
	t_assert(dt < EARLY_S, "%s: returned after %.2f s", what, dt);
	check_entry(&sl.ent[0], &ctx, FI_RMA | FI_WRITE, what);
	check_dst(s, LEN, what);
	fx_close(&x);
	t_ok("%s: returned at once (%.3f s)", what, dt);
}

void sread_queued(void)
{
	for (size_t i = 0; i < NWAITS; i++) {
		sread_queued_one(sread_waits[i], false);
		sread_queued_one(sread_waits[i], true);
	}
}

/* (b) A thread asleep in sread, woken by a device write of another. */
static void woken_run(bool from, const char *what)
{
	struct sleeper sl = { .how = from ? SREADFROM : SREAD, .count = 4 };
	unsigned s;
	double dt;
	int ctx;

	s = fill_src();
	sl.cq = x.a.cq;
	sleeper_start(&sl);
	dt = t_now();
	dev_write(&x, &ctx);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == 1, "%s: %zd (%s) %.2f s after the write, expected "
		 "1 entry", what, sl.ret, rstr(sl.ret), dt);
	t_assert(dt < EARLY_S, "%s: woken %.2f s after the write", what, dt);
	check_entry(&sl.ent[0], &ctx, FI_RMA | FI_WRITE, what);
	check_dst(s, LEN, what);
	expect_empty(x.a.cq, what);
	t_ok("%s: woken %.3f s after the write (timeout %d ms)", what, dt,
	     LONG_MS);
}

void sread_woken(void)
{
	char what[96];

	for (size_t i = 0; i < NWAITS; i++) {
		for (int from = 0; from < 2; from++) {
			struct fx_opts o = { .await = sread_waits[i] };

			snprintf(what, sizeof(what), "%s on a %s CQ, asleep",
				 from ? "fi_cq_sreadfrom" : "fi_cq_sread",
				 wait_name(sread_waits[i]));
			if (!fx_open(&x, &o, what))
				continue;
			woken_run(from, what);
			fx_close(&x);
		}
	}
}

/*
 * After a wake-up for a device write, the next sread of the drained CQ
 * blocks for its whole timeout, as it would without hmemloop; so it does
 * after device writes to a CQ whose fd the application exported, and
 * after an sread that found its write in flight, waited for it and
 * returned its entry at once (the wake-up it sent itself is spent).
 */
static void rewait_one(int how)
{
	static const char *const hows[] = {
		"fi_cq_sread on a FI_WAIT_UNSPEC CQ, asleep",
		"fi_cq_sreadfrom on a FI_WAIT_UNSPEC CQ, asleep",
		"device writes to a FI_WAIT_FD CQ its fd exported, read",
		"fi_cq_sread on a FI_WAIT_UNSPEC CQ, its write in flight",
	};
	struct fx_opts o = { .await = how == 2 ? FI_WAIT_FD : FI_WAIT_UNSPEC };
	struct sleeper sl = { .how = SREAD, .count = 4, .timeout = SHORT_MS };
	const char *what = hows[how];
	double dt;
	int fd, ctx[2];

	if (!fx_open(&x, &o, what))
		return;
	if (!sread_times_out(x.a.cq)) {
		t_case_skip("%s: %s's fi_cq_sread of an empty CQ ignores its "
			  "timeout, without hmemloop too", what, t_prov);
		fx_close(&x);
		return;
	}
	if (how < 2) {
		woken_run(how, what);
	} else if (how == 3) {
		fill_src();
		dev_write(&x, &ctx[0]);
		sl.cq = x.a.cq;
		dt = sleeper_now(&sl, what);
		t_assert(sl.ret == 1, "%s: %zd (%s), expected its entry", what,
			 sl.ret, rstr(sl.ret));
		check_entry(&sl.ent[0], &ctx[0], FI_RMA | FI_WRITE, what);
	} else {
		if (fi_control(&x.a.cq->fid, FI_GETWAIT, &fd)) {
			t_case_skip("%s: %s gives no fd", what, t_prov);
			fx_close(&x);
			return;
		}
		fill_src();
		for (int i = 0; i < 2; i++) {
			dev_write(&x, &ctx[i]);
			t_expect(x.a.cq, &ctx[i], FI_RMA | FI_WRITE,
				 (size_t) -1);
		}
	}
	sl.cq = x.a.cq;
	dt = sleeper_now(&sl, what);
	t_assert(sl.ret == -FI_EAGAIN && dt >= SHORT_MS * 0.8e-3, "%s, then "
		 "fi_cq_sread of the drained CQ: %zd (%s) after %.3f s, "
		 "expected -FI_EAGAIN after its %d ms timeout", what, sl.ret,
		 rstr(sl.ret), dt, SHORT_MS);
	fx_close(&x);
	t_ok("%s, then fi_cq_sread of the drained CQ: waited its timeout "
	     "(%.3f s)", what, dt);
}

void sread_rewait(void)
{
	for (int how = 0; how < 4; how++)
		rewait_one(how);
}

/* (c) The application's own fi_cq_signal still ends a sread as it did
 * without hmemloop, shim entries read or not: a thread's asleep, and one
 * that comes after it. */
static void signal_one(enum fi_wait_obj w, bool before)
{
	struct fx_opts o = { .await = w };
	struct sleeper sl = { .how = SREAD, .count = 4 };
	char what[128];
	double dt;
	int ctx;

	snprintf(what, sizeof(what), "fi_cq_signal to fi_cq_sread on a %s "
		 "CQ, %s", wait_name(w), before ? "sent before it" : "asleep");
	if (!fx_open(&x, &o, what))
		return;
	fill_src();
	dev_write(&x, &ctx);
	t_expect(x.a.cq, &ctx, FI_RMA | FI_WRITE, (size_t) -1);
	sl.cq = x.a.cq;
	if (before) {
		t_fi(fi_cq_signal(x.a.cq));
		dt = sleeper_now(&sl, what);
	} else {
		sleeper_start(&sl);
		dt = t_now();
		t_fi(fi_cq_signal(x.a.cq));
		dt = sleeper_join(&sl, dt, what);
	}
	t_assert(sl.ret == signalled_ret(), "%s: %zd (%s), expected %zd (%s)",
		 what, sl.ret, rstr(sl.ret), signalled_ret(),
		 rstr(signalled_ret()));
	t_assert(dt < EARLY_S, "%s: returned %.2f s after the signal", what,
		 dt);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: %s after %.3f s", what, rstr(sl.ret), dt);
}

void sread_signal(void)
{
	for (size_t i = 0; i < NWAITS; i++) {
		signal_one(sread_waits[i], false);
		signal_one(sread_waits[i], true);
	}
}

/* (d) FI_SOURCE: the sender's address of a same-process device message,
 * queued and to a thread asleep. */
void sread_source(void)
{
	struct fx_opts o = { .caps = FI_SOURCE, .await = FI_WAIT_UNSPEC,
			     .bwait = FI_WAIT_UNSPEC };
	struct sleeper sl = { .how = SREADFROM };
	const char *what = "fi_cq_sreadfrom of a device message (FI_SOURCE)";
	int sctx, rctx, sctx2, rctx2;
	unsigned s;
	double dt;

	if (!fx_open(&x, &o, what))
		return;
	dev_recv(&x, &rctx);
	s = fill_src();
	dev_send(&x, &sctx);
	t_expect(x.a.cq, &sctx, FI_MSG | FI_SEND, (size_t) -1);
	sl.cq = x.b.cq;
	sl.src[0] = FI_ADDR_NOTAVAIL;
	dt = sleeper_now(&sl, what);
	t_assert(sl.ret == 1 && dt < EARLY_S, "%s: %zd (%s) after %.2f s",
		 what, sl.ret, rstr(sl.ret), dt);
	check_entry(&sl.ent[0], &rctx, FI_MSG | FI_RECV, what);
	t_assert(sl.ent[0].len == LEN, "%s: len %zu", what, sl.ent[0].len);
	t_assert(sl.src[0] == x.a_in_b, "%s: source %#llx, expected %#llx",
		 what, (unsigned long long) sl.src[0],
		 (unsigned long long) x.a_in_b);
	check_dst(s, LEN, what);
	t_ok("%s, queued: source %llu at once", what,
	     (unsigned long long) sl.src[0]);
	sl.src[0] = FI_ADDR_NOTAVAIL;

	dev_recv(&x, &rctx2);
	s = fill_src();
	dt = sleeper_woken(&sl, dev_send, &sctx2, what);
	t_assert(sl.ret == 1 && dt < EARLY_S, "%s, asleep: %zd (%s) %.2f s "
		 "after the send", what, sl.ret, rstr(sl.ret), dt);
	check_entry(&sl.ent[0], &rctx2, FI_MSG | FI_RECV, what);
	t_assert(sl.src[0] == x.a_in_b, "%s, asleep: source %#llx, expected "
		 "%#llx", what, (unsigned long long) sl.src[0],
		 (unsigned long long) x.a_in_b);
	check_dst(s, LEN, what);
	t_expect(x.a.cq, &sctx2, FI_MSG | FI_SEND, (size_t) -1);
	fx_close(&x);
	t_ok("%s, asleep: source %llu, woken after %.3f s", what,
	     (unsigned long long) sl.src[0], dt);
}

/* (e) FI_CQ_COND_THRESHOLD: shim entries count toward the threshold. */
void sread_threshold(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC,
			     .acond = FI_CQ_COND_THRESHOLD };
	const char *what = "fi_cq_sread, threshold 3, 3 device writes queued";
	struct sleeper sl = { .how = SREAD, .count = 8,
			      .cond = (void *) (uintptr_t) 3 };
	int ctx[3];
	double dt;

	if (!fx_open(&x, &o, what))
		return;
	fill_src();
	for (int i = 0; i < 3; i++)
		dev_write(&x, &ctx[i]);
	sl.cq = x.a.cq;
	dt = sleeper_now(&sl, what);
	t_assert(sl.ret == 3 && dt < EARLY_S, "%s: %zd (%s) after %.2f s, "
		 "expected 3 at once", what, sl.ret, rstr(sl.ret), dt);
	for (int i = 0; i < 3; i++)
		check_entry(&sl.ent[i], &ctx[i], FI_RMA | FI_WRITE, what);
	fx_close(&x);
	t_ok("%s: 3 after %.3f s", what, dt);
}

/* An error entry hmemloop made, next: -FI_EAVAIL, queued or asleep. */
void sread_error(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC };
	struct sleeper sl = { .how = SREAD, .count = 4 };
	const char *what = "fi_cq_sread, error entry next";
	int ctx, ctx2;
	double dt;

	if (!fx_open(&x, &o, what))
		return;
	good_write(&x, what);
	bad_write(&x, &ctx);
	sl.cq = x.a.cq;
	dt = sleeper_now(&sl, what);
	t_assert(sl.ret == -FI_EAVAIL && dt < EARLY_S, "%s, queued: %zd (%s) "
		 "after %.2f s, expected -FI_EAVAIL at once", what, sl.ret,
		 rstr(sl.ret), dt);
	expect_err(x.a.cq, &ctx, what);
	t_ok("%s, queued: -FI_EAVAIL at once", what);

	sleeper_start(&sl);
	dt = t_now();
	bad_write(&x, &ctx2);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == -FI_EAVAIL && dt < EARLY_S, "%s, asleep: %zd (%s) "
		 "%.2f s after the write, expected -FI_EAVAIL", what, sl.ret,
		 rstr(sl.ret), dt);
	expect_err(x.a.cq, &ctx2, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s, asleep: -FI_EAVAIL %.3f s after the write", what, dt);
}
