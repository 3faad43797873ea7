/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the device RMA test's files: rma.c (main, the cases that
 * need a process of their own), rma_core.c (buffers, fixture, one
 * operation checked end to end) and rma_cases.c (the in-process cases). */
#ifndef RMA_H
#define RMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmltest.h"

#define KIB		1024
#define MIB		(1024 * 1024)
#define PAD		4096		/* guard bytes checked around a range */
#define BIG		(MIB + 2 * PAD)
#define SMALL		(64 * KIB)
#define MAXIOV		8
#define ALL		(FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/* ---- buffers ---------------------------------------------------------- */

enum { HA, HB, DA, DB, RO, WO, HB2, DB2, NBUF };

struct buf {
	const char *name;
	bool dev;
	size_t size;
	uint64_t access;
	int dom;		/* the domain it is registered in */
	uint64_t key;		/* requested key (domain 2 repeats domain 1's) */
	char *p;
	uint8_t *shadow;	/* what it must hold */
	struct t_mr mr;
};

extern struct buf bufs[NBUF];
extern uint8_t *scratch;
extern unsigned long copies;	/* CUDA copy calls the test made */

void alloc_buffers(void);
void dev_put(void *dev, const void *host, size_t n);
void dev_get(void *host, const void *dev, size_t n);
void verify_all(const char *what);

/* ---- the fixture ------------------------------------------------------- */

struct ini {			/* an initiator */
	struct t_ep *ep;
	struct fid_cntr *wr, *rd;	/* bound FI_WRITE, FI_READ */
	bool selective;
};

struct tgt {			/* a target, as an initiator names it */
	struct t_ep *ep;
	int dom;
	fi_addr_t addr;
	struct fid_cntr *rw, *rr;	/* bound FI_REMOTE_WRITE, _READ */
};

struct fx {
	char mode[64];
	struct t_fabric f[2];
	bool rma_event;		/* f[1] has it */
	struct t_ep a, b, c, s;	/* a, b, s in f[0]; c in f[1] */
	struct ini ia, is;	/* is: s, bound FI_SELECTIVE_COMPLETION */
	struct tgt tb, ta, tc;	/* from a: b, a itself, c; tb serves s too */
	size_t inject, iov_limit, rma_iov_limit;
	uint64_t data_mask;
	bool default_completion;	/* tx op_flags has FI_COMPLETION */
};

extern struct fx *cur_fx;	/* for t_ok lines */
extern bool chatty;		/* notes only the first time round */

void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool fx_open(struct fx *x, bool virt, bool light);
void fx_close(struct fx *x);
uint64_t bad_key(int dom);

/* ---- one operation ----------------------------------------------------- */

enum op { WRITE, WRITEV, WRITEMSG, INJECT, WRITEDATA, INJECTDATA,
	  READ, READV, READMSG, NOPS };

extern const char *const op_names[NOPS];

struct piece {
	int b;
	size_t off, len;
	uint64_t key;		/* nonzero: this key instead */
	bool raw;		/* addr instead of the region's */
	uint64_t addr;
};

struct xfer {
	enum op op;
	uint64_t flags;		/* the msg calls' */
	size_t nl, nr;
	struct piece l[MAXIOV], r[MAXIOV];	/* local, remote */
};

bool is_read(enum op op);
bool is_inject(enum op op);
struct xfer simple(enum op op, int lb, size_t loff, int rb, size_t roff,
		   size_t len);
size_t total(const struct piece *p, size_t n);
void prep(const struct xfer *x, bool whole);
void effect(const struct xfer *x);
void check(const struct xfer *x, bool whole, const char *what);
ssize_t post(struct t_ep *e, const struct tgt *t, const struct xfer *x,
	     void *ctx, uint64_t data);
void issue(const struct fx *fx, const struct ini *in, const struct tgt *t,
	   const struct xfer *x, int want, const char *what);
void run(const struct ini *in, const struct tgt *t, const struct xfer *x,
	 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void run_bad(const struct ini *in, const struct tgt *t, const struct xfer *x,
	     int want, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* ---- rma_cases.c ------------------------------------------------------- */

void case_ops(void);
void case_late(void);
void case_iov(void);
void case_self(void);
void case_domains(void);
void case_selective(void);
void case_cqdata(void);
void case_bad(void);
void case_bad_host(void);
void good_after(struct fx *x, const char *after);
/* "fi_read device to host": the call, where its bytes come from and go. */
void describe(char *s, size_t n, enum op op, int lb, int rb);

/* ---- rma_threads.c ----------------------------------------------------- */

void case_threads(void);

#endif
