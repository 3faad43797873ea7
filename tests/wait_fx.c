/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's fixture, its operations and a thread that waits. */
#include "wait.h"

CUcontext cu_ctx;
void *dsrc, *ddst;		/* device buffers, LEN bytes each */
uint8_t host[LEN];
unsigned seed = 0x3a17;

const char *wait_name(enum fi_wait_obj w)
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
const enum fi_wait_obj sread_waits[NWAITS] = {
	FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
	FI_WAIT_POLLFD,
};

/* What a thread blocked in fi_cq_sread gets from fi_cq_signal, without
 * hmemloop: sockets answers -FI_ECANCELED (sock_cq.c), util -FI_EAGAIN. */
ssize_t signalled_ret(void)
{
	return !strcmp(t_prov, "sockets") ? -FI_ECANCELED : -FI_EAGAIN;
}

/* What fi_cq_sread returns on timeout: rxd_cq_sreadfrom of libfabric
 * 1.17 answers -FI_ETIMEDOUT, the others -FI_EAGAIN. */
ssize_t sread_timedout(void)
{
	return !strcmp(t_prov, "udp;ofi_rxd") ? -FI_ETIMEDOUT : -FI_EAGAIN;
}

/* ---- the fixture ------------------------------------------------------- */

/* An endpoint with its own CQ (of wait object w) and AV. -FI_E* if the
 * provider has no such CQ. */
int ep_open(struct fx *x, struct t_ep *e, enum fi_wait_obj w,
		   enum fi_cq_wait_cond cond, struct fid_wait *ws, void *ctx)
{
	struct t_opts o = {
		.cq_wait = w,
		.cq_cond = cond,
		.wait_set = ws,
		.cq_context = ctx,
		.cntr = e == x->cntr_ep ? x->cntr : NULL,
		.cntr_flags = x->cntr_flags,
	};
	const char *what;
	int ret = t_ep_try_open(e, &x->f, &o, &what);

	if (ret && strcmp(what, "fi_cq_open"))
		t_fail("%s: %d (%s)", what, ret, fi_strerror(-ret));
	return ret;
}

void fx_close(struct fx *x)
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
bool fx_open(struct fx *x, const struct fx_opts *o, const char *what)
{
	enum fi_wait_obj cwait = o->cwait ? o->cwait : FI_WAIT_UNSPEC;
	bool cset = o->cwait == FI_WAIT_SET;
	int ret;

	memset(x, 0, sizeof(*x));
	if (o->count & (FI_REMOTE_WRITE | FI_REMOTE_READ | FI_RECV))
		x->cntr_ep = &x->b;
	else if (!(o->count & FI_RMA_EVENT))
		x->cntr_ep = &x->a;
	x->cntr_flags = o->count ? o->count : FI_WRITE;
	if (t_try_open(&x->f, &(struct t_opts) {
			.version = o->version,
			.caps = FI_MSG | FI_TAGGED | FI_RMA | o->caps })) {
		t_case_skip("%s: %s has no domain with what it needs", what,
			  t_prov);
		return false;
	}
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
		/* Its context is what a poll set reports. */
		ret = t_cntr_try_open(&x->f, cwait, x->ws, &x->cntr,
				      &x->cntr);
		if (ret) {
			t_case_skip("%s: %s has no counter with %s (%s)", what,
				    t_prov, wait_name(cwait),
				    fi_strerror(-ret));
			fx_close(x);
			return false;
		}
	}
	ret = ep_open(x, &x->a, o->set && !cset ? FI_WAIT_SET : o->await,
		      o->acond, cset ? NULL : x->ws, o->acq_ctx);
	if (ret) {
		t_case_skip("%s: %s has no CQ with %s%s (fi_cq_open: %s)", what,
			  t_prov, wait_name(o->set && !cset ? FI_WAIT_SET :
					    o->await),
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
	t_reg(&x->f, dsrc, LEN, FI_SEND | FI_READ | FI_WRITE | FI_REMOTE_READ |
	      FI_REMOTE_WRITE, 1, &x->src);
	t_reg(&x->f, ddst, LEN, FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
	      FI_REMOTE_WRITE, 2, &x->dst);
	if (o->cntr && (o->count & FI_RMA_EVENT)) {
		ret = fi_mr_bind(x->dst.mr, &x->cntr->fid, FI_REMOTE_WRITE);
		if (ret) {
			t_case_skip("%s: %s binds no counter to a region "
				    "(fi_mr_bind: %s)", what, t_prov,
				    fi_strerror(-ret));
			fx_close(x);
			return false;
		}
	}
	t_assert(x->src.key != BAD_KEY && x->dst.key != BAD_KEY,
		 "the provider chose the key the test calls bad");
	return true;
}

/* fid's fd from FI_GETWAIT; false (x closed, after saying why) if the
 * provider gives none. */
bool fd_of(struct fid *fid, int *fd, const char *what)
{
	int ret = fi_control(fid, FI_GETWAIT, fd);

	if (!ret)
		return true;
	t_case_skip("%s: %s gives no fd (fi_control FI_GETWAIT: %s)", what,
		    t_prov, fi_strerror(-ret));
	fx_close(&x);
	return false;
}

/* ---- operations -------------------------------------------------------- */

/* Device memory: hmemloop's to move, and to complete. */
unsigned fill_src(void)
{
	seed += 0x9e3779b1u;
	t_fill(host, LEN, seed);
	t_dev_put(dsrc, host, LEN);
	return seed;
}

void check_dst(unsigned s, size_t len, const char *what)
{
	static uint8_t back[LEN];

	t_dev_get(back, ddst, LEN);
	t_assert(t_check(back, len, s), "%s: wrong bytes in the device "
		 "destination", what);
}

/* A same-process device fi_write from a into b. */
void dev_write(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_write(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 t_raddr(&x->f, &x->dst, 0), x->dst.key, ctx));
}

/* The same with a key b has no region for: hmemloop's error to make. */
void bad_write(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_write(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 t_raddr(&x->f, &x->dst, 0), BAD_KEY, ctx));
}

/* A device write that succeeds, first in the cases about errors: without
 * hmemloop the provider fails it (its own error entries could pass). */
void good_write(struct fx *x, const char *what)
{
	unsigned s = fill_src();
	int ctx;

	dev_write(x, &ctx);
	t_expect(x->a.cq, &ctx, FI_RMA | FI_WRITE, (size_t) -1);
	check_dst(s, LEN, what);
}

void dev_recv(struct fx *x, void *ctx)
{
	t_post(x->b.cq, fi_recv(x->b.ep, ddst, LEN, x->dst.desc,
				FI_ADDR_UNSPEC, ctx));
}

void dev_send(struct fx *x, void *ctx)
{
	t_post(x->a.cq, fi_send(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				ctx));
}

void dev_tsend(struct fx *x, uint64_t tag, void *ctx)
{
	t_post(x->a.cq, fi_tsend(x->a.ep, dsrc, LEN, x->src.desc, x->b_in_a,
				 tag, ctx));
}

void dev_trecv(struct fx *x, uint64_t tag, void *ctx)
{
	t_post(x->b.cq, fi_trecv(x->b.ep, ddst, LEN, x->dst.desc,
				 FI_ADDR_UNSPEC, tag, 0, ctx));
}

void check_entry(const struct fi_cq_tagged_entry *e, void *ctx,
			uint64_t flags, const char *what)
{
	t_assert(e->op_context == ctx, "%s: completion for context %p, "
		 "expected %p", what, e->op_context, ctx);
	t_assert((e->flags & flags) == flags, "%s: completion flags %#llx "
		 "lack %#llx", what, (unsigned long long) e->flags,
		 (unsigned long long) flags);
}

/* Read an error entry that must be there. */
void expect_err(struct fid_cq *cq, void *ctx, const char *what)
{
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret = fi_cq_readerr(cq, &err, 0);

	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(err.op_context == ctx && err.err, "%s: error entry for "
		 "context %p (err %d), expected %p", what, err.op_context,
		 err.err, ctx);
}

/* Nothing more may come: the CQ must be empty. */
void expect_empty(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret = fi_cq_read(cq, &e, 1);

	t_assert(ret == -FI_EAGAIN, "%s: fi_cq_read of a drained CQ: %zd "
		 "(context %p)", what, ret, ret == 1 ? e.op_context : NULL);
}

/* ---- a thread that waits ----------------------------------------------- */



void *sleeper_run(void *arg)
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
void sleeper_start(struct sleeper *s)
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
double sleeper_join(struct sleeper *s, double t0, const char *what)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += LONG_MS / 1000 + 3;
	if (pthread_timedjoin_np(s->th, NULL, &ts))
		t_fail("%s: the waiting call is still blocked 3 s after its "
		       "%d ms timeout", what, LONG_MS);
	return s->end - t0;
}

/* Start s, do op on x, wait for s: seconds from op to its return. */
double sleeper_woken(struct sleeper *s, void (*op)(struct fx *, void *),
		     void *ctx, const char *what)
{
	double t0;

	sleeper_start(s);
	t0 = t_now();
	op(&x, ctx);
	return sleeper_join(s, t0, what);
}

/* Has s returned within seconds? */
bool sleeper_within(struct sleeper *s, int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	return !pthread_timedjoin_np(s->th, NULL, &ts);
}

/* The same call in this thread, bounded: seconds it took. */
double sleeper_now(struct sleeper *s, const char *what)
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
bool sread_times_out(struct fid_cq *cq)
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

struct fx x;

const char *rstr(ssize_t ret)
{
	return ret < 0 ? fi_strerror((int) -ret) : "entries";
}

/* A good write, then a bad one whose error entry waits at the CQ's head:
 * fi_cq_read says so. */
void error_queued(struct fx *x, void *ctx, const char *what)
{
	struct fi_cq_tagged_entry ent;
	ssize_t ret;

	good_write(x, what);
	bad_write(x, ctx);
	ret = fi_cq_read(x->a.cq, &ent, 1);
	t_assert(ret == -FI_EAVAIL, "%s: fi_cq_read: %zd (%s), expected "
		 "-FI_EAVAIL", what, ret, rstr(ret));
}
