/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 3: counters. */
#include "wait.h"

/* The counter reaches v (and not more) within a bounded time. */
static void cntr_expect(uint64_t (*get)(struct fid_cntr *), uint64_t v,
			const char *what)
{
	double end = t_now() + 2;
	uint64_t got;

	while ((got = get(x.cntr)) < v && t_now() < end)
		usleep(1000);
	t_assert(got == v, "%s: counter %llu, expected %llu", what,
		 (unsigned long long) got, (unsigned long long) v);
}

static void wait_err(struct fid_cq *cq, void *ctx, const char *what)
{
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, NULL, &err);

	t_assert(ret == 1 && err.op_context == ctx, "%s: expected an error "
		 "completion for %p, got %d", what, ctx, ret);
}

void cntr_run(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC, .cntr = true };
	struct sleeper sl = { .how = CNTR_WAIT };
	const char *what = "FI_WRITE counter";
	int c[6], ret;
	uint64_t v, e;
	double dt;
	bool late;

	if (!fx_open(&x, &o, what))
		return;
	v = fi_cntr_read(x.cntr);
	e = fi_cntr_readerr(x.cntr);
	fill_src();
	dev_write(&x, &c[0]);
	t_expect(x.a.cq, &c[0], FI_RMA | FI_WRITE, (size_t) -1);
	cntr_expect(fi_cntr_read, v + 1, what);
	t_assert(fi_cntr_readerr(x.cntr) == e, "%s: error count moved", what);
	bad_write(&x, &c[1]);
	wait_err(x.a.cq, &c[1], what);
	cntr_expect(fi_cntr_readerr, e + 1, what);
	t_assert(fi_cntr_read(x.cntr) == v + 1, "%s: success count moved on "
		 "an error", what);
	t_ok("%s: fi_cntr_read and fi_cntr_readerr count device writes",
	     what);

	t_fi(fi_cntr_set(x.cntr, 100));
	cntr_expect(fi_cntr_read, 100, what);
	dev_write(&x, &c[2]);
	t_expect(x.a.cq, &c[2], FI_RMA | FI_WRITE, (size_t) -1);
	cntr_expect(fi_cntr_read, 101, what);
	t_fi(fi_cntr_seterr(x.cntr, 50));
	cntr_expect(fi_cntr_readerr, 50, what);
	bad_write(&x, &c[3]);
	wait_err(x.a.cq, &c[3], what);
	cntr_expect(fi_cntr_readerr, 51, what);
	cntr_expect(fi_cntr_read, 101, what);
	t_ok("%s: fi_cntr_set and fi_cntr_seterr, then device writes add",
	     what);

	dt = t_now();
	ret = fi_cntr_wait(x.cntr, 101, LONG_MS);
	dt = t_now() - dt;
	t_assert(!ret && dt < EARLY_S, "%s: fi_cntr_wait for a value reached:"
		 " %d (%s) after %.2f s", what, ret, fi_strerror(-ret), dt);
	/* Does fi_cntr_wait wait? Not sockets' (it returns ETIMEDOUT,
	 * positive, at once: its condition variable and its deadline use
	 * different clocks): then the cases asleep prove nothing. shm's
	 * FI_WAIT_YIELD spins until signalled, timeout or not: a wake-up
	 * missed there is a wait that never ends, which sleeper_join
	 * fails. */
	sl.cntr = x.cntr;
	sl.threshold = 1000;
	sl.timeout = SHORT_MS;
	dt = t_now();
	t_assert(!pthread_create(&sl.th, NULL, sleeper_run, &sl),
		 "pthread_create");
	if (!sleeper_within(&sl, 2)) {
		t_fi(fi_cntr_set(x.cntr, 1000));
		t_assert(!pthread_join(sl.th, NULL), "pthread_join");
		t_fi(fi_cntr_set(x.cntr, 101));
		printf("note: %s's fi_cntr_wait ignores its timeout\n",
		       t_prov);
	} else if (sl.ret != -FI_ETIMEDOUT || sl.end - dt < SHORT_MS * 0.8e-3) {
		t_case_skip("%s: fi_cntr_wait asleep: %s's returns %zd after "
			  "%.3f s for a count not reached (timeout %d ms), "
			  "without hmemloop too", what, t_prov, sl.ret,
			  sl.end - dt, SHORT_MS);
		fx_close(&x);
		return;
	}
	sl.timeout = 0;

	sl.threshold = 102;
	sleeper_start(&sl);
	dt = t_now();
	dev_write(&x, &c[4]);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == 0 && dt < EARLY_S, "%s: fi_cntr_wait(102) asleep: "
		 "%zd (%s) %.2f s after the write", what, sl.ret, rstr(sl.ret),
		 dt);
	t_expect(x.a.cq, &c[4], FI_RMA | FI_WRITE, (size_t) -1);
	cntr_expect(fi_cntr_read, 102, what);
	t_ok("%s: fi_cntr_wait woken %.3f s after a device write", what, dt);

	/* sockets 2.x looks at errors only when its wait ends, and
	 * fi_cntr_adderr does not end it: its timeout does (1.17's clock
	 * bug ended it at once). Without the error, -FI_ETIMEDOUT. */
	late = !strcmp(t_prov, "sockets") && FI_MAJOR(fi_version()) >= 2;
	sl.threshold = 200;
	sleeper_start(&sl);
	dt = t_now();
	bad_write(&x, &c[5]);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == -FI_EAVAIL && (late || dt < EARLY_S), "%s: "
		 "fi_cntr_wait(200) asleep, device write fails: %zd (%s) %.2f s "
		 "after it, expected -FI_EAVAIL", what, sl.ret, rstr(sl.ret),
		 dt);
	wait_err(x.a.cq, &c[5], what);
	cntr_expect(fi_cntr_readerr, 52, what);
	t_fi(fi_cntr_set(x.cntr, 0));
	t_fi(fi_cntr_seterr(x.cntr, 0));
	cntr_expect(fi_cntr_read, 0, what);
	cntr_expect(fi_cntr_readerr, 0, what);
	fx_close(&x);
	t_ok("%s: fi_cntr_wait ended by a failed device write (-FI_EAVAIL, "
	     "%.3f s)", what, dt);
}
