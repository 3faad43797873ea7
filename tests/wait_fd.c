/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 2: FI_GETWAIT and fi_trywait. */
#include "wait.h"

static int trywait(void)
{
	struct fid *fids[] = { &x.a.cq->fid };

	return fi_trywait(x.f.fabric, fids, 1);
}

static bool open_fd(int *fd, const char *what)
{
	struct fx_opts o = { .await = FI_WAIT_FD };

	return fx_open(&x, &o, what) && fd_of(&x.a.cq->fid, fd, what);
}

/* With the entry unread fi_trywait says -FI_EAGAIN; read, it says 0. */
static void read_and_rearm(void *ctx, const char *what)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret;
	int tw;

	tw = trywait();
	t_assert(tw == -FI_EAGAIN, "%s: fi_trywait with a completion unread: "
		 "%d (%s), expected -FI_EAGAIN", what, tw, fi_strerror(-tw));
	ret = fi_cq_read(x.a.cq, &e, 1);
	t_assert(ret == 1, "%s: fi_cq_read: %zd (%s)", what, ret, rstr(ret));
	check_entry(&e, ctx, FI_RMA | FI_WRITE, what);
	expect_empty(x.a.cq, what);
	tw = trywait();
	t_assert(tw == 0, "%s: fi_trywait on the drained CQ: %d (%s)", what,
		 tw, fi_strerror(-tw));
}

void getwait(void)
{
	const char *what = "FI_GETWAIT fd";
	struct sleeper sl = { .how = EPOLL };
	struct epoll_event ev = { .events = EPOLLIN };
	struct pollfd p;
	int fd, tw, r, ctx, ctx2, ctx3;
	double dt;
	ssize_t ret;

	if (!open_fd(&fd, what))
		return;
	expect_empty(x.a.cq, what);
	tw = trywait();
	t_assert(tw == 0, "%s: fi_trywait on an empty CQ: %d (%s)", what, tw,
		 fi_strerror(-tw));

	/* poll() */
	fill_src();
	dev_write(&x, &ctx);
	p = (struct pollfd) { .fd = fd, .events = POLLIN };
	dt = t_now();
	r = poll(&p, 1, LONG_MS);
	dt = t_now() - dt;
	t_assert(r == 1 && (p.revents & POLLIN), "%s: poll after a device "
		 "write: %d (revents %#x) after %.2f s", what, r, p.revents,
		 dt);
	ret = fi_cq_read(x.a.cq, NULL, 0);
	t_assert(ret == 0, "%s: fi_cq_read(cq, NULL, 0) with a completion "
		 "waiting: %zd (%s), expected 0", what, ret, rstr(ret));
	read_and_rearm(&ctx, what);
	t_ok("%s: poll() readable after a device write (%.3f s), fi_trywait "
	     "-FI_EAGAIN until it is read, then 0", what, dt);

	/* epoll, queued */
	sl.epfd = epoll_create1(0);
	t_assert(sl.epfd >= 0, "epoll_create1");
	t_assert(!epoll_ctl(sl.epfd, EPOLL_CTL_ADD, fd, &ev), "epoll_ctl");
	dev_write(&x, &ctx2);
	r = epoll_wait(sl.epfd, &ev, 1, LONG_MS);
	t_assert(r == 1, "%s: epoll_wait after a device write: %d", what, r);
	read_and_rearm(&ctx2, what);
	t_ok("%s: epoll_wait returns after a device write", what);

	/* epoll, asleep in another thread */
	sleeper_start(&sl);
	dt = t_now();
	dev_write(&x, &ctx3);
	dt = sleeper_join(&sl, dt, what);
	t_assert(sl.ret == 1 && dt < EARLY_S, "%s: epoll_wait asleep: %zd, "
		 "%.2f s after the write", what, sl.ret, dt);
	read_and_rearm(&ctx3, what);
	close(sl.epfd);
	fx_close(&x);
	t_ok("%s: epoll_wait asleep in a thread woken %.3f s after a device "
	     "write", what, dt);
}

/* The loop of fi_poll(3): read until -FI_EAGAIN, fi_trywait, then poll
 * the fd; another thread writes meanwhile. No wake-up may be lost, no
 * completion missed or doubled. */
struct producer {
	int n;
	atomic_int *ctx;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	unsigned r = 1;

	t_cu(cuCtxSetCurrent(cu_ctx));
	for (int i = 0; i < p->n; i++) {
		dev_write(&x, &p->ctx[i]);
		r = r * 1103515245 + 12345;
		if (r >> 28 < 4)
			usleep(r >> 20 & 0xff);
	}
	return NULL;
}

void trywait_loop(void)
{
	const char *what = "fi_trywait/poll loop";
	struct producer pr = { .n = LOOP_OPS };
	struct fi_cq_tagged_entry e[8];
	int fd, got = 0, sleeps = 0, again = 0;
	pthread_t th;
	double dt;
	ssize_t ret;

	if (!open_fd(&fd, what))
		return;
	pr.ctx = calloc(pr.n, sizeof(*pr.ctx));
	t_assert(pr.ctx, "calloc");
	fill_src();
	dt = t_now();
	t_assert(!pthread_create(&th, NULL, produce, &pr), "pthread_create");
	while (got < pr.n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int tw, r;

		while ((ret = fi_cq_read(x.a.cq, e, 8)) > 0) {
			for (ssize_t i = 0; i < ret; i++) {
				atomic_int *c = e[i].op_context;

				t_assert(c >= pr.ctx && c < pr.ctx + pr.n,
					 "%s: completion for context %p", what,
					 (void *) c);
				t_assert(atomic_fetch_add(c, 1) == 0, "%s: "
					 "write %td completed twice", what,
					 c - pr.ctx);
			}
			got += ret;
		}
		t_assert(ret == -FI_EAGAIN, "%s: fi_cq_read: %zd (%s)", what,
			 ret, rstr(ret));
		tw = trywait();
		if (tw == -FI_EAGAIN) {
			again++;
			continue;
		}
		t_assert(!tw, "%s: fi_trywait: %d (%s)", what, tw,
			 fi_strerror(-tw));
		if (got == pr.n)
			break;
		sleeps++;
		r = poll(&p, 1, 3000);
		t_assert(r >= 0, "poll");
		if (!r)
			t_fail("%s: poll slept 3 s after fi_trywait said 0, "
			       "with %d of %d completions read (fi_cq_read(cq, "
			       "NULL, 0) now: %zd)", what, got, pr.n,
			       fi_cq_read(x.a.cq, NULL, 0));
	}
	t_assert(!pthread_join(th, NULL), "pthread_join");
	for (int i = 0; i < pr.n; i++)
		t_assert(atomic_load(&pr.ctx[i]) == 1, "%s: write %d completed "
			 "%d times", what, i, atomic_load(&pr.ctx[i]));
	expect_empty(x.a.cq, what);
	dt = t_now() - dt;
	free(pr.ctx);
	fx_close(&x);
	t_ok("%s: %d writes, each completed once; %d polls, %d fi_trywait "
	     "-FI_EAGAIN (%.2f s)", what, pr.n, sleeps, again, dt);
}

/* fi_cq_sread racing fi_cq_read of another thread while device writes
 * complete: each completion read once, and sread returns entries or an
 * error, never 0. */
#define RACE_OPS	200000
#define RACE_S		2.0
#define NRACERS		4	/* one in fi_cq_sread, the rest in fi_cq_read */

struct racer {
	bool sread;
	atomic_int *ctx;
	atomic_int *stop;
	long calls;
	atomic_long zeros, got;
	ssize_t bad;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct fi_cq_tagged_entry e[4];
	ssize_t ret;

	t_cu(cuCtxSetCurrent(cu_ctx));
	while (!atomic_load(r->stop)) {
		ret = r->sread ? fi_cq_sread(x.a.cq, e, 4, NULL,
					     r->calls & 1) :
				 fi_cq_read(x.a.cq, e, 4);
		r->calls++;
		if (!ret)
			r->zeros++;
		if (ret == -FI_EAGAIN || !ret || (r->sread &&
		    (ret == signalled_ret() || ret == sread_timedout())))
			continue;
		if (ret < 0) {
			r->bad = ret;
			break;
		}
		for (ssize_t i = 0; i < ret; i++) {
			atomic_int *c = e[i].op_context;

			if (c < r->ctx || c >= r->ctx + RACE_OPS ||
			    atomic_fetch_add(c, 1)) {
				r->bad = 1;
				return NULL;
			}
		}
		r->got += ret;
	}
	return NULL;
}

void sread_race(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC };
	const char *what = "fi_cq_sread racing fi_cq_read";
	struct racer r[NRACERS] = { { .sread = true } };
	atomic_int stop = 0, *ctx;
	pthread_t th[NRACERS];
	double end;
	long n = 0, got;

	if (!fx_open(&x, &o, what))
		return;
	ctx = calloc(RACE_OPS, sizeof(*ctx));
	t_assert(ctx, "calloc");
	fill_src();
	for (int i = 0; i < NRACERS; i++) {
		r[i].ctx = ctx;
		r[i].stop = &stop;
		t_assert(!pthread_create(&th[i], NULL, race, &r[i]),
			 "pthread_create");
	}
	end = t_now() + RACE_S;
	while (n < RACE_OPS && t_now() < end && !r[0].zeros) {
		t_post(x.a.cq, fi_write(x.a.ep, dsrc, 64, x.src.desc,
					x.b_in_a, t_raddr(&x.f, &x.dst, 0),
					x.dst.key, &ctx[n]));
		/* Now and then the application wakes the sread itself. */
		if (!(++n & 15))
			t_fi(fi_cq_signal(x.a.cq));
	}
	/* The rest, then release the sread. */
	end = t_now() + 5;
	do {
		usleep(1000);
		got = 0;
		for (int i = 0; i < NRACERS; i++)
			got += r[i].got;
	} while (got < n && t_now() < end && !r[0].zeros);
	atomic_store(&stop, 1);
	t_fi(fi_cq_signal(x.a.cq));
	for (int i = 0; i < NRACERS; i++)
		t_assert(!pthread_join(th[i], NULL), "pthread_join");
	for (int i = 0; i < NRACERS; i++)
		t_assert(!r[i].bad, "%s: %s gave %zd (%s)", what,
			 r[i].sread ? "fi_cq_sread" : "fi_cq_read", r[i].bad,
			 r[i].bad < 0 ? fi_strerror((int) -r[i].bad) :
			 "an unknown or repeated context");
	t_assert(!r[0].zeros, "%s: fi_cq_sread returned 0 (no entries, no "
		 "error) %ld times in %ld calls, after %ld device writes",
		 what, r[0].zeros, r[0].calls, n);
	got = 0;
	for (int i = 0; i < NRACERS; i++)
		got += r[i].got;
	t_assert(got == n, "%s: %ld completions read for %ld writes", what,
		 got, n);
	expect_empty(x.a.cq, what);
	free(ctx);
	fx_close(&x);
	t_ok("%s: %ld device writes, each completion read once (%ld by "
	     "fi_cq_sread in %ld calls)", what, n, r[0].got, r[0].calls);
}
