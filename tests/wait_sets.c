/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 5: wait sets and poll sets. */
#include "wait.h"

#ifdef WAIT_SETS

static void waitset_one(enum fi_wait_obj kind)
{
	struct fx_opts o = { .set = kind };
	struct sleeper sl = { .how = WAITSET };
	struct fi_cq_tagged_entry e;
	char what[96];
	int ctx, ctx2, ret;
	double dt;

	snprintf(what, sizeof(what), "%s wait set", wait_name(kind));
	if (!fx_open(&x, &o, what))
		return;
	dt = t_now();
	ret = fi_wait(x.ws, SHORT_MS);
	dt = t_now() - dt;
	t_assert(ret == -FI_ETIMEDOUT, "%s: fi_wait with nothing to report: "
		 "%d (%s) after %.3f s, expected -FI_ETIMEDOUT", what, ret,
		 fi_strerror(-ret), dt);

	fill_src();
	dev_write(&x, &ctx);
	dt = t_now();
	ret = fi_wait(x.ws, LONG_MS);
	dt = t_now() - dt;
	t_assert(!ret && dt < EARLY_S, "%s: fi_wait after a device write: %d "
		 "(%s) after %.2f s", what, ret, fi_strerror(-ret), dt);
	t_assert(fi_cq_read(x.a.cq, &e, 1) == 1, "%s: nothing to read", what);
	check_entry(&e, &ctx, FI_RMA | FI_WRITE, what);
	t_ok("%s: fi_wait returns for a device write queued (%.3f s)", what,
	     dt);

	sl.ws = x.ws;
	dt = sleeper_woken(&sl, dev_write, &ctx2, what);
	t_assert(sl.ret == 0 && dt < EARLY_S, "%s: fi_wait asleep: %zd (%s) "
		 "%.2f s after the write", what, sl.ret, rstr(sl.ret), dt);
	t_assert(fi_cq_read(x.a.cq, &e, 1) == 1, "%s: nothing to read", what);
	check_entry(&e, &ctx2, FI_RMA | FI_WRITE, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: fi_wait asleep woken %.3f s after a device write", what,
	     dt);
}

/* sockets' wait and poll sets read its own rings, and libfabric has no
 * call that signals a wait set: what hmemloop queues cannot show there
 * (README, Limits). */
static bool sockets_sets(const char *what)
{
	if (strcmp(t_prov, "sockets"))
		return false;
	t_case_skip("%s: sockets' wait and poll sets cannot see hmemloop's "
		  "entries (a documented limit)", what);
	return true;
}

void waitset(void)
{
	if (sockets_sets("wait sets"))
		return;
	waitset_one(FI_WAIT_UNSPEC);
	waitset_one(FI_WAIT_FD);
	waitset_one(FI_WAIT_MUTEX_COND);
}

void pollset(void)
{
	static int marker;
	struct fx_opts o = { .await = FI_WAIT_NONE, .acq_ctx = &marker };
	const char *what = "poll set";
	struct fi_poll_attr pa = { 0 };
	struct fi_cq_tagged_entry e;
	struct fid_poll *ps;
	void *ctxs[4];
	int ret, ctx;
	double dt;

	if (sockets_sets(what) || !fx_open(&x, &o, what))
		return;
	ret = fi_poll_open(x.f.domain, &pa, &ps);
	if (ret) {
		t_case_skip("%s: %s has none (fi_poll_open: %s)", what, t_prov,
			  fi_strerror(-ret));
		fx_close(&x);
		return;
	}
	t_fi(fi_poll_add(ps, &x.a.cq->fid, 0));
	ret = fi_poll(ps, ctxs, 4);
	t_assert(ret == 0, "%s: fi_poll with nothing to report: %d", what,
		 ret);
	fill_src();
	dev_write(&x, &ctx);
	/* Its copy may still be running on the GPU: the CQ is reported once
	 * the completion is there, to a poll that comes again. */
	dt = t_now();
	while (!(ret = fi_poll(ps, ctxs, 4)) && t_now() - dt < EARLY_S)
		;
	t_assert(ret == 1 && ctxs[0] == &marker, "%s: fi_poll after a device "
		 "write: %d (%s)", what, ret, ret < 0 ? fi_strerror(-ret) :
		 ret ? "another context" : "nothing");
	t_assert(fi_cq_read(x.a.cq, &e, 1) == 1, "%s: nothing to read", what);
	check_entry(&e, &ctx, FI_RMA | FI_WRITE, what);
	ret = fi_poll(ps, ctxs, 4);
	t_assert(ret == 0, "%s: fi_poll after the CQ is drained: %d", what,
		 ret);
	t_fi(fi_poll_del(ps, &x.a.cq->fid, 0));
	t_fi(fi_close(&ps->fid));
	fx_close(&x);
	t_ok("%s: fi_poll reports the CQ while a device write's completion "
	     "waits, and not after", what);
}
#else
void waitset(void)
{
	t_case_skip("wait sets: built against libfabric %d.%d, which deprecates "
		  "them", FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

void pollset(void)
{
	t_case_skip("poll sets: built against libfabric %d.%d, which deprecates "
		  "them", FI_MAJOR_VERSION, FI_MINOR_VERSION);
}
#endif
