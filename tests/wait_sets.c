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

void waitset(void)
{
	/* sockets' wait sets read its own rings, and libfabric has no call
	 * that signals a wait set: what hmemloop queues cannot show there
	 * (README, Limits). */
	if (!strcmp(t_prov, "sockets")) {
		t_case_skip("wait sets: sockets' cannot see hmemloop's entries "
			    "(a documented limit)");
		return;
	}
	waitset_one(FI_WAIT_UNSPEC);
	waitset_one(FI_WAIT_FD);
	waitset_one(FI_WAIT_MUTEX_COND);
}

/* A poll set holding fid, which has nothing to report yet; NULL (x
 * closed, after saying why) if the provider has none. */
static struct fid_poll *pollset_open(struct fid *fid, const char *what)
{
	struct fi_poll_attr pa = { 0 };
	struct fid_poll *ps;
	void *ctxs[4];
	int ret;

	ret = fi_poll_open(x.f.domain, &pa, &ps);
	if (ret) {
		t_case_skip("%s: %s has none (fi_poll_open: %s)", what, t_prov,
			    fi_strerror(-ret));
		fx_close(&x);
		return NULL;
	}
	t_fi(fi_poll_add(ps, fid, 0));
	ret = fi_poll(ps, ctxs, 4);
	t_assert(ret == 0, "%s: fi_poll with nothing to report: %d", what,
		 ret);
	return ps;
}

void pollset(void)
{
	static int marker;
	struct fx_opts o = { .await = FI_WAIT_NONE, .acq_ctx = &marker };
	const char *what = "poll set";
	struct fi_cq_tagged_entry e;
	struct fid_poll *ps;
	void *ctxs[4];
	int ret, ctx;
	double dt;

	if (!fx_open(&x, &o, what) ||
	    !(ps = pollset_open(&x.a.cq->fid, what)))
		return;
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

/* ---- a counter in a wait set, in a poll set ---- */

/* Does fi_wait on x's set wait for its timeout? Not sockets' of
 * FI_WAIT_MUTEX_COND (its condition variable and its deadline use
 * different clocks): then a wait asleep proves nothing. */
static bool set_waits(const char *what)
{
	double dt = t_now();
	int ret = fi_wait(x.ws, SHORT_MS);

	dt = t_now() - dt;
	if (ret == -FI_ETIMEDOUT && dt >= SHORT_MS * 0.8e-3)
		return true;
	t_case_skip("%s: %s's fi_wait returns %d after %.3f s with nothing to "
		    "report (timeout %d ms), without hmemloop too", what,
		    t_prov, ret, dt, SHORT_MS);
	return false;
}

/* False if the set does not wait. */
static bool cntr_waitset_one(const struct counted *c, enum fi_wait_obj kind,
			     bool probe)
{
	struct sleeper sl = { .how = WAITSET };
	char what[128];
	int ctx;
	double dt;

	snprintf(what, sizeof(what), "%s in a %s wait set", c->name,
		 wait_name(kind));
	if (!counted_open(c, FI_WAIT_SET, kind, what))
		return true;
	if (probe && !set_waits(what)) {
		fx_close(&x);
		return false;
	}
	sl.ws = x.ws;
	fill_src();
	dt = sleeper_woken(&sl, c->op, &ctx, what);
	t_assert(sl.ret == 0 && dt < EARLY_S, "%s: fi_wait asleep: %zd (%s) "
		 "%.2f s after the device operation", what, sl.ret,
		 rstr(sl.ret), dt);
	counted_once(what);
	fx_close(&x);
	t_ok("%s: fi_wait asleep woken %.3f s after a device operation", what,
	     dt);
	return true;
}

void cntr_waitset(void)
{
	static const enum fi_wait_obj kinds[] = {
		FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND,
	};

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (int i = 0; i < NCOUNTED; i++)
			if (!cntr_waitset_one(&counted[i], kinds[k], !i))
				break;
}

static void cntr_pollset_one(const struct counted *c)
{
	struct fid_poll *ps;
	char what[96];
	void *ctxs[4];
	int ret, ctx;
	double dt;

	snprintf(what, sizeof(what), "%s in a poll set", c->name);
	if (!counted_open(c, FI_WAIT_NONE, 0, what) ||
	    !(ps = pollset_open(&x.cntr->fid, what)))
		return;
	fill_src();
	c->op(&x, &ctx);
	/* As for a CQ: reported once the copy is over, to a poll that
	 * comes again. */
	dt = t_now();
	while (!(ret = fi_poll(ps, ctxs, 4)) && t_now() - dt < EARLY_S)
		;
	t_assert(ret == 1 && ctxs[0] == &x.cntr, "%s: fi_poll after a device "
		 "operation: %d (%s)", what, ret, ret < 0 ? fi_strerror(-ret) :
		 ret ? "another context" : "nothing");
	counted_once(what);
	ret = fi_poll(ps, ctxs, 4);
	t_assert(ret == 0, "%s: fi_poll again, nothing counted since: %d",
		 what, ret);
	t_fi(fi_poll_del(ps, &x.cntr->fid, 0));
	t_fi(fi_close(&ps->fid));
	fx_close(&x);
	t_ok("%s: fi_poll reports the counter once after a device operation",
	     what);
}

void cntr_pollset(void)
{
	for (int i = 0; i < NCOUNTED; i++)
		cntr_pollset_one(&counted[i]);
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

void cntr_waitset(void)
{
	waitset();
}

void cntr_pollset(void)
{
	pollset();
}
#endif
