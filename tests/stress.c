/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Stress: one FI_THREAD_SAFE domain, NEPS endpoints of this process each
 * with its own CQ and an AV holding them all, and NTHREADS threads that
 * together run HMEMLOOP_STRESS_OPS (default 100 000) mixed operations
 * between those endpoints: RMA writes and reads and tagged messages, on
 * device and host memory, of random sizes up to 64 KiB. Some receives
 * share one context per thread (their entries are told apart by tag), and
 * some are cancelled by the application at once: their FI_ECANCELED must
 * come, their buffer untouched. Half the threads
 * reap with fi_cq_read over every CQ, the other half block in
 * fi_cq_sread on their endpoint's CQ.
 *
 * Everything about an operation derives from its id: kind, memory,
 * endpoints, size, payload pattern and tag. Every payload byte is checked
 * when its completion is reaped, with guard bytes after it, and every
 * completion's context is counted: 0 before, 1 after, never 2. A watchdog
 * fails the run, naming what is outstanding, when nothing retires for
 * STALL_S seconds.
 *
 * HMEMLOOP_STRESS_HOST set keeps every buffer in host memory: the same
 * run is then right without hmemloop, the provider alone as the oracle.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hmltest.h"

#define NTHREADS	8
#define NEPS		4
#define WINDOW		4		/* operations in flight per thread */
#define MAXLEN		(64 * 1024)
#define GUARD		16
#define SLOT		(MAXLEN + 64)
#define GUARD_BYTE	0xee
#define STALL_S		20
#define CANCEL_TAG	(1ULL << 62)	/* no message has it */

/*
 * ThreadSanitizer (make check-tsan) cannot see how libfabric, which is not
 * instrumented, orders a completion after its post. Say so, for what the
 * poster wrote before posting; what hmemloop does from the post on is
 * still its to order.
 */
#ifdef __SANITIZE_THREAD__
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define POSTED(op)	__tsan_release(op)
#define REAPED(op)	__tsan_acquire(op)
#else
#define POSTED(op)	((void) (op))
#define REAPED(op)	((void) (op))
#endif

enum kind { WRITE, READ, TAGGED, CANCEL, NKINDS };
enum role { TX, RX, SHARED };

static const char *const kind_names[NKINDS] = { "fi_write", "fi_read",
						"fi_tsend/fi_trecv",
						"fi_trecv/fi_cancel" };

struct ctx {
	atomic_int done;		/* completions seen: must end at 1 */
	uint8_t role;
};

struct op {
	struct ctx tx, rx;		/* rx: tagged messages only */
	atomic_int left;		/* completions to come */
	uint32_t id;
	uint8_t kind, from, to, thread, slot;
	bool ldev, rdev, send_first;
	bool shared;			/* received with its thread's context */
	size_t len;
	char *local, *remote;		/* the slot's buffers it uses */
};

struct ep {
	struct t_ep t;
	fi_addr_t addr[NEPS];		/* the others, in this AV */
};

struct worker {
	pthread_t th;
	int index;
	bool sleeper;			/* reaps with fi_cq_sread */
	atomic_int asleep;
	struct op *slot[WINDOW];
	struct ctx shared;		/* of its shared-context receives */
	uint8_t *scratch;		/* MAXLEN + GUARD */
	unsigned long reaped, sreads, woken;
};

static struct {
	struct t_fabric f;
	struct ep eps[NEPS];
	char *arena[2];			/* host, device */
	struct t_mr mr[2];
	size_t arena_size;
	struct op *ops;
	uint32_t nops;
	atomic_uint retired;
	atomic_uint issued;
	CUcontext cu;
	struct worker w[NTHREADS];
	unsigned long kinds[NKINDS], bytes;
	bool host;			/* HMEMLOOP_STRESS_HOST: no device */
} s;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ x >> 33;
}

/* ---- an operation, from its id ----------------------------------------- */

static void plan(struct op *op, uint32_t id)
{
	uint64_t r = mix(id + 0x5151ULL), r2 = mix(r);
	unsigned bits = r % 17;

	op->id = id;
	op->tx.role = TX;
	op->rx.role = RX;
	op->kind = r >> 8 & 15;
	op->kind = op->kind < 5 ? WRITE : op->kind < 9 ? READ :
		   op->kind < 15 ? TAGGED : CANCEL;
	op->shared = op->kind == TAGGED && (r >> 15 & 1);
	op->ldev = !s.host && (r >> 12 & 1);
	op->rdev = !s.host && (r >> 13 & 1);
	op->send_first = (r >> 14 & 3) == 0;
	op->to = r >> 16 & (NEPS - 1);
	op->thread = id % NTHREADS;
	op->from = op->thread / (NTHREADS / NEPS);
	op->len = ((size_t) 1 << bits) + r2 % ((size_t) 1 << bits);
	if (op->len > MAXLEN)
		op->len = MAXLEN;
	atomic_store(&op->left, op->kind == TAGGED ? 2 : 1);
}

static unsigned seed_of(const struct op *op)
{
	return op->id * 2654435761u + 7;
}

static char *slot_buf(int dev, int thread, int slot, int which)
{
	size_t i = ((size_t) thread * WINDOW + slot) * 2 + which;

	return s.arena[dev] + i * SLOT;
}

static uint64_t raddr(int dev, const char *p)
{
	if (s.f.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
		return (uintptr_t) p;
	return p - s.arena[dev];
}

/* Host or device: put n bytes from host memory. */
static void put(bool dev, char *dst, const void *src, size_t n)
{
	if (dev)
		t_dev_put(dst, src, n);
	else
		memcpy(dst, src, n);
}

static void fill(struct worker *w, bool dev, char *dst, size_t n,
		 unsigned seed)
{
	t_fill(w->scratch, n, seed);
	put(dev, dst, w->scratch, n);
}

static void guard(struct worker *w, bool dev, char *p)
{
	memset(w->scratch, GUARD_BYTE, GUARD);
	put(dev, p, w->scratch, GUARD);
}

/* Every byte of a destination: the payload, then the guard after it. */
static void verify(struct worker *w, const struct op *op, bool dev,
		   const char *p)
{
	const uint8_t *got = (const uint8_t *) p;
	size_t n = op->len + GUARD;

	if (dev) {
		t_dev_get(w->scratch, p, n);
		got = w->scratch;
	}
	if (!t_check(got, op->len, seed_of(op))) {
		uint8_t *want = malloc(op->len);
		size_t i = 0, bad = 0;

		t_assert(want, "out of memory");
		t_fill(want, op->len, seed_of(op));
		while (got[i] == want[i])
			i++;
		for (size_t j = i; j < op->len; j++)
			bad += got[j] != want[j];
		t_fail("op %u (%s, %zu bytes, %s to %s, ep %d to %d): byte %zu "
		       "of the %s destination is %#x, expected %#x (%zu "
		       "wrong)", op->id, kind_names[op->kind], op->len,
		       op->ldev ? "device" : "host",
		       op->rdev ? "device" : "host", op->from, op->to, i,
		       dev ? "device" : "host", got[i], want[i], bad);
	}
	for (size_t i = op->len; i < n; i++)
		t_assert(got[i] == GUARD_BYTE, "op %u (%s, %zu bytes): byte "
			 "%zu past the end written", op->id,
			 kind_names[op->kind], op->len, i - op->len);
}

/* ---- reaping ----------------------------------------------------------- */

static void retire(struct op *op)
{
	struct worker *issuer = &s.w[op->thread];

	if (atomic_fetch_add(&s.retired, 1) + 1 == s.nops) {
		/* The last: release every thread asleep in fi_cq_sread. */
		for (int e = 0; e < NEPS; e++)
			t_fi(fi_cq_signal(s.eps[e].t.cq));
	} else if (issuer->sleeper && atomic_load(&issuer->asleep)) {
		t_fi(fi_cq_signal(s.eps[op->from].t.cq));
	}
}

/* One of op's completions, c's, seen. */
static void seen(struct worker *w, struct op *op, struct ctx *c)
{
	t_assert(atomic_fetch_add(&c->done, 1) == 0, "op %u (%s): its %s "
		 "completion came twice", op->id, kind_names[op->kind],
		 c->role == TX ? "initiator" : "receive");
	w->reaped++;
	if (atomic_fetch_sub(&op->left, 1) == 1)
		retire(op);
}

/* The operation a context names; a shared one, through the tag. */
static struct op *op_of(struct ctx *c, uint64_t tag)
{
	struct op *op = NULL;

	if (c->role == SHARED) {
		t_assert(tag && tag <= s.nops, "a shared-context completion "
			 "with tag %#llx", (unsigned long long) tag);
		op = &s.ops[tag - 1];
		t_assert(op->shared && c == &s.w[op->thread].shared, "op %u: "
			 "a completion for another thread's shared context",
			 op->id);
		return op;
	}
	return c->role == TX ? t_container_of(c, struct op, tx) :
			       t_container_of(c, struct op, rx);
}

static void reap_one(struct worker *w, const struct fi_cq_tagged_entry *e)
{
	struct ctx *c = e->op_context;
	struct op *op;
	uint64_t flags;

	t_assert(c, "a completion without a context (flags %#llx)",
		 (unsigned long long) e->flags);
	op = op_of(c, e->tag);
	if (c->role == SHARED)
		c = &op->rx;
	t_assert(op >= s.ops && op < s.ops + s.nops &&
		 c == (c->role == TX ? &op->tx : &op->rx),
		 "a completion for a context no operation has: %p", (void *) c);
	REAPED(op);
	t_assert(op->kind == TAGGED || c->role == TX, "op %u: a receive "
		 "completion for an RMA operation or a cancelled receive",
		 op->id);
	flags = op->kind == WRITE ? FI_RMA | FI_WRITE :
		op->kind == READ ? FI_RMA | FI_READ :
		c->role == TX ? FI_TAGGED | FI_SEND : FI_TAGGED | FI_RECV;
	t_assert((e->flags & flags) == flags, "op %u (%s): completion flags "
		 "%#llx lack %#llx", op->id, kind_names[op->kind],
		 (unsigned long long) e->flags, (unsigned long long) flags);
	if (op->kind == WRITE)
		verify(w, op, op->rdev, op->remote);
	else if (op->kind == READ)
		verify(w, op, op->ldev, op->local);
	else if (c->role == RX) {
		t_assert(e->len == op->len && e->tag == op->id + 1ULL,
			 "op %u: receive of %zu bytes, tag %#llx; expected "
			 "%zu, %#llx", op->id, e->len,
			 (unsigned long long) e->tag, op->len,
			 (unsigned long long) op->id + 1);
		verify(w, op, op->rdev, op->remote);
	}
	seen(w, op, c);
}

/* A cancelled receive's buffer: the guard it was given, untouched. */
static void untouched(struct worker *w, const struct op *op)
{
	const uint8_t *got = (const uint8_t *) op->remote;

	if (op->rdev) {
		t_dev_get(w->scratch, op->remote, GUARD);
		got = w->scratch;
	}
	for (size_t i = 0; i < GUARD; i++)
		t_assert(got[i] == GUARD_BYTE, "op %u: byte %zu of a cancelled "
			 "receive written", op->id, i);
}

static void reap_err(struct worker *w, struct fid_cq *cq)
{
	struct fi_cq_err_entry err = { 0 };
	struct ctx *c;
	struct op *op = NULL;

	if (fi_cq_readerr(cq, &err, 0) != 1)
		return;
	c = err.op_context;
	if (c)
		op = op_of(c, err.tag);
	if (op && op >= s.ops && op < s.ops + s.nops && op->kind == CANCEL &&
	    c == &op->rx && err.err == FI_ECANCELED) {
		REAPED(op);
		untouched(w, op);
		seen(w, op, c);
		return;
	}
	if (op && op >= s.ops && op < s.ops + s.nops)
		t_fail("op %u (%s, %zu bytes, %s to %s, ep %d to %d): error "
		       "completion (%s): err %d (%s), prov_errno %d", op->id,
		       kind_names[op->kind], op->len,
		       op->ldev ? "device" : "host",
		       op->rdev ? "device" : "host", op->from, op->to,
		       c->role == TX ? "initiator" : "receive", err.err,
		       fi_strerror(err.err), err.prov_errno);
	t_fail("error completion for context %p: err %d (%s)", err.op_context,
	       err.err, fi_strerror(err.err));
}

static int handle(struct worker *w, struct fid_cq *cq, ssize_t ret,
		  const struct fi_cq_tagged_entry *e, const char *call)
{
	if (ret > 0) {
		for (ssize_t i = 0; i < ret; i++)
			reap_one(w, &e[i]);
		return ret;
	}
	if (ret == -FI_EAVAIL) {
		reap_err(w, cq);
		return 0;
	}
	if (ret == -FI_EAGAIN)
		return 0;
	/* fi_cq_sread's own answers: sockets' to fi_cq_signal, rxd's on
	 * timeout (rxd_cq_sreadfrom of libfabric 1.17). */
	if (!strcmp(call, "fi_cq_sread") &&
	    (ret == -FI_ECANCELED || ret == -FI_ETIMEDOUT))
		return 0;
	t_fail("%s: %zd (%s)", call, ret, ret ? fi_strerror((int) -ret) :
	       "no entries and no error");
}

/* Every CQ once, without blocking. */
static int sweep(struct worker *w)
{
	struct fi_cq_tagged_entry e[8];
	int n = 0;

	for (int i = 0; i < NEPS; i++) {
		struct fid_cq *cq = s.eps[(w->index + i) % NEPS].t.cq;

		n += handle(w, cq, fi_cq_read(cq, e, 8), e, "fi_cq_read");
	}
	return n;
}

/* A sleeper's wait for something to finish: its endpoint's CQ. */
static void sleep_on(struct worker *w, int timeout)
{
	struct fid_cq *cq = s.eps[w->index / (NTHREADS / NEPS)].t.cq;
	struct fi_cq_tagged_entry e[8];
	ssize_t ret;

	atomic_store(&w->asleep, 1);
	ret = fi_cq_sread(cq, e, 8, NULL, timeout);
	atomic_store(&w->asleep, 0);
	w->sreads++;
	if (handle(w, cq, ret, e, "fi_cq_sread"))
		w->woken++;
}

static void reap(struct worker *w, bool must)
{
	if (!w->sleeper) {
		sweep(w);
		return;
	}
	sleep_on(w, must ? 20 : 0);
	/* Completions for this thread's operations land on other CQs too. */
	if (must)
		sweep(w);
}

/* ---- issuing ----------------------------------------------------------- */

#define POST(w, call) do {						\
		ssize_t r_;						\
		while ((r_ = (call)) == -FI_EAGAIN)			\
			sweep(w);					\
		t_fi_check(r_, #call, __LINE__);			\
	} while (0)

/* op's fi_write of its local bytes, or its fi_read into them. */
static ssize_t rma(struct fid_ep *ep, struct op *op, fi_addr_t dest)
{
	void *desc = s.mr[op->ldev].desc;
	uint64_t addr = raddr(op->rdev, op->remote);
	uint64_t key = s.mr[op->rdev].key;

	if (op->kind == READ)
		return fi_read(ep, op->local, op->len, desc, dest, addr, key,
			       &op->tx);
	return fi_write(ep, op->local, op->len, desc, dest, addr, key, &op->tx);
}

static void issue(struct worker *w, struct op *op, int slot)
{
	struct ep *from = &s.eps[op->from], *to = &s.eps[op->to];
	fi_addr_t dest = from->addr[op->to];
	uint64_t tag = op->id + 1ULL;

	op->slot = slot;
	op->local = slot_buf(op->ldev, w->index, slot, 0);
	op->remote = slot_buf(op->rdev, w->index, slot, 1);
	switch (op->kind) {
	case WRITE:
	case READ:
		if (op->kind == WRITE) {
			fill(w, op->ldev, op->local, op->len, seed_of(op));
			guard(w, op->rdev, op->remote + op->len);
		} else {
			fill(w, op->rdev, op->remote, op->len, seed_of(op));
			guard(w, op->ldev, op->local + op->len);
		}
		POSTED(op);
		POST(w, rma(from->t.ep, op, dest));
		break;
	case CANCEL:
		guard(w, op->rdev, op->remote);
		POSTED(op);
		POST(w, fi_trecv(to->t.ep, op->remote, op->len,
				 s.mr[op->rdev].desc, FI_ADDR_UNSPEC,
				 CANCEL_TAG | op->id, 0, &op->rx));
		t_fi(fi_cancel(&to->t.ep->fid, &op->rx));
		break;
	default:
		fill(w, op->ldev, op->local, op->len, seed_of(op));
		guard(w, op->rdev, op->remote + op->len);
		POSTED(op);
		if (op->send_first)
			POST(w, fi_tsend(from->t.ep, op->local, op->len,
					 s.mr[op->ldev].desc, dest, tag,
					 &op->tx));
		POST(w, fi_trecv(to->t.ep, op->remote, op->len,
				 s.mr[op->rdev].desc, FI_ADDR_UNSPEC, tag, 0,
				 op->shared ? &w->shared : &op->rx));
		if (!op->send_first)
			POST(w, fi_tsend(from->t.ep, op->local, op->len,
					 s.mr[op->ldev].desc, dest, tag,
					 &op->tx));
		break;
	}
	atomic_fetch_add(&s.issued, 1);
}

static int free_slot(struct worker *w)
{
	for (int i = 0; i < WINDOW; i++)
		if (!w->slot[i] || !atomic_load(&w->slot[i]->left))
			return i;
	return -1;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint32_t next = w->index;
	int slot;

	t_cu(cuCtxSetCurrent(s.cu));
	while (atomic_load(&s.retired) < s.nops) {
		if (next < s.nops && (slot = free_slot(w)) >= 0) {
			struct op *op = &s.ops[next];

			t_assert(!atomic_load(&op->tx.done) &&
				 !atomic_load(&op->rx.done), "op %u completed "
				 "before it was posted", op->id);
			w->slot[slot] = op;
			issue(w, op, slot);
			next += NTHREADS;
			reap(w, false);
		} else {
			reap(w, true);
		}
	}
	return NULL;
}

/* ---- setup, watchdog, main --------------------------------------------- */

static void setup(void)
{
	struct t_opts o = { .tx_op_flags = FI_DELIVERY_COMPLETE };

	if (t_try_open(&s.f, &o)) {
		o.tx_op_flags = 0;
		t_open(&s.f, &o);
		printf("note: %s has no FI_DELIVERY_COMPLETE\n", t_prov);
	}
	for (int i = 0; i < NEPS; i++)
		t_ep_open(&s.eps[i].t, &s.f,
			  &(struct t_opts) { .cq_wait = FI_WAIT_UNSPEC });
	for (int i = 0; i < NEPS; i++)
		for (int j = 0; j < NEPS; j++)
			t_assert(fi_av_insert(s.eps[i].t.av, s.eps[j].t.name, 1,
					      &s.eps[i].addr[j], 0, NULL) == 1,
				 "fi_av_insert");

	s.arena_size = (size_t) NTHREADS * WINDOW * 2 * SLOT;
	s.arena[0] = aligned_alloc(4096, s.arena_size);
	t_assert(s.arena[0], "out of memory");
	s.arena[1] = t_dev_alloc(s.arena_size);
	for (int d = 0; d < 2; d++)
		t_reg(&s.f, s.arena[d], s.arena_size, FI_SEND | FI_RECV |
		      FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
		      d + 1, &s.mr[d]);
}

static void teardown(void)
{
	for (int d = 0; d < 2; d++)
		t_fi(fi_close(&s.mr[d].mr->fid));
	for (int i = 0; i < NEPS; i++)
		t_ep_close(&s.eps[i].t);
	t_close(&s.f);
	t_dev_free(s.arena[1]);
	free(s.arena[0]);
}

static void outstanding(void)
{
	int shown = 0;

	for (uint32_t i = 0; i < s.nops && shown < 10; i++) {
		struct op *op = &s.ops[i];

		if (i >= atomic_load(&s.issued) + NTHREADS * WINDOW)
			break;
		if (!atomic_load(&op->left) || !op->local)
			continue;
		printf("outstanding: op %u, %s, %zu bytes, %s to %s, ep %d to "
		       "%d%s, completions: initiator %d, receive %d\n", op->id,
		       kind_names[op->kind], op->len,
		       op->ldev ? "device" : "host",
		       op->rdev ? "device" : "host", op->from, op->to,
		       op->kind == TAGGED && op->send_first ?
		       ", sent before the receive was posted" : "",
		       atomic_load(&op->tx.done), atomic_load(&op->rx.done));
		shown++;
	}
}

static void *watchdog(void *arg)
{
	unsigned last = 0, cur;
	double since = t_now();

	(void) arg;
	for (;;) {
		usleep(100000);
		cur = atomic_load(&s.retired);
		if (cur == s.nops)
			return NULL;
		if (cur != last) {
			last = cur;
			since = t_now();
		} else if (t_now() - since > STALL_S) {
			outstanding();
			t_fail("no operation finished for %d s: %u of %u done, "
			       "%u posted", STALL_S, cur, s.nops,
			       atomic_load(&s.issued));
		}
	}
}

/* After the last completion: no more may come. */
static void quiet(void)
{
	struct fi_cq_tagged_entry e;
	double end = t_now() + 0.2;

	while (t_now() < end) {
		for (int i = 0; i < NEPS; i++) {
			ssize_t ret = fi_cq_read(s.eps[i].t.cq, &e, 1);

			if (ret == 1) {
				struct ctx *c = e.op_context;

				t_fail("a completion after the last (context "
				       "%p, %s)", (void *) c, c && c->role == RX ?
				       "receive" : "initiator");
			}
			t_assert(ret == -FI_EAGAIN, "fi_cq_read: %zd", ret);
		}
	}
}

static void stress(void)
{
	const char *n = t_env("HMEMLOOP_STRESS_OPS");
	unsigned long reaped = 0, sreads = 0, woken = 0;
	pthread_t dog;
	double t0;

	s.nops = strtoul(n, NULL, 0);
	t_assert(s.nops > 0, "HMEMLOOP_STRESS_OPS=%s", n);
	s.host = t_env("HMEMLOOP_STRESS_HOST");
	t_cu(cuCtxGetCurrent(&s.cu));
	setup();
	/* Some providers' libraries (psm) catch SIGSEGV to write a report
	 * file: a crash is a crash. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	s.ops = calloc(s.nops, sizeof(*s.ops));
	t_assert(s.ops, "out of memory");
	for (uint32_t i = 0; i < s.nops; i++) {
		plan(&s.ops[i], i);
		s.kinds[s.ops[i].kind]++;
		s.bytes += s.ops[i].len;
	}
	printf("%s: %u operations (%lu writes, %lu reads, %lu tagged "
	       "messages, %lu cancelled receives), %.1f MiB, %d threads, %d "
	       "endpoints\n", t_prov, s.nops, s.kinds[WRITE], s.kinds[READ],
	       s.kinds[TAGGED], s.kinds[CANCEL],
	       s.bytes / 1048576.0, NTHREADS, NEPS);

	t0 = t_now();
	t_assert(!pthread_create(&dog, NULL, watchdog, NULL), "pthread_create");
	for (int i = 0; i < NTHREADS; i++) {
		struct worker *w = &s.w[i];

		w->index = i;
		w->sleeper = i & 1;
		w->shared.role = SHARED;
		w->scratch = malloc(MAXLEN + 2 * GUARD);
		t_assert(w->scratch, "out of memory");
		t_assert(!pthread_create(&w->th, NULL, work, w),
			 "pthread_create");
	}
	for (int i = 0; i < NTHREADS; i++) {
		t_assert(!pthread_join(s.w[i].th, NULL), "pthread_join");
		reaped += s.w[i].reaped;
		sreads += s.w[i].sreads;
		woken += s.w[i].woken;
		free(s.w[i].scratch);
	}
	t_assert(!pthread_join(dog, NULL), "pthread_join");
	t0 = t_now() - t0;
	for (uint32_t i = 0; i < s.nops; i++) {
		struct op *op = &s.ops[i];

		t_assert(atomic_load(&op->tx.done) == (op->kind != CANCEL),
			 "op %u (%s): initiator completion seen %d times", i,
			 kind_names[op->kind], atomic_load(&op->tx.done));
		t_assert(atomic_load(&op->rx.done) ==
			 (op->kind == TAGGED || op->kind == CANCEL),
			 "op %u (%s): receive completion seen %d times", i,
			 kind_names[op->kind], atomic_load(&op->rx.done));
	}
	quiet();
	t_ok("%s: %u operations, every byte and completion checked, in "
	     "%.1f s (%.0f ops/s); %lu completions, %lu fi_cq_sread calls, "
	     "%lu of them returned entries", t_prov, s.nops, t0,
	     s.nops / t0, reaped, sreads, woken);
	free(s.ops);
	teardown();
}

static const struct t_case cases[] = {
	T_CASE("stress", stress),
};

T_MAIN(cases, .flags = T_CUDA);
