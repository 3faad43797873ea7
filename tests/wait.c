/*
 * Waiting: every way an application waits for completions sees the ones
 * hmemloop reports for same-process device operations, which the provider
 * never hears of. Blocking CQ reads (fi_cq_sread, fi_cq_sreadfrom,
 * FI_CQ_COND_THRESHOLD, fi_cq_signal), a CQ's exported wait object with
 * fi_trywait, counters, error entries in the layout of each API version,
 * wait sets, poll sets, and blocking reads where the receives of a tracked
 * endpoint complete.
 *
 * Each case opens a fabric of its own: endpoints a and b in one domain,
 * b's address in a's address vector (so b's receives are recorded), and
 * two registered device buffers. A wait that must end early is given 5 s
 * and must end within 1 s, so that without hmemloop (or without its wait
 * handling) every case fails rather than hangs. "-c NAME,..." runs only
 * the cases named; a provider without a wait object kind or feature skips
 * that case, saying so.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN		(16 * 1024)
#define LONG_MS		5000	/* a wait that must end early... */
#define EARLY_S		1.0	/* ...ends within this */
#define SETTLE_US	200000	/* for a thread to fall asleep */
#define SHORT_MS	300	/* a wait that must run its course */
#define BAD_KEY		0x7e57ba5eULL
#ifndef LOOP_OPS
#define LOOP_OPS	1000	/* fi_trywait/poll loop: writes */
#endif
#define V(a, b)		FI_VERSION(a, b)

/* libfabric 2.0 deprecates wait sets and poll sets. Built against its
 * headers, the cases about them are left out, as an application built there
 * would leave them out; applications built against 1.x still use them on
 * 2.x, and the 1.x build of this test run on 2.x covers that. */
#if FI_MAJOR_VERSION < 2
#define WAIT_SETS 1
#endif

static CUcontext cu_ctx;
static void *dsrc, *ddst;		/* device buffers, LEN bytes each */
static uint8_t host[LEN];
static unsigned seed = 0x3a17;

static const char *wait_name(enum fi_wait_obj w)
{
	switch (w) {
	case FI_WAIT_NONE: return "FI_WAIT_NONE";
	case FI_WAIT_UNSPEC: return "FI_WAIT_UNSPEC";
	case FI_WAIT_SET: return "FI_WAIT_SET";
	case FI_WAIT_FD: return "FI_WAIT_FD";
	case FI_WAIT_MUTEX_COND: return "FI_WAIT_MUTEX_COND";
	case FI_WAIT_YIELD: return "FI_WAIT_YIELD";
	case FI_WAIT_POLLFD: return "FI_WAIT_POLLFD";
	default: return "?";
	}
}

/* The CQ wait objects fi_cq_sread works with. */
static const enum fi_wait_obj sread_waits[] = {
	FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
	FI_WAIT_POLLFD,
};
#define NWAITS (sizeof(sread_waits) / sizeof(sread_waits[0]))

/* What a thread blocked in fi_cq_sread gets from fi_cq_signal, without
 * hmemloop: sockets answers -FI_ECANCELED (sock_cq.c), util -FI_EAGAIN. */
static ssize_t signalled_ret(void)
{
	return !strcmp(t_prov, "sockets") ? -FI_ECANCELED : -FI_EAGAIN;
}

/* What fi_cq_sread returns on timeout: rxd_cq_sreadfrom of libfabric
 * 1.17 answers -FI_ETIMEDOUT, the others -FI_EAGAIN. */
static ssize_t sread_timedout(void)
{
	return !strcmp(t_prov, "udp;ofi_rxd") ? -FI_ETIMEDOUT : -FI_EAGAIN;
}

/* ---- the fixture ------------------------------------------------------- */

struct fx {
	uint32_t version;
	struct t_fabric f;
	struct t_ep a, b;
	fi_addr_t b_in_a, a_in_b;
	struct t_mr src, dst;		/* dsrc, ddst */
	struct fid_cntr *cntr;		/* bound to a for FI_WRITE */
	struct fid_wait *ws;		/* a's CQ is in it */
};

struct fx_opts {
	uint32_t version;		/* 0: 1.17 */
	uint64_t caps;			/* more than FI_MSG|FI_TAGGED|FI_RMA */
	enum fi_wait_obj await, bwait;	/* a's and b's CQ */
	enum fi_cq_wait_cond acond;
	enum fi_wait_obj set;		/* a's CQ in a wait set of this kind */
	void *acq_ctx;
	bool cntr;			/* a counter with FI_WAIT_UNSPEC */
};

static int fab_open(struct fx *x, const struct fx_opts *o)
{
	struct fi_info *h = fi_allocinfo();
	int ret;

	x->version = o->version ? o->version : V(1, 17);
	h->caps = FI_MSG | FI_TAGGED | FI_RMA | o->caps;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->threading = FI_THREAD_SAFE;
	/* Before 1.5, mr_mode is the old enum: FI_MR_BASIC. */
	h->domain_attr->mr_mode = FI_VERSION_GE(x->version, V(1, 5)) ?
		FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		FI_MR_PROV_KEY : T_MR_BASIC;
	h->fabric_attr->prov_name = strdup(t_prov);
	ret = fi_getinfo(x->version, NULL, NULL, 0, h, &x->f.info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	t_fi(fi_fabric(x->f.info->fabric_attr, &x->f.fabric, NULL));
	t_fi(fi_domain(x->f.fabric, x->f.info, &x->f.domain, NULL));
	return 0;
}

static bool virt_addr(const struct fx *x)
{
	uint64_t m = x->f.info->domain_attr->mr_mode;

	if (FI_VERSION_LT(x->version, V(1, 5)))
		return m == T_MR_BASIC;
	return m & FI_MR_VIRT_ADDR;
}

static uint64_t raddr(const struct fx *x, const struct t_mr *m)
{
	return virt_addr(x) ? (uintptr_t) m->base : 0;
}

/* An endpoint with its own CQ (of wait object w) and AV. -FI_E* if the
 * provider has no such CQ. */
static int ep_open(struct fx *x, struct t_ep *e, enum fi_wait_obj w,
		   enum fi_cq_wait_cond cond, struct fid_wait *ws, void *ctx)
{
	struct t_opts o = {
		.cq_wait = w,
		.cq_cond = cond,
		.wait_set = ws,
		.cq_context = ctx,
		.cntr = e == &x->a ? x->cntr : NULL,
		.cntr_flags = FI_WRITE,
	};
	const char *what;
	int ret = t_ep_try_open(e, &x->f, &o, &what);

	if (ret && strcmp(what, "fi_cq_open"))
		t_fail("%s: %d (%s)", what, ret, fi_strerror(-ret));
	return ret;
}

static void fx_close(struct fx *x)
{
	if (x->src.mr)
		t_fi(fi_close(&x->src.mr->fid));
	if (x->dst.mr)
		t_fi(fi_close(&x->dst.mr->fid));
	if (x->b.ep)
		t_ep_close(&x->b);
	if (x->a.ep)
		t_ep_close(&x->a);
	if (x->cntr)
		t_fi(fi_close(&x->cntr->fid));
	if (x->ws)
		t_fi(fi_close(&x->ws->fid));
	t_close(&x->f);
	memset(x, 0, sizeof(*x));
}

/*
 * Open what o asks for; false (after saying why) if the provider lacks
 * it. b's address goes into a's AV, a's into b's.
 */
static bool fx_open(struct fx *x, const struct fx_opts *o, const char *what)
{
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP,
				   .wait_obj = FI_WAIT_UNSPEC };
	int ret;

	memset(x, 0, sizeof(*x));
	ret = fab_open(x, o);
	if (ret == -FI_ENODATA) {
		t_case_skip("%s: %s has no domain with what it needs", what,
			  t_prov);
		return false;
	}
	t_fi(ret);
#ifdef WAIT_SETS
	if (o->set) {
		struct fi_wait_attr wa = { .wait_obj = o->set };

		ret = fi_wait_open(x->f.fabric, &wa, &x->ws);
		if (ret) {
			t_case_skip("%s: %s has no %s wait set (fi_wait_open: "
				  "%s)", what, t_prov, wait_name(o->set),
				  fi_strerror(-ret));
			t_close(&x->f);
			return false;
		}
	}
#endif
	if (o->cntr) {
		ret = fi_cntr_open(x->f.domain, &ca, &x->cntr, NULL);
		if (ret) {
			t_case_skip("%s: %s has no counter with FI_WAIT_UNSPEC "
				  "(%s)", what, t_prov, fi_strerror(-ret));
			fx_close(x);
			return false;
		}
	}
	ret = ep_open(x, &x->a, o->set ? FI_WAIT_SET : o->await, o->acond,
		      x->ws, o->acq_ctx);
	if (ret) {
		t_case_skip("%s: %s has no CQ with %s%s (fi_cq_open: %s)", what,
			  t_prov, wait_name(o->set ? FI_WAIT_SET : o->await),
			  o->acond == FI_CQ_COND_THRESHOLD ?
			  " and FI_CQ_COND_THRESHOLD" : "", fi_strerror(-ret));
		fx_close(x);
		return false;
	}
	ret = ep_open(x, &x->b, o->bwait, FI_CQ_COND_NONE, NULL, NULL);
	if (ret) {
		t_case_skip("%s: %s has no CQ with %s (fi_cq_open: %s)", what,
			  t_prov, wait_name(o->bwait), fi_strerror(-ret));
		fx_close(x);
		return false;
	}
	x->b_in_a = t_insert(&x->a, x->b.name);
	x->a_in_b = t_insert(&x->b, x->a.name);
	t_fi(fi_mr_reg(x->f.domain, dsrc, LEN, FI_SEND | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &x->src.mr,
		       NULL));
	t_fi(fi_mr_reg(x->f.domain, ddst, LEN, FI_RECV | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 2, 0, &x->dst.mr,
		       NULL));
	x->src.desc = fi_mr_desc(x->src.mr);
	x->src.key = fi_mr_key(x->src.mr);
	x->src.base = dsrc;
	x->dst.desc = fi_mr_desc(x->dst.mr);
	x->dst.key = fi_mr_key(x->dst.mr);
	x->dst.base = ddst;
	t_assert(x->src.key != BAD_KEY && x->dst.key != BAD_KEY,
		 "the provider chose the key the test calls bad");
	return true;
}

/* ---- operations -------------------------------------------------------- */

/* Device memory: hmemloop's to move, and to complete. */
static unsigned fill_src(void)
{
	seed += 0x9e3779b1u;
	t_fill(host, LEN, seed);
	t_dev_put(dsrc, host, LEN);
	return seed;
}

static void check_dst(unsigned s, size_t len, const char *what)
{
	static uint8_t back[LEN];

	t_dev_get(back, ddst, LEN);
	t_assert(t_check(back, len, s), "%s: wrong bytes in the device "
		 "destination", what);
}

/* A same-process device fi_write from a into b. */
static void dev_write(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_write(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 raddr(x, &x->dst), x->dst.key, ctx));
}

/* The same with a key b has no region for: hmemloop's error to make. */
static void bad_write(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_write(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 raddr(x, &x->dst), BAD_KEY, ctx));
}

/* A device write that succeeds, first in the cases about errors: without
 * hmemloop the provider fails it (its own error entries could pass). */
static void good_write(struct fx *x, const char *what)
{
	unsigned s = fill_src();
	int ctx;

	dev_write(x, &ctx);
	t_expect(x->a.cq, &ctx, FI_RMA | FI_WRITE, (size_t) -1);
	check_dst(s, LEN, what);
}

static void dev_recv(struct fx *x, void *ctx)
{
	t_post(x->b.cq, fi_recv(x->b.ep, ddst, LEN, x->dst.desc,
				FI_ADDR_UNSPEC, ctx));
}

static void dev_send(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_send(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				ctx));
}

static void dev_tsend(struct fx *x, uint64_t tag, void *ctx)
{
	t_post(x->a.cq, fi_tsend(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 tag, ctx));
}

static void dev_trecv(struct fx *x, uint64_t tag, void *ctx)
{
	t_post(x->b.cq, fi_trecv(x->b.ep, ddst, LEN, x->dst.desc,
				 FI_ADDR_UNSPEC, tag, 0, ctx));
}

static void check_entry(const struct fi_cq_tagged_entry *e, void *ctx,
			uint64_t flags, const char *what)
{
	t_assert(e->op_context == ctx, "%s: completion for context %p, "
		 "expected %p", what, e->op_context, ctx);
	t_assert((e->flags & flags) == flags, "%s: completion flags %#llx "
		 "lack %#llx", what, (unsigned long long) e->flags,
		 (unsigned long long) flags);
}

/* Read an error entry that must be there. */
static void expect_err(struct fid_cq *cq, void *ctx, const char *what)
{
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret = fi_cq_readerr(cq, &err, 0);

	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(err.op_context == ctx && err.err, "%s: error entry for "
		 "context %p (err %d), expected %p", what, err.op_context,
		 err.err, ctx);
}

/* Nothing more may come: the CQ must be empty. */
static void expect_empty(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret = fi_cq_read(cq, &e, 1);

	t_assert(ret == -FI_EAGAIN, "%s: fi_cq_read of a drained CQ: %zd "
		 "(context %p)", what, ret, ret == 1 ? e.op_context : NULL);
}

/* ---- a thread that waits ----------------------------------------------- */

enum how {
	SREAD,
	SREADFROM,
	CNTR_WAIT,
	EPOLL,
#ifdef WAIT_SETS
	WAITSET,
#endif
};

struct sleeper {
	pthread_t th;
	enum how how;
	struct fid_cq *cq;
	struct fid_wait *ws;
	struct fid_cntr *cntr;
	uint64_t threshold;
	int epfd;
	size_t count;
	const void *cond;
	struct fi_cq_tagged_entry ent[8];
	fi_addr_t src[8];
	ssize_t ret;
	int timeout;			/* ms; 0: LONG_MS */
	double end;
	atomic_int started;
};

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;
	int ms = s->timeout ? s->timeout : LONG_MS;

	t_cu(cuCtxSetCurrent(cu_ctx));
	atomic_store(&s->started, 1);
	switch (s->how) {
	case SREAD:
		s->ret = fi_cq_sread(s->cq, s->ent, s->count, s->cond, ms);
		break;
	case SREADFROM:
		s->ret = fi_cq_sreadfrom(s->cq, s->ent, s->count, s->src,
					 s->cond, ms);
		break;
#ifdef WAIT_SETS
	case WAITSET:
		s->ret = fi_wait(s->ws, ms);
		break;
#endif
	case CNTR_WAIT:
		s->ret = fi_cntr_wait(s->cntr, s->threshold, ms);
		break;
	case EPOLL: {
		struct epoll_event ev;

		s->ret = epoll_wait(s->epfd, &ev, 1, ms);
		break;
	}
	}
	s->end = t_now();
	return NULL;
}

/* Start s, and give it time to fall asleep. */
static void sleeper_start(struct sleeper *s)
{
	if (!s->count)
		s->count = 1;
	atomic_store(&s->started, 0);
	t_assert(!pthread_create(&s->th, NULL, sleeper_run, s),
		 "pthread_create");
	while (!atomic_load(&s->started))
		usleep(1000);
	usleep(SETTLE_US);
}

/* Wait for s to return; seconds from t0 to its return. A wait that
 * outlives its timeout is a failure, not a stalled run. */
static double sleeper_join(struct sleeper *s, double t0, const char *what)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += LONG_MS / 1000 + 3;
	if (pthread_timedjoin_np(s->th, NULL, &ts))
		t_fail("%s: the waiting call is still blocked 3 s after its "
		       "%d ms timeout", what, LONG_MS);
	return s->end - t0;
}

/* Has s returned within seconds? */
static bool sleeper_within(struct sleeper *s, int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	return !pthread_timedjoin_np(s->th, NULL, &ts);
}

/* The same call in this thread, bounded: seconds it took. */
static double sleeper_now(struct sleeper *s, const char *what)
{
	double t0 = t_now();

	if (!s->count)
		s->count = 1;
	t_assert(!pthread_create(&s->th, NULL, sleeper_run, s),
		 "pthread_create");
	return sleeper_join(s, t0, what);
}

/* Does the provider's sread on this CQ honour its timeout? shm's
 * FI_WAIT_YIELD (its FI_WAIT_UNSPEC) does not: util_wait_yield_run of
 * libfabric 1.17 spins until signalled. */
static bool sread_times_out(struct fid_cq *cq)
{
	struct sleeper s = { .how = SREAD, .cq = cq, .count = 4,
			     .timeout = SHORT_MS };

	t_assert(!pthread_create(&s.th, NULL, sleeper_run, &s),
		 "pthread_create");
	if (sleeper_within(&s, 2))
		return true;
	t_fi(fi_cq_signal(cq));
	t_assert(!pthread_join(s.th, NULL), "pthread_join");
	return false;
}

static struct fx x;

static const char *rstr(ssize_t ret)
{
	return ret < 0 ? fi_strerror((int) -ret) : "entries";
}

/* A good write, then a bad one whose error entry waits at the CQ's head:
 * fi_cq_read says so. */
static void error_queued(struct fx *x, void *ctx, const char *what)
{
	struct fi_cq_tagged_entry ent;
	ssize_t ret;

	good_write(x, what);
	bad_write(x, ctx);
	ret = fi_cq_read(x->a.cq, &ent, 1);
	t_assert(ret == -FI_EAVAIL, "%s: fi_cq_read: %zd (%s), expected "
		 "-FI_EAVAIL", what, ret, rstr(ret));
}

/* ---- 1. fi_cq_sread and fi_cq_sreadfrom -------------------------------- */

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

static void sread_queued(void)
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

static void sread_woken(void)
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
 * after device writes to a CQ whose fd the application exported.
 */
static void rewait_one(int how)
{
	static const char *const hows[] = {
		"fi_cq_sread on a FI_WAIT_UNSPEC CQ, asleep",
		"fi_cq_sreadfrom on a FI_WAIT_UNSPEC CQ, asleep",
		"device writes to a FI_WAIT_FD CQ its fd exported, read",
	};
	struct fx_opts o = { .await = how < 2 ? FI_WAIT_UNSPEC : FI_WAIT_FD };
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

static void sread_rewait(void)
{
	for (int how = 0; how < 3; how++)
		rewait_one(how);
}

/* (c) The application's own fi_cq_signal still ends a sread as it did
 * without hmemloop, shim entries read or not. */
static void sread_signal(void)
{
	for (size_t i = 0; i < NWAITS; i++) {
		struct fx_opts o = { .await = sread_waits[i] };
		struct sleeper sl = { .how = SREAD, .count = 4 };
		char what[96];
		double dt;
		int ctx;

		snprintf(what, sizeof(what), "fi_cq_signal to fi_cq_sread on "
			 "a %s CQ", wait_name(sread_waits[i]));
		if (!fx_open(&x, &o, what))
			continue;
		fill_src();
		dev_write(&x, &ctx);
		t_expect(x.a.cq, &ctx, FI_RMA | FI_WRITE, (size_t) -1);
		sl.cq = x.a.cq;
		sleeper_start(&sl);
		dt = t_now();
		t_fi(fi_cq_signal(x.a.cq));
		dt = sleeper_join(&sl, dt, what);
		t_assert(sl.ret == signalled_ret(), "%s: %zd (%s), expected "
			 "%zd (%s)", what, sl.ret, rstr(sl.ret),
			 signalled_ret(), rstr(signalled_ret()));
		t_assert(dt < EARLY_S, "%s: returned %.2f s after the signal",
			 what, dt);
		expect_empty(x.a.cq, what);
		fx_close(&x);
		t_ok("%s: %s after %.3f s", what, rstr(sl.ret), dt);
	}
}

/* (d) FI_SOURCE: the sender's address of a same-process device message,
 * queued and to a thread asleep. */
static void sread_source(void)
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
	sleeper_start(&sl);
	dt = t_now();
	dev_send(&x, &sctx2);
	dt = sleeper_join(&sl, dt, what);
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
static void sread_threshold(void)
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
static void sread_error(void)
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

/* ---- 2. FI_GETWAIT and fi_trywait -------------------------------------- */

static int trywait(void)
{
	struct fid *fids[] = { &x.a.cq->fid };

	return fi_trywait(x.f.fabric, fids, 1);
}

static bool open_fd(int *fd, const char *what)
{
	struct fx_opts o = { .await = FI_WAIT_FD };
	int ret;

	if (!fx_open(&x, &o, what))
		return false;
	ret = fi_control(&x.a.cq->fid, FI_GETWAIT, fd);
	if (ret) {
		t_case_skip("%s: %s gives no fd (fi_control FI_GETWAIT: %s)",
			  what, t_prov, fi_strerror(-ret));
		fx_close(&x);
		return false;
	}
	return true;
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

static void getwait(void)
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

static void trywait_loop(void)
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

static void sread_race(void)
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
					x.b_in_a, raddr(&x, &x.dst),
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

/* ---- 3. counters ------------------------------------------------------- */

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

static void cntr_run(void)
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

/* ---- 4. error entries -------------------------------------------------- */

static void strerror_check(struct fid_cq *cq, const struct fi_cq_err_entry *e,
			   const char *what)
{
	char buf[256] = "";
	const char *s = fi_cq_strerror(cq, e->prov_errno, e->err_data, buf,
				       sizeof(buf));

	t_assert(s && *s, "%s: fi_cq_strerror gave %s", what,
		 s ? "an empty string" : "NULL");
	t_assert(strncmp(s, "Unknown error", 13) && strcmp(s, "Success"),
		 "%s: fi_cq_strerror(prov_errno %d) gave \"%s\"", what,
		 e->prov_errno, s);
	printf("%s: err %d (%s), prov_errno %d: \"%s\"\n", what, e->err,
	       fi_strerror(e->err), e->prov_errno, s);
}

static void cq_err(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC };
	const char *what = "error entry, API 1.17";
	struct fi_cq_err_entry e;
	uint8_t data[64];
	void *given;
	int ctx, ctx2;
	ssize_t ret;

	if (!fx_open(&x, &o, what))
		return;
	error_queued(&x, &ctx, what);

	/* The application's buffer for error data. */
	memset(&e, 0xa5, sizeof(e));
	memset(data, 0x5a, sizeof(data));
	e.err_data = data;
	e.err_data_size = sizeof(data);
	ret = fi_cq_readerr(x.a.cq, &e, 0);
	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(e.op_context == &ctx, "%s: op_context %p, expected %p", what,
		 e.op_context, (void *) &ctx);
	t_assert(e.err > 0 && e.olen == 0, "%s: err %d, olen %zu", what,
		 e.err, e.olen);
	t_assert(e.err_data_size <= sizeof(data), "%s: err_data_size %zu from "
		 "a buffer of %zu", what, e.err_data_size, sizeof(data));
	given = e.err_data;
	for (size_t i = e.err_data_size; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: byte %zu of the error data "
			 "buffer written beyond err_data_size %zu", what, i,
			 e.err_data_size);
	strerror_check(x.a.cq, &e, what);
	expect_empty(x.a.cq, what);
	t_ok("%s: -FI_EAVAIL, then fi_cq_readerr into the application's "
	     "buffer (err_data_size %zu)", what, e.err_data_size);

	/* err_data_size 0: the provider's buffer, or none. */
	bad_write(&x, &ctx2);
	memset(&e, 0xa5, sizeof(e));
	e.err_data = data;
	e.err_data_size = 0;
	ret = fi_cq_readerr(x.a.cq, &e, 0);
	t_assert(ret == 1 && e.op_context == &ctx2, "%s: fi_cq_readerr: %zd, "
		 "context %p", what, ret, e.op_context);
	t_assert(e.err_data != data, "%s: err_data_size 0 on input, the "
		 "application's err_data %p kept (fi_cq(3): ignored on input)",
		 what, (void *) data);
	t_assert(!e.err_data_size || e.err_data, "%s: err_data_size %zu with "
		 "err_data NULL", what, e.err_data_size);
	for (size_t i = 0; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: an ignored buffer written", what);
	strerror_check(x.a.cq, &e, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: err_data_size 0: err_data %s, size %zu", what,
	     e.err_data ? "the provider's" : "NULL", e.err_data_size);
	/* Last, to see the rest first: util and sockets keep it. */
	t_assert(given == data, "%s: err_data %p on output, the "
		 "application's buffer was %p (fi_cq(3): the provider fills "
		 "it)", what, given, (void *) data);
	t_ok("%s: err_data still the application's buffer", what);
}

/*
 * An error entry of hmemloop's, read in the layout of an older or a newer
 * API version: 1.0's has no err_data_size, and its err_data is only
 * output; 1.20's ends with src_addr, FI_ADDR_NOTAVAIL here (fi_cq(3)).
 */
static void cq_err_layout(uint32_t version, size_t end)
{
	struct fx_opts o = { .version = version, .await = FI_WAIT_UNSPEC };
	union {
		struct fi_cq_err_entry e;
		uint8_t raw[T_ERR_END_1_20 + 32];
	} u;
	uint8_t data[64];
	char what[64];
	fi_addr_t src;
	ssize_t ret;
	int ctx;

	snprintf(what, sizeof(what), "error entry, API %u.%u",
		 FI_MAJOR(version), FI_MINOR(version));
	if (FI_VERSION_LT(fi_version(), version)) {
		t_case_skip("%s: libfabric %u.%u has no such API", what,
			  FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return;
	}
	if (!fx_open(&x, &o, what))
		return;
	t_assert(x.f.fabric->api_version == version, "%s: fabric api_version "
		 "%#x", what, x.f.fabric->api_version);
	error_queued(&x, &ctx, what);
	memset(&u, 0xa5, sizeof(u));
	memset(data, 0x5a, sizeof(data));
	u.e.err_data = data;
	if (end > T_ERR_END_1_0)
		u.e.err_data_size = 0;
	ret = fi_cq_readerr(x.a.cq, &u.e, 0);
	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(u.e.op_context == &ctx && u.e.err > 0, "%s: context %p, err "
		 "%d", what, u.e.op_context, u.e.err);
	t_err_within(u.raw, sizeof(u.raw), end, what);
	t_assert(u.e.err_data != data, "%s: the application's err_data kept "
		 "(%s)", what, end > T_ERR_END_1_0 ? "err_data_size 0" :
		 "before 1.5 it is the provider's");
	for (size_t i = 0; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: the application's error data "
			 "buffer written", what);
	if (end == T_ERR_END_1_20) {
		memcpy(&src, u.raw + T_ERR_END_1_5, sizeof(src));
		t_assert(src == FI_ADDR_NOTAVAIL, "%s: src_addr %#lx, expected "
			 "FI_ADDR_NOTAVAIL", what, (unsigned long) src);
	}
	strerror_check(x.a.cq, &u.e, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: -FI_EAVAIL, fi_cq_readerr wrote the %zu bytes of its layout "
	     "only", what, end);
}

static void cq_err_1_4(void)
{
	cq_err_layout(V(1, 4), T_ERR_END_1_0);
}

static void cq_err_1_20(void)
{
	cq_err_layout(V(1, 20), T_ERR_END_1_20);
}

/* ---- 5. wait sets and poll sets ---------------------------------------- */

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
	sleeper_start(&sl);
	dt = t_now();
	dev_write(&x, &ctx2);
	dt = sleeper_join(&sl, dt, what);
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

static void waitset(void)
{
	if (sockets_sets("wait sets"))
		return;
	waitset_one(FI_WAIT_UNSPEC);
	waitset_one(FI_WAIT_FD);
	waitset_one(FI_WAIT_MUTEX_COND);
}

static void pollset(void)
{
	static int marker;
	struct fx_opts o = { .await = FI_WAIT_NONE, .acq_ctx = &marker };
	const char *what = "poll set";
	struct fi_poll_attr pa = { 0 };
	struct fi_cq_tagged_entry e;
	struct fid_poll *ps;
	void *ctxs[4];
	int ret, ctx;

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
	ret = fi_poll(ps, ctxs, 4);
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
static void waitset(void)
{
	t_case_skip("wait sets: built against libfabric %d.%d, which deprecates "
		  "them", FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

static void pollset(void)
{
	t_case_skip("poll sets: built against libfabric %d.%d, which deprecates "
		  "them", FI_MAJOR_VERSION, FI_MINOR_VERSION);
}
#endif

/* ---- 6. blocking reads where receives of a tracked endpoint complete --- */

enum { RECV_FIRST, TAGGED, SEND_FIRST };

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
	if (how == RECV_FIRST)
		dev_recv(&x, &rctx);
	else if (how == TAGGED)
		dev_trecv(&x, 0x77, &rctx);
	else
		dev_send(&x, &sctx);
	sl.cq = x.b.cq;
	sleeper_start(&sl);
	dt = t_now();
	if (how == RECV_FIRST)
		dev_send(&x, &sctx);
	else if (how == TAGGED)
		dev_tsend(&x, 0x77, &sctx);
	else
		dev_recv(&x, &rctx);
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

static void tracked_sread(void)
{
	for (int how = RECV_FIRST; how <= SEND_FIRST; how++) {
		tracked_one(FI_WAIT_UNSPEC, how);
		tracked_one(FI_WAIT_FD, how);
	}
}

/* ---- main -------------------------------------------------------------- */

static const struct t_case cases[] = {
	T_CASE("sread_queued", sread_queued),
	T_CASE("sread_woken", sread_woken),
	T_CASE("sread_signal", sread_signal),
	T_CASE("sread_source", sread_source),
	T_CASE("sread_threshold", sread_threshold),
	T_CASE("sread_error", sread_error),
	T_CASE("getwait", getwait),
	T_CASE("trywait_loop", trywait_loop),
	T_CASE("sread_race", sread_race),
	T_CASE("cntr", cntr_run),
	T_CASE("cq_err_1_17", cq_err),
	T_CASE("cq_err_1_4", cq_err_1_4),
	T_CASE("cq_err_1_20", cq_err_1_20),
	T_CASE("waitset", waitset),
	T_CASE("pollset", pollset),
	T_CASE("tracked_sread", tracked_sread),
	T_CASE("sread_rewait", sread_rewait),
};

int main(int argc, char **argv)
{
	struct t_fabric f;
	double t0 = t_now();

	t_init(argc, argv, NULL);
	t_cuda_init();
	t_cu(cuCtxGetCurrent(&cu_ctx));
	if (t_try_open(&f, NULL))
		t_skip("provider %s is not available here", t_prov);
	t_close(&f);
	/* Some providers' libraries (psm) catch SIGSEGV to write a report
	 * file: without hmemloop a crash is a crash. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	dsrc = t_dev_alloc(LEN);
	ddst = t_dev_alloc(LEN);

	T_RUN_CASES(cases);
	t_cases_done();
	t_dev_free(dsrc);
	t_dev_free(ddst);
	printf("%s: %d skipped, %.1f s\n", t_prov, t_skips(),
	       t_now() - t0);
	return 0;
}
