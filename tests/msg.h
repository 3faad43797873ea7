/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/msg: what its parts share (msg.c: the fixture, one message, the
 * checks; msg_calls.c: cases 1-7; msg_race.c: case 8; msg_rx.c:
 * cases 9-11). */
#ifndef MSG_H
#define MSG_H

#include "hmltest.h"

#define KIB		1024
#define BUFSZ		(1024 * KIB)
#define PAD		256		/* guard bytes around a receive */
#define GAP		64		/* between the pieces of an iov */
#define EXTRA		64		/* a receive is this much longer */
#define MAXIOV		4
#define QUIET_MS	2
#define NQUEUE		32		/* messages sent before any receive */
#define SLOT		2048		/* queued and race messages */
#define MSLOT		8192		/* matching, closing */
#define RACE_N		100		/* messages from each sender */
#define RACE_LEN	512
#define RACE_TAG	0x7ace
#define MULTI_SIZE	4608
#define MULTI_MIN	1024

#define CTX(n)		struct fi_context2 n[1]

unsigned next_seed(void);
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- buffers: registered once, in both domains --------------------------- */

enum { SH, SD, DH, DD, NBUF };	/* host/device source, destination */

struct buf {
	const char *name;
	bool dev;
	char *p;
	uint8_t *shadow;	/* what a destination must hold */
	struct t_mr mr[2];	/* in the main domain, in the SRX domain */
};

extern struct buf bufs[NBUF];
extern uint8_t *scratch, *msgbuf;	/* BUFSZ of host memory each */

struct mem {
	int src, dst;
	const char *name;
};

extern const struct mem mems[3];	/* D2D, H2D, D2H */

void put(int b, size_t off, const void *src, size_t n);
void get(void *dst, int b, size_t off, size_t n);
void poison(int b, size_t lo, size_t n);
void verify(int b, size_t lo, size_t n, const char *what);

/* Pieces laid out from off, GAP apart, in one buffer. */
struct region {
	int b, dom;
	size_t off, n;
	size_t len[MAXIOV];
};

size_t total(const struct region *r);
size_t extent(const struct region *r);
/* len bytes in n unequal pieces (each at least 1 byte if len >= 8). */
struct region region(int b, int dom, size_t off, size_t len, size_t n);
/* A message's bytes into a source region. */
void load(const struct region *r, const uint8_t *bytes);
/* Fresh poison in and around a receive region; what n bytes landed in it
 * make it hold; every byte of it and its guards checked. */
void poison_rx(const struct region *r);
void land(const struct region *r, const uint8_t *bytes, size_t n);
void verify_rx(const struct region *r, const char *what);

/* ---- endpoints ------------------------------------------------------------ */

struct ep {
	struct t_ep t;
	const char *name;
	bool selective;		/* bound FI_SELECTIVE_COMPLETION */
	bool from;		/* read with fi_cq_readfrom */
	/* t.cntr: FI_SEND, FI_RECV */
	uint64_t want[2][2];		/* [send, recv][successes, errors] */
};

enum { A, B, C, M, NEP };	/* c: selective; m: multi-receive */

struct fx {
	struct t_fabric f;
	struct ep ep[NEP];
	fi_addr_t addr[NEP][NEP];	/* [in whose AV][whose address] */
	uint64_t caps;
	bool sas, directed, source, multi;
	size_t inject, iov_limit;
	uint64_t data_mask, tx_flags, rx_flags;
	bool dbl;			/* the CUDA driver double */
};

extern struct fx fx;

int open_fabric(struct t_fabric *f, uint64_t caps, bool sas, bool shared);
bool supported(uint64_t caps, bool sas, bool shared);
void ep_open(struct ep *e, struct t_fabric *f, const char *name,
	     bool selective, struct fid_ep *srx, size_t min_multi);
void ep_close(struct ep *e);
/* Every counter of every open endpoint at what it must be. */
void counts(const char *what);

/* ---- operations --------------------------------------------------------- */

enum sop { SEND, SENDV, SENDMSG, SENDDATA, INJECT, INJECTDATA,
	   TSEND, TSENDV, TSENDMSG, TSENDDATA, TINJECT, TINJECTDATA, NSOP };
enum rop { RECV, RECVV, RECVMSG, TRECV, TRECVV, TRECVMSG, NROP };

extern const char *const sop_names[NSOP];
extern const char *const rop_names[NROP];

static inline bool s_tagged(enum sop s) { return s >= TSEND; }
static inline bool r_tagged(enum rop r) { return r >= TRECV; }
static inline bool s_inject(enum sop s)
{
	return s % 6 == INJECT || s % 6 == INJECTDATA;
}
static inline bool s_data(enum sop s)
{
	return s % 6 == SENDDATA || s % 6 == INJECTDATA;
}
static inline bool s_msg(enum sop s) { return s % 6 == SENDMSG; }
static inline bool r_msg(enum rop r) { return r % 3 == RECVMSG; }
size_t s_niov(enum sop s);
size_t r_niov(enum rop r);

struct tx {
	enum sop op;
	struct ep *from;
	fi_addr_t dest;
	struct region r;
	uint64_t tag, data, flags;	/* flags: the *msg calls' */
	void *ctx;
};

struct rx {
	enum rop op;
	struct fid_ep *ep;		/* an endpoint or an SRX */
	struct ep *cq_of;		/* for progress while retrying */
	fi_addr_t src;
	struct region r;
	uint64_t tag, ignore, flags;
	void *ctx;
};

/* Post, retrying while the provider asks to, for at most the wait. */
#define RETRY(cq, call, name) do {					\
		double end_ = t_now() + t_wait_s();				\
		ssize_t r_;						\
		while ((r_ = (call)) == -FI_EAGAIN && t_now() < end_)	\
			t_drive(cq);					\
		t_assert(!r_, "%s returned %zd (%s)", name, r_,		\
			 fi_strerror((int) -r_));			\
	} while (0)

void do_send(const struct tx *x);
void do_recv(const struct rx *x);

/* ---- completions -------------------------------------------------------- */

struct got {
	bool err;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry x;
	fi_addr_t src;
};

/* The next entry of ep's CQ: 0, or -FI_EAGAIN after seconds. */
int next(struct ep *ep, struct got *g, double seconds);

struct want {
	void *ctx;
	bool rx, tagged;
	uint64_t flags;			/* exact, for success entries */
	size_t len;			/* receives */
	uint64_t tag, data;
	fi_addr_t src;			/* FI_ADDR_UNSPEC: not checked */
	int err;
	size_t olen;
	void *buf;			/* NULL: not checked */
	bool hit;
};

struct want want_tx(void *ctx, bool tagged);
struct want want_rx(void *ctx, bool tagged, size_t len, uint64_t tag,
		    bool data, uint64_t value, fi_addr_t src);
/* Exactly these n entries on ep's CQ, in order if asked, then none. */
void expect(struct ep *ep, struct want *w, size_t n, bool ordered,
	    const char *what);
void quiet(struct ep *ep, const char *what);

/* ---- messages ------------------------------------------------------------ */

/* From one endpoint to another, as each knows the other. */
struct path {
	struct ep *from, *to;
	struct fid_ep *rx;		/* where receives go: to, or its SRX */
	fi_addr_t dest;			/* to, in from's AV */
	fi_addr_t src;			/* from, in to's AV (FI_ADDR_UNSPEC) */
	int dom;
};

struct path path(int from, int to);

struct mc {
	const struct path *p;
	enum sop s;
	enum rop r;
	int sb, db;			/* source, destination buffer */
	size_t len, rcap;		/* message, receive */
	bool send_first;
	bool data;			/* *msg: FI_REMOTE_CQ_DATA */
	uint64_t sflags, rflags;	/* *msg calls */
};

/* Send one message and receive it: bytes, entries, counters. */
void message(const struct mc *k, const char *what);

/* Slot i (MSLOT bytes) of the device destination and source. */
struct rx slot_rx(const struct path *p, enum rop op, int i, fi_addr_t src,
		  uint64_t tag, uint64_t ignore, void *ctx);
struct tx slot_tx(const struct path *p, enum sop op, int i, size_t len,
		  uint64_t tag, void *ctx, uint8_t *bytes);
/* x's message is in r: both entries, counters, bytes. */
void arrived(const struct path *p, const struct tx *x, const struct rx *r,
	     const uint8_t *bytes, const char *what);

/* ---- the cases ------------------------------------------------------------ */

void calls(void);		/* msg_calls.c */
void truncation(void);
void queued(bool tagged);
void matching(void);
void selective(void);
void unreported(void);
void nocontext(void);
void race(void);		/* msg_race.c */
int peer(int rfd, int wfd);
void multi(void);		/* msg_rx.c */
void srx(void);
void closing(void);

#endif
