/* SPDX-License-Identifier: BSD-2-Clause */
/* The async test's fixture and operations (async_fx.c) and its cases, one
 * file per kind of them; async.c says what they test. */
#ifndef ASYNC_H
#define ASYNC_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

#define N		64		/* operations in flight */
#define LEN		4096		/* bytes each, one slot */
#define SPAN		(N * LEN)
#define SREAD_MS	5000
#define POLL_MS		3000
#define ASLEEP_US	200000		/* for a reader to fall asleep */
/* The copy call that fails, and which operation's copy that is: the
 * test's own copy calls before the first operation are padded up to
 * FAIL_AT - FAIL_OP. */
#define FAIL_AT		40
#define FAIL_OP		20

/* Device buffers A, B, C (host memory where t_host is set) and host
 * buffers A, B: N slots each, all registered for everything. */
enum { DA, DB, DC, HA, HB, NB };

enum op { WRITE, READ, WRITEDATA, SEND };

struct poster {
	pthread_t th;
	struct t_ep *e;
	int *ctxs;
	useconds_t delay;
};

/* ---- async_fx.c ---- */

extern struct t_fabric f;
extern struct t_ep a, b, c;		/* a and c post to b */
extern fi_addr_t a_to_b, c_to_b;
extern void *buf[NB];
extern struct t_mr mr[NB];
extern struct fid_cntr *cntrs[2];	/* closed with the fixture */
extern int ctx[N], ctx2[N];		/* operations' contexts */
extern uint8_t tmp[SPAN];
extern unsigned long copies;		/* CUDA copy calls the test made */
extern CUcontext cu_ctx;

void fx_setup(void);
bool is_dev(int n);
const char *named(const char *what, int src, int dst);
bool fab_open(const struct t_opts *o, const char *what);
bool eps_open(const struct t_opts *ao, const struct t_opts *bo, bool three,
	      const char *what);
bool fx_open(const struct t_opts *ao, const char *what);
bool counted_open(bool *event, const char *what);
void fx_close(void);
void put(int n, size_t off, const void *p, size_t len);
void get(void *p, int n, size_t off, size_t len);
unsigned fill(int n);
void zero(int n);
void check_slot(int n, int i, size_t len, unsigned s, const char *what);
void post(struct t_ep *e, enum op k, int lb, size_t loff, int rb,
	  size_t roff, void *context, uint64_t data);
void post_all(struct t_ep *e, enum op k, int lb, int rb, int *ctxs);
bool writes_in_flight(const struct t_opts *ao, const char *what,
		      unsigned *s);
void next_ok(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
	     const char *what);
int op_in(const void *context, const int *ctxs);
int first_seen(int i, bool *seen, const void *context, const char *what);
int next_op(struct fid_cq *cq, const int *ctxs, bool *seen,
	    const char *what);
void reap(struct t_ep *e, const int *ctxs, int dst, unsigned s,
	  const char *what);
void window(enum op k, int lb, int rb, const char *call);
unsigned poster_start(struct poster *p, useconds_t delay);
void poster_join(struct poster *p);

/* ---- async_wait.c: waiting, threads, closing ---- */

void case_sread(void);
void case_trywait(void);
void case_exit(void);
void case_holdback(void);
void case_close_ep(void);
void case_close_mr(void);
void child_fault(void);
void child_no_sync(void);
void child_batch(void);
void child_kernel_bounds(void);
void child_kernel_host(void);

/* ---- inflight_close.c: the inflight test's closing orders ---- */

void case_close_orders(void);

#endif
