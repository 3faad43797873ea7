/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's shared parts (wait_fx.c) and its cases, one file per
 * section of them; wait.c says what they test. */
#ifndef WAIT_H
#define WAIT_H

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

#define NWAITS		5	/* sread_waits */

struct fx {
	struct t_fabric f;
	struct t_ep a, b;
	fi_addr_t b_in_a, a_in_b;
	struct t_mr src, dst;		/* dsrc, ddst */
	struct fid_cntr *cntr;		/* where fx_opts.count says */
	struct fid_wait *ws;		/* a's CQ or the counter is in it */
	struct t_ep *cntr_ep;		/* the endpoint cntr is bound to */
	uint64_t cntr_flags;		/* with these flags */
};

struct fx_opts {
	uint32_t version;		/* 0: 1.17 */
	uint64_t caps;			/* more than FI_MSG|FI_TAGGED|FI_RMA */
	enum fi_wait_obj await, bwait;	/* a's and b's CQ */
	enum fi_cq_wait_cond acond;
	enum fi_wait_obj set;		/* a wait set of this kind, holding
					 * a's CQ or, with cwait FI_WAIT_SET,
					 * the counter */
	void *acq_ctx;
	bool cntr;			/* a counter, */
	enum fi_wait_obj cwait;		/* its wait object (FI_WAIT_UNSPEC
					 * where 0), */
	uint64_t count;			/* counting a's FI_WRITE (0), b's
					 * FI_REMOTE_WRITE, FI_REMOTE_READ or
					 * FI_RECV, or with FI_RMA_EVENT,
					 * remote writes to b's region dst */
};

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

/* A counter where an operation counts (fx_opts.count), and the
 * operation. */
struct counted {
	const char *name;
	uint64_t count;
	void (*op)(struct fx *x, void *ctx);
};

#define NCOUNTED	5

/* ---- wait_fx.c ---- */

extern CUcontext cu_ctx;
extern void *dsrc, *ddst;		/* device buffers, LEN bytes each */
extern uint8_t host[LEN];
extern unsigned seed;
extern struct fx x;
/* The CQ wait objects fi_cq_sread works with. */
extern const enum fi_wait_obj sread_waits[NWAITS];

const char *wait_name(enum fi_wait_obj w);
ssize_t signalled_ret(void);
ssize_t sread_timedout(void);
int ep_open(struct fx *x, struct t_ep *e, enum fi_wait_obj w,
		   enum fi_cq_wait_cond cond, struct fid_wait *ws, void *ctx);
void fx_close(struct fx *x);
bool fx_open(struct fx *x, const struct fx_opts *o, const char *what);
bool fd_of(struct fid *fid, int *fd, const char *what);
unsigned fill_src(void);
void check_dst(unsigned s, size_t len, const char *what);
void dev_write(struct fx *x, void *ctx);
void bad_write(struct fx *x, void *ctx);
void good_write(struct fx *x, const char *what);
void dev_recv(struct fx *x, void *ctx);
void dev_send(struct fx *x, void *ctx);
void dev_tsend(struct fx *x, uint64_t tag, void *ctx);
void dev_trecv(struct fx *x, uint64_t tag, void *ctx);
void check_entry(const struct fi_cq_tagged_entry *e, void *ctx,
			uint64_t flags, const char *what);
void expect_err(struct fid_cq *cq, void *ctx, const char *what);
void expect_empty(struct fid_cq *cq, const char *what);
void *sleeper_run(void *arg);
void sleeper_start(struct sleeper *s);
double sleeper_join(struct sleeper *s, double t0, const char *what);
double sleeper_woken(struct sleeper *s, void (*op)(struct fx *, void *),
		     void *ctx, const char *what);
bool sleeper_within(struct sleeper *s, int seconds);
double sleeper_now(struct sleeper *s, const char *what);
bool sread_times_out(struct fid_cq *cq);
const char *rstr(ssize_t ret);
void error_queued(struct fx *x, void *ctx, const char *what);
extern const struct counted counted[NCOUNTED];
bool counted_open(const struct counted *c, enum fi_wait_obj w,
		  enum fi_wait_obj set, const char *what);
void counted_once(const char *what);

/* ---- wait_sread.c: 1. fi_cq_sread and fi_cq_sreadfrom ---- */

void sread_queued(void);
void sread_woken(void);
void sread_signal(void);
void sread_source(void);
void sread_threshold(void);
void sread_error(void);
void sread_rewait(void);

/* ---- wait_fd.c: 2. FI_GETWAIT and fi_trywait ---- */

void getwait(void);
void trywait_loop(void);
void sread_race(void);

/* ---- wait_cntr.c: 3. counters ---- */

void cntr_run(void);
void cntr_fd(void);
void cntr_trywait_loop(void);

/* ---- wait_err.c: 4. error entries ---- */

void cq_err(void);
void cq_err_1_4(void);
void cq_err_1_20(void);

/* ---- wait_sets.c: 5. wait sets and poll sets ---- */

void waitset(void);
void pollset(void);
void cntr_waitset(void);
void cntr_pollset(void);

/* ---- wait_tracked.c: 6. blocking reads where receives of a tracked
 * endpoint complete ---- */

void tracked_sread(void);

#endif
