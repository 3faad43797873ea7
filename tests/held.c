/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Receives hmemloop holds from the provider (issue 29), against the
 * provider alone on host memory: run by the harness with and without
 * hmemloop ("digest:" lines). An endpoint's own address is in its AV, as
 * MPI puts it there, so that its receives are recorded, and held where
 * they may be.
 *
 *   same-call  another process's message to a receive posted (and held)
 *              is counted received after the same call as without
 *              hmemloop, in a fixed sequence of calls (a counter read, a
 *              send to that process, a counter read)
 *   sread, cntr-wait, fd
 *              a thread asleep in fi_cq_sread, in fi_cntr_wait, or in
 *              poll(2) on the CQ's fd after fi_trywait, and a receive
 *              posted meanwhile: another process's message wakes it (a
 *              receive kept from the provider would leave it asleep where
 *              the provider progresses while it sleeps); then the
 *              process's own message, to such a receive, wakes it too
 *              (tests/holdoff: found in the provider, not held)
 *   cancel     a held receive cancelled: FI_ECANCELED, its context
 *   directed   a directed tagged receive held: another source's message
 *              passes it by, its own source's takes it
 *   multi      a receive held, a multi-receive buffer, a receive: three
 *              messages take them in the order posted
 *   close      an endpoint closed with receives posted, its CQ read after
 *   none, auto, atomic
 *              (each in a process of its own, for tests/holdoff, which
 *              reads hmemloop's statistics): one message of the process to
 *              a receive posted, with the data progress the provider
 *              grants, with FI_PROGRESS_AUTO asked for, and on endpoints
 *              with FI_ATOMIC
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN 64

static const struct t_opts caps = {
	.caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV,
	.own_cntr = { FI_RECV },
};

/* ---- another process ------------------------------------------------------ */

struct peer {
	pid_t pid;
	int to, from;			/* pipes */
	fi_addr_t addr;			/* its endpoint, in r's AV */
	fi_addr_t self;			/* r's own, in its AV */
};

static void xread(int fd, void *p, size_t n)
{
	t_assert(read(fd, p, n) == (ssize_t) n, "pipe read");
}

static void xwrite(int fd, const void *p, size_t n)
{
	t_assert(write(fd, p, n) == (ssize_t) n, "pipe write");
}

/* The other process: sends a message for each 's' it is given, saying so
 * once it is posted, and drives its own progress meanwhile; at the end it
 * waits for its sends' completions and for the message it receives. */
static void peer_run(const struct t_opts *o, int rfd, int wfd)
{
	struct fi_context2 ctx[4], rctx;
	char name[256], buf[LEN] = { 0 }, c;
	struct fi_cq_tagged_entry e;
	int sent = 0, done = 0;
	bool got = false;
	struct t_fabric f;
	struct t_ep ep;
	fi_addr_t to;
	size_t len;

	t_open(&f, o);
	t_ep_open(&ep, &f, o);
	xwrite(wfd, &ep.namelen, sizeof(ep.namelen));
	xwrite(wfd, ep.name, ep.namelen);
	xread(rfd, &len, sizeof(len));
	xread(rfd, name, len);
	to = t_insert(&ep, name);
	t_fi(fi_recv(ep.ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	for (double end = 0; done < sent || !got || !end;) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };

		if (!end && poll(&p, 1, 0) == 1) {
			if (read(rfd, &c, 1) != 1 || c != 's') {
				end = t_now() + t_wait_s();
			} else {
				t_assert(sent < 4, "more than four sends");
				t_post(ep.cq, fi_send(ep.ep, buf, LEN, NULL,
						      to, &ctx[sent]));
				sent++;
				xwrite(wfd, "s", 1);
			}
		}
		if (fi_cq_read(ep.cq, &e, 1) == 1) {
			got |= e.op_context == &rctx;
			done += e.op_context != &rctx;
		}
		t_assert(!end || t_now() < end, "the other process: %d of %d "
			 "sends completed, its receive %s", done, sent,
			 got ? "too" : "not");
	}
	t_ep_close(&ep);
	t_close(&f);
	exit(0);
}

/* r and another process, their addresses exchanged, and a first message
 * of its received: the two are connected where the provider connects,
 * which may need r's progress. */
static void peer_start(struct peer *p, const struct t_opts *o, struct t_ep *r)
{
	char name[256], buf[LEN];
	struct fi_context2 rctx;
	size_t len;

	p->pid = t_fork_peer(&p->from, &p->to);
	if (!p->pid)
		peer_run(o, p->from, p->to);
	xread(p->from, &len, sizeof(len));
	xread(p->from, name, len);
	p->self = t_insert(r, r->name);
	p->addr = t_insert(r, name);
	xwrite(p->to, &r->namelen, sizeof(r->namelen));
	xwrite(p->to, r->name, r->namelen);
	t_fi(fi_recv(r->ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	xwrite(p->to, "s", 1);
	t_expect(r->cq, &rctx, FI_RECV, LEN);
	xread(p->from, buf, 1);
}

/* It sends r a message, posted once this returns. */
static void peer_send(struct peer *p)
{
	char c;

	xwrite(p->to, "s", 1);
	xread(p->from, &c, 1);
}

/* r sends it the message it waits for, and it ends. */
static void peer_stop(struct peer *p, struct t_ep *r)
{
	struct fi_context2 ctx;
	char buf[LEN] = { 0 };
	int st;

	t_post(r->cq, fi_send(r->ep, buf, LEN, NULL, p->addr, &ctx));
	t_expect(r->cq, &ctx, FI_SEND, (size_t) -1);
	xwrite(p->to, "q", 1);
	close(p->to);
	close(p->from);
	t_assert(waitpid(p->pid, &st, 0) == p->pid && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "the other process failed: status %#x", st);
}

static bool auto_progress(const struct t_fabric *f)
{
	return f->info->domain_attr->data_progress == FI_PROGRESS_AUTO;
}

static void same_call(void)
{
	struct fi_context2 rctx, sctx;
	struct t_fabric f;
	struct peer p;
	struct t_ep r;
	char buf[LEN];
	bool seen[2];

	t_open(&f, &caps);
	t_ep_open(&r, &f, &caps);
	t_unprogress(r.cq);
	peer_start(&p, &caps, &r);
	t_fi(fi_recv(r.ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	peer_send(&p);
	/* What was sent has had the time to reach this process. A provider
	 * that progresses on its own counts it in its own time, which no
	 * call here changes: wait until it has, however loaded the machine
	 * (10 s at most), so that both runs read the same. */
	poll(NULL, 0, 50);
	for (int ms = 0; auto_progress(&f) && ms < 10000 &&
	     fi_cntr_read(r.cntr[0]) < 2; ms += 10)
		poll(NULL, 0, 10);
	/* Each call may drive the provider: after which is the message
	 * counted received? */
	seen[0] = fi_cntr_read(r.cntr[0]) > 1;
	t_post(r.cq, fi_send(r.ep, buf, LEN, NULL, p.addr, &sctx));
	seen[1] = fi_cntr_read(r.cntr[0]) > 1;
	for (int n = 0; n < 2; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		t_assert(!t_wait(r.cq, &e, &err) &&
			 (e.op_context == &rctx || e.op_context == &sctx),
			 "the receive or the send did not complete");
	}
	printf("digest: the message counted received after the first "
	       "fi_cntr_read: %s, after the send and the second: %s\n",
	       seen[0] ? "yes" : "no", seen[1] ? "yes" : "no");
	peer_stop(&p, &r);
	t_ep_close(&r);
	t_close(&f);
}

/* ---- asleep while a receive is posted ---------------------------------- */

static struct t_ep r;
static uint64_t want;			/* the receive count fi_cntr_wait waits for */
static void *woke_on;			/* the context fi_cq_sread returned */

/* Asleep in the provider: fi_cq_sread on r's CQ, or fi_cntr_wait on its
 * receive counter. 0 when the message came. */
static void *asleep(void *cntr)
{
	struct fi_cq_tagged_entry e;
	ssize_t n;

	if (cntr)
		return (void *) (intptr_t) fi_cntr_wait(cntr, want, 5000);
	n = fi_cq_sread(r.cq, &e, 1, NULL, 5000);
	woke_on = n == 1 ? e.op_context : NULL;
	return (void *) (intptr_t) (n == 1 ? 0 : n);
}

/* In poll(2) on the CQ's fd, after fi_trywait said it may. */
static int cq_fd;

static void *polled(void *fabric)
{
	struct fid *fids[] = { &r.cq->fid };
	struct pollfd p = { .fd = cq_fd, .events = POLLIN };
	int ret;

	while ((ret = fi_trywait(fabric, fids, 1)) == -FI_EAGAIN)
		;
	t_fi(ret);
	return (void *) (intptr_t) (poll(&p, 1, 5000) == 1 ? 0 : -1);
}

/* The thread asleep, a receive posted meanwhile, and a message sent to
 * it: by another process (p) or by r itself (to self). The thread must
 * wake; r's CQ holds the receive's and the send's entries but for the one
 * fi_cq_sread took. */
static void wake(const char *what, void *(*fn)(void *), void *arg,
		 struct peer *p, fi_addr_t self)
{
	struct fi_context2 rctx, sctx;
	char buf[LEN], out[LEN] = { 0 };
	pthread_t th;
	void *ret;

	woke_on = NULL;
	t_assert(!pthread_create(&th, NULL, fn, arg), "a thread");
	poll(NULL, 0, 100);
	t_fi(fi_recv(r.ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	if (p)
		peer_send(p);
	else
		t_post(r.cq, fi_send(r.ep, out, LEN, NULL, self, &sctx));
	t_assert(!pthread_join(th, &ret) && !ret, "%s: the thread asleep "
		 "woke with %ld", what, (long) (intptr_t) ret);
	/* The entries fi_cq_sread did not take, in either order. */
	for (int n = (woke_on != &rctx) + (!p && woke_on != &sctx); n; n--) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		t_assert(!t_wait(r.cq, &e, &err) && e.op_context != woke_on &&
			 (e.op_context == &rctx || (!p && e.op_context == &sctx)),
			 "%s: not the receive's or the send's entry", what);
		woke_on = e.op_context;
	}
	printf("digest: %s: woken by %s message\n", what,
	       p ? "another process's" : "its own");
}

/* A thread asleep while receives are posted: another process's message,
 * then the process's own (which must find its receive in the provider,
 * not held: tests/holdoff counts). */
static void sleeper(const char *what, enum fi_wait_obj cq_wait,
		    bool counter, bool fd)
{
	struct fid_cntr *cntr = NULL;
	struct t_opts o = caps;
	struct t_fabric f;
	struct peer p;
	void *arg;

	/* sockets' fi_cntr_wait sleeps past the count (a clock bug). */
	if (counter && !strcmp(t_prov, "sockets")) {
		t_case_skip("%s: sockets' fi_cntr_wait", what);
		return;
	}
	o.cq_wait = cq_wait;
	t_open(&f, &o);
	if (counter) {
		cntr = t_cntr_open(&f, FI_WAIT_UNSPEC);
		o.cntr = cntr;
		o.cntr_flags = FI_RECV;
		o.own_cntr[0] = 0;
	}
	if (t_ep_try_open(&r, &f, &o, NULL)) {
		t_case_skip("%s: %s has no such CQ", what, t_prov);
		t_close(&f);
		return;
	}
	if (fd && fi_control(&r.cq->fid, FI_GETWAIT, &cq_fd)) {
		t_case_skip("%s: %s gives no fd of its CQ", what, t_prov);
		t_ep_close(&r);
		t_close(&f);
		return;
	}
	t_unprogress(r.cq);
	peer_start(&p, &caps, &r);
	arg = fd ? (void *) f.fabric : cntr;
	want = 2;
	wake(what, fd ? polled : asleep, arg, &p, 0);
	want = 3;
	wake(what, fd ? polled : asleep, arg, NULL, p.self);
	peer_stop(&p, &r);
	t_ep_close(&r);
	if (cntr)
		t_fi(fi_close(&cntr->fid));
	t_close(&f);
}

static void sread(void)
{
	sleeper("fi_cq_sread", FI_WAIT_UNSPEC, false, false);
}

static void cntr_wait(void)
{
	sleeper("fi_cntr_wait", FI_WAIT_NONE, true, false);
}

static void fd(void)
{
	sleeper("poll on the CQ's fd", FI_WAIT_FD, false, true);
}

/* ---- one process ------------------------------------------------------- */

static struct t_fabric f;
static struct t_ep a, b;
static fi_addr_t ab, ba;

static bool two_open(const struct t_opts *o)
{
	if (t_try_open(&f, o) == -FI_ENODATA) {
		t_case_skip("%s does not grant it", t_prov);
		return false;
	}
	t_ep_open(&a, &f, o);
	t_ep_open(&b, &f, o);
	ab = t_insert(&a, b.name);
	ba = t_insert(&b, a.name);
	return true;
}

static void two_close(void)
{
	t_ep_close(&a);
	t_ep_close(&b);
	t_close(&f);
}

/* The next entry of cq, as a digest line. */
static void next(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &e, &err);

	t_assert(ret != -FI_EAGAIN, "%s: no completion", what);
	if (ret)
		printf("digest: %s: error %s\n", what, fi_strerror(err.err));
	else
		printf("digest: %s: %s len %zu\n", what,
		       e.flags & FI_RECV ? "received" : "sent",
		       e.flags & FI_RECV ? e.len : 0);
}

static void cancel(void)
{
	struct fi_context2 rctx;
	char buf[LEN];

	if (!two_open(&caps))
		return;
	t_fi(fi_recv(b.ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	t_fi(fi_cancel(&b.ep->fid, &rctx));
	next(b.cq, "a receive cancelled");
	t_assert(t_quiet(b.cq, 100), "more than the cancel's entry");
	two_close();
}

static void directed(void)
{
	struct fi_context2 rctx, s1, s2;
	char buf[LEN] = { 0 }, out[LEN];
	struct t_ep c;
	fi_addr_t cb, bc;

	if (!two_open(&caps))
		return;
	t_ep_open(&c, &f, &caps);
	cb = t_insert(&c, b.name);
	bc = t_insert(&b, c.name);
	t_fill(out, LEN, 5);
	t_fi(fi_trecv(b.ep, buf, LEN, NULL, ba, 3, 0, &rctx));
	t_post(c.cq, fi_tsend(c.ep, out, LEN, NULL, cb, 3, &s1));
	t_assert(t_quiet(b.cq, 200), "a receive from a took another's "
		 "message");
	t_post(a.cq, fi_tsend(a.ep, out, LEN, NULL, ab, 3, &s2));
	next(b.cq, "a directed receive, its own source's message");
	next(a.cq, "its send");
	/* The other message, for a receive of its own source. */
	t_fi(fi_trecv(b.ep, buf, LEN, NULL, bc, 3, 0, &rctx));
	next(b.cq, "the other source's message");
	next(c.cq, "its send");
	t_ep_close(&c);
	two_close();
}

/* A receive held, then a multi-receive buffer (never held), then a
 * receive again: three messages take them in the order posted, and the
 * buffer's entries say what landed where, as on the provider. */
static void multi(void)
{
	struct fi_context2 rctx[2], mctx, sctx[3];
	char buf[2][LEN], mbuf[2 * LEN], out[LEN];
	struct iovec iov = { mbuf, sizeof(mbuf) };
	struct fi_msg m = {
		.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
		.context = &mctx,
	};
	struct t_opts o = caps;
	bool released = false;

	o.caps |= FI_MULTI_RECV;
	o.min_multi = LEN;
	if (!two_open(&o))
		return;
	t_fill(out, LEN, 6);
	t_fi(fi_recv(b.ep, buf[0], LEN, NULL, FI_ADDR_UNSPEC, &rctx[0]));
	t_fi(fi_recvmsg(b.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	t_fi(fi_recv(b.ep, buf[1], LEN, NULL, FI_ADDR_UNSPEC, &rctx[1]));
	for (int i = 0; i < 3; i++)
		t_post(a.cq, fi_send(a.ep, out, LEN, NULL, ab, &sctx[i]));
	for (int i = 0; i < 3; i++)
		next(a.cq, "a send");
	/* fi_msg(3) lets the release come on the last message's entry or on
	 * one of its own (shm 1.17): the digest says that it came. */
	for (int i = 0; i < 3 || !released; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		t_assert(!t_wait(b.cq, &e, &err), "a receive failed: %s",
			 fi_strerror(err.err));
		released |= e.op_context == &mctx && (e.flags & FI_MULTI_RECV);
		if (i >= 3) {
			t_assert(released && !e.len, "not the release");
			continue;
		}
		printf("digest: multi: %s, at offset %td, len %zu\n",
		       e.op_context == &rctx[0] ? "the first receive" :
		       e.op_context == &rctx[1] ? "the last receive" :
		       e.op_context == &mctx ? "the buffer" : "?",
		       e.op_context == &mctx ? (char *) e.buf - mbuf : 0,
		       e.len);
	}
	printf("digest: multi: the buffer released\n");
	two_close();
}

static void closed(void)
{
	struct fi_context2 rctx[2];
	char buf[2][LEN];
	struct fid_cq *cq;

	if (!two_open(&caps))
		return;
	for (int i = 0; i < 2; i++)
		t_fi(fi_recv(b.ep, buf[i], LEN, NULL, FI_ADDR_UNSPEC,
			     &rctx[i]));
	/* The endpoint goes, its CQ stays: what does it say? */
	cq = b.cq;
	t_unprogress(cq);
	t_fi(fi_close(&b.ep->fid));
	for (int i = 0; i < 2; i++) {
		struct fi_cq_err_entry err = { 0 };
		struct fi_cq_tagged_entry e;
		double end = t_now() + 0.5;
		ssize_t ret;

		while ((ret = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN &&
		       t_now() < end)
			;
		if (ret == -FI_EAGAIN) {
			printf("digest: closed: no entry %d\n", i);
			break;
		}
		if (ret == -FI_EAVAIL)
			t_assert(fi_cq_readerr(cq, &err, 0) == 1, "readerr");
		printf("digest: closed: entry %d: %s\n", i,
		       err.err ? fi_strerror(err.err) : "success");
	}
	t_fi(fi_close(&b.av->fid));
	t_fi(fi_close(&cq->fid));
	t_fi(fi_close(&b.cntr[0]->fid));
	t_ep_close(&a);
	t_close(&f);
}

/* One message of the process to a receive posted: what tests/holdoff
 * counts. */
static void exchange(const struct t_opts *o)
{
	struct fi_context2 rctx, sctx;
	char out[LEN], in[LEN] = { 0 };

	if (!two_open(o))
		return;
	printf("progress: %s\n", f.info->domain_attr->data_progress ==
	       FI_PROGRESS_MANUAL ? "manual" : "auto");
	t_fill(out, LEN, 8);
	t_fi(fi_recv(b.ep, in, LEN, NULL, FI_ADDR_UNSPEC, &rctx));
	t_post(a.cq, fi_send(a.ep, out, LEN, NULL, ab, &sctx));
	t_expect(a.cq, &sctx, FI_SEND, (size_t) -1);
	t_expect(b.cq, &rctx, FI_RECV, LEN);
	t_assert(t_check(in, LEN, 8), "wrong bytes");
	two_close();
}

static void none(void)
{
	exchange(&caps);
}

static void autoprogress(void)
{
	struct t_opts o = caps;

	o.progress = FI_PROGRESS_AUTO;
	exchange(&o);
}

static void atomics(void)
{
	struct t_opts o = caps;

	o.caps |= FI_ATOMIC;
	exchange(&o);
}

static const struct t_case cases[] = {
	T_CASE("same-call", same_call),
	T_CASE("sread", sread),
	T_CASE("cntr-wait", cntr_wait),
	T_CASE("fd", fd),
	T_CASE("cancel", cancel),
	T_CASE("directed", directed),
	T_CASE("multi", multi),
	T_CASE("close", closed),
	T_FRESH("none", none, 0),
	T_FRESH("auto", autoprogress, 0),
	T_FRESH("atomic", atomics, 0),
};

T_MAIN(cases);
