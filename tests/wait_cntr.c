/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 3: counters, and their own wait objects
 * (FI_GETWAIT, fi_trywait). */
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

/* ---- a counter where each kind of operation counts ------------------- */

/* A same-process device fi_read by a of b's region. */
static void dev_read(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_read(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				t_raddr(&x->f, &x->dst, 0), x->dst.key, ctx));
}

/* A device receive posted on b, then a's send to it. */
static void recv_send(struct fx *x, void *ctx)
{
	dev_recv(x, ctx);
	dev_send(x, ctx);
}

const struct counted counted[NCOUNTED] = {
	{ "a's FI_WRITE counter", FI_WRITE, dev_write },
	{ "b's FI_REMOTE_WRITE counter", FI_REMOTE_WRITE, dev_write },
	{ "b's FI_REMOTE_READ counter", FI_REMOTE_READ, dev_read },
	{ "dst region's counter", FI_RMA_EVENT, dev_write },
	{ "b's FI_RECV counter", FI_RECV, recv_send },
};

/* The fixture with c's counter, of wait object w (in a wait set of kind
 * set where w is FI_WAIT_SET); false if the provider lacks it. */
bool counted_open(const struct counted *c, enum fi_wait_obj w,
		  enum fi_wait_obj set, const char *what)
{
	struct fx_opts o = { .cntr = true, .cwait = w, .set = set,
			     .count = c->count };

	if (c->count & (FI_REMOTE_WRITE | FI_REMOTE_READ | FI_RMA_EVENT))
		o.caps = FI_RMA_EVENT;
	return fx_open(&x, &o, what);
}

/* The operation counted once, and no error: after the wait is judged, as
 * reading the counter progresses it. */
void counted_once(const char *what)
{
	double end = t_now() + 2;
	uint64_t v;

	while ((v = fi_cntr_read(x.cntr)) < 1 && t_now() < end)
		usleep(1000);
	t_assert(v == 1 && !fi_cntr_readerr(x.cntr), "%s: counter %llu, "
		 "errors %llu, expected 1 and 0", what, (unsigned long long) v,
		 (unsigned long long) fi_cntr_readerr(x.cntr));
}

/* ---- a counter's own wait object: FI_GETWAIT and fi_trywait ---- */

static int cntr_trywait(void)
{
	struct fid *fids[] = { &x.cntr->fid };

	return fi_trywait(x.f.fabric, fids, 1);
}

/* c's counter of FI_WAIT_FD, its fd from FI_GETWAIT; false (after saying
 * why) if the provider lacks either. */
static bool cntr_fd_open(const struct counted *c, int *fd, const char *what)
{
	return counted_open(c, FI_WAIT_FD, 0, what) &&
	       fd_of(&x.cntr->fid, fd, what);
}

/* The application's loop on an fd: fi_trywait says it may sleep, and a
 * thread sleeps in epoll_wait until the operation is counted. */
static void cntr_fd_one(const struct counted *c)
{
	struct sleeper sl = { .how = EPOLL };
	struct epoll_event ev = { .events = EPOLLIN };
	char what[96];
	int fd, tw, ctx;
	double dt;

	snprintf(what, sizeof(what), "%s, FI_GETWAIT fd", c->name);
	if (!cntr_fd_open(c, &fd, what))
		return;
	tw = cntr_trywait();
	t_assert(!tw, "%s: fi_trywait with nothing counted: %d (%s)", what,
		 tw, fi_strerror(-tw));
	sl.epfd = epoll_create1(0);
	t_assert(sl.epfd >= 0, "epoll_create1");
	t_assert(!epoll_ctl(sl.epfd, EPOLL_CTL_ADD, fd, &ev), "epoll_ctl");
	fill_src();
	dt = sleeper_woken(&sl, c->op, &ctx, what);
	t_assert(sl.ret == 1 && dt < EARLY_S, "%s: epoll_wait asleep: %zd, "
		 "%.2f s after the device operation", what, sl.ret, dt);
	counted_once(what);
	close(sl.epfd);
	fx_close(&x);
	t_ok("%s: epoll_wait asleep after fi_trywait woken %.3f s after a "
	     "device operation", what, dt);
}

/* A write in flight when the fd is taken: fi_trywait counts it, or says
 * not to sleep. */
static void cntr_fd_queued(void)
{
	const char *what = "FI_WRITE counter, FI_GETWAIT after a write";
	struct pollfd p;
	int fd, tw, r, ctx;
	double dt;

	if (!counted_open(&counted[0], FI_WAIT_FD, 0, what))
		return;
	fill_src();
	dev_write(&x, &ctx);
	if (!fd_of(&x.cntr->fid, &fd, what))
		return;
	tw = cntr_trywait();
	t_assert(!tw || tw == -FI_EAGAIN, "%s: fi_trywait: %d (%s)", what, tw,
		 fi_strerror(-tw));
	p = (struct pollfd) { .fd = fd, .events = POLLIN };
	dt = t_now();
	r = tw ? 1 : poll(&p, 1, LONG_MS);
	dt = t_now() - dt;
	t_assert(r == 1 && dt < EARLY_S, "%s: poll after fi_trywait said 0: "
		 "%d after %.2f s", what, r, dt);
	counted_once(what);
	fx_close(&x);
	t_ok("%s: fi_trywait %s, the fd readable", what,
	     tw ? "-FI_EAGAIN" : "0");
}

void cntr_fd(void)
{
	cntr_fd_queued();
	for (int i = 0; i < NCOUNTED; i++)
		cntr_fd_one(&counted[i]);
}

/* The loop of fi_poll(3) on a counter: read it, fi_trywait, poll its fd,
 * while another thread writes. Every write counted, no wake-up lost.
 * Nothing reads a's CQ, which would progress: it holds them all. Each
 * count writes a byte to sockets' fd, which nothing reads here: a few
 * hundred fill it, and the next count blocks, with or without hmemloop. */
#define CNTR_LOOP_OPS	100

static void *produce(void *arg)
{
	int *ctx = arg;

	t_cu(cuCtxSetCurrent(cu_ctx));
	for (int i = 0; i < CNTR_LOOP_OPS; i++) {
		dev_write(&x, ctx);
		if (i % 7 == 0)
			usleep(i % 300);
	}
	return NULL;
}

void cntr_trywait_loop(void)
{
	const char *what = "counter fi_trywait/poll loop";
	int fd, ctx, sleeps = 0, again = 0;
	pthread_t th;
	uint64_t v;
	double dt;

	if (!cntr_fd_open(&counted[0], &fd, what))
		return;
	fill_src();
	dt = t_now();
	t_assert(!pthread_create(&th, NULL, produce, &ctx), "pthread_create");
	while ((v = fi_cntr_read(x.cntr)) < CNTR_LOOP_OPS) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int tw = cntr_trywait();
		int r;

		if (tw == -FI_EAGAIN) {
			again++;
			continue;
		}
		t_assert(!tw, "%s: fi_trywait: %d (%s)", what, tw,
			 fi_strerror(-tw));
		sleeps++;
		r = poll(&p, 1, 3000);
		t_assert(r >= 0, "poll");
		if (!r)
			t_fail("%s: poll slept 3 s after fi_trywait said 0, "
			       "with %llu of %d writes counted", what,
			       (unsigned long long) fi_cntr_read(x.cntr),
			       CNTR_LOOP_OPS);
	}
	t_assert(!pthread_join(th, NULL), "pthread_join");
	t_assert(v == CNTR_LOOP_OPS && !fi_cntr_readerr(x.cntr), "%s: counter "
		 "%llu, errors %llu, for %d writes", what,
		 (unsigned long long) v,
		 (unsigned long long) fi_cntr_readerr(x.cntr), CNTR_LOOP_OPS);
	dt = t_now() - dt;
	fx_close(&x);
	t_ok("%s: %d writes counted; %d polls, %d fi_trywait -FI_EAGAIN "
	     "(%.2f s)", what, CNTR_LOOP_OPS, sleeps, again, dt);
}
