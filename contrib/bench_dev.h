/* SPDX-License-Identifier: BSD-2-Clause */
/* hmemloop-bench mode 1 and --cross: the methods, the buffers, the
 * results, and the mode that says which of them a run has. */
#ifndef HML_BENCH_DEV_H
#define HML_BENCH_DEV_H

#include "bench.h"

/* Buffers of the largest size: the two ends of every direction. Mode 1
 * has all four, on GPU 0 and the host; --cross has DEV_A on GPU 0 and
 * DEV_B on GPU 1. */
enum b_loc { DEV_A, DEV_B, HOST_A, HOST_B, NLOC };

struct b_dir {
	const char *name;		/* CSV */
	const char *title;		/* table */
	enum b_loc src, dst;
};

#define B_MAX_DIRS 3
/* The largest size at which a method's bytes are checked before it is
 * timed (in the parent, and in each rate worker). */
#define B_CHECK_LEN (1 << 20)

/* Where a rate loop posts: an endpoint, its own address, the operations
 * it keeps outstanding, and contexts of its own, more than are ever
 * outstanding, so that none is reused while in use (hmemloop takes a
 * posted receive back by its context; FI_CONTEXT providers need one). */
struct b_lane {
	struct b_ep *e;
	fi_addr_t self;
	int window;
	bool alone;			/* only its CQs: --mixed's threads,
					 * and hmemloop's methods */
	struct fi_context *ctx;
	unsigned nctx, next;
	unsigned first;			/* its slots: first to first + window */
};

struct b_ctx {
	struct b_fab fab;
	struct b_lane lane;		/* a's, --window outstanding */
	struct b_ep a, b;
	fi_addr_t self;			/* a, in a's own AV */
	fi_addr_t peer;			/* b, in a's AV: fi_send's receiver */
	/* Per GPU: its primary context, [0] current between points, and a
	 * non-blocking stream of the bench's own in it. */
	CUcontext cuctx[2];
	CUstream stream[2];
	int gpu[NLOC];			/* the GPU a device buffer is on */
	char p2p[640];			/* --cross: how peer access went */
	size_t len;
	void *buf[NLOC];
	struct fid_mr *mr[NLOC];
	void *desc[NLOC];
	uint64_t key[NLOC];
};

/* The slots of a mode's method table. */
enum {
	M_CEIL_A, M_CEIL_B,		/* the ceiling's variants; A wins ties */
	M_WRITE, M_READ, M_SEND, M_STAGING,
	NMETHODS,
	M_CEIL_ASYNC = M_CEIL_A, M_CEIL_SYNC = M_CEIL_B,	/* mode 1 */
	M_CEIL_PEER = M_CEIL_A, M_CEIL_UVA = M_CEIL_B,	/* --cross */
};

struct b_method {
	const char *name;
	bool hmemloop;			/* needs the wrapper */
	/* Untimed set-up of one operation (fi_send: post the receive). */
	int (*prep)(struct b_ctx *c, const struct b_dir *d, size_t len);
	/* One operation, until the completion a caller waits for. */
	int (*one)(struct b_ctx *c, const struct b_dir *d, size_t len);
	/* n operations with --window outstanding, no new one posted after
	 * deadline: how many completed, or -1. */
	long (*rate)(struct b_ctx *c, const struct b_dir *d, size_t len,
		     long n, double deadline);
	const char *rate_how;		/* what the rate measures, N the
					 * window */
};

/* What a run measures, and the words its header has for it. */
struct b_mode {
	const char *title;
	int gpus;			/* devices it needs */
	const struct b_dir *dirs;
	int ndirs;
	/* NMETHODS slots; one without a name is not in this mode. */
	const struct b_method *methods;
	const char *buffers, *ceiling;
	const char *no_shim;		/* what --no-shim times */
	int (*alloc)(struct b_ctx *c, size_t len);
};

extern const struct b_mode b_mode_same, b_mode_cross;
/* The run's mode, chosen before anything else. */
extern const struct b_mode *b_mode;

static inline bool b_has(int m)
{
	return b_mode->methods[m].name != NULL;
}

/* bench_device.c */
int b_ctx_open(struct b_ctx *c, size_t len, char *why, size_t whylen);
void b_ctx_close(struct b_ctx *c);
/* Make GPU 0's context current again, after a method switched: hmemloop
 * then always starts from the same one. */
int b_ctx_home(struct b_ctx *c);
/* One operation of method m on patterned bytes, checked: 0 or -1. */
int b_validate(struct b_ctx *c, int m, const struct b_dir *d, size_t len);
/* The operations a rate with window w measures: --iters, in whole
 * windows, at least two. */
long b_rate_ops(long w);
/* The rate of method m: b_rate_ops(--window) operations after a warm-up
 * window, capped by --max-time: 0, or -1 with the reason in b_errmsg. */
int b_rate(struct b_ctx *c, int m, const struct b_dir *d, size_t len,
	   long *ops, double *secs);

/* A lane on endpoint e, with window outstanding; the contexts are freed
 * with free(l->ctx). */
void b_lane_init(struct b_lane *l, struct b_ep *e, fi_addr_t self,
		 int window);
/* fi_write's or fi_read's rate loop on a lane: the method's rate, for
 * --mixed's threads. */
long b_rma_rate(struct b_ctx *c, struct b_lane *l, const struct b_dir *d,
		size_t len, long n, double deadline, bool read);

enum b_status { P_NONE, P_OK, P_SKIPPED, P_FAILED, P_UNAVAIL };

struct b_point {
	enum b_status status;
	struct b_stats lat;		/* seconds */
	bool capped;			/* --max-time cut the latency ops */
	long rate_ops;			/* 0: not measured */
	double rate_secs;
	/* The hmemloop methods' rates under HMEMLOOP_ASYNC=0 and =1, from
	 * the workers; rate_* is the one the environment's setting picks. */
	long async_ops[2];
	double async_secs[2];
	char note[320];
};

#define B_MAX_SIZES 40
/* A point's latency operations come in this many turns of each method:
 * a GPU's clocks, or the host's, change within a run. */
#define B_LAT_TURNS 10
/* --mixed: fi_write D2D, endpoints each with its thread and window. */
#define B_MIX_THREADS 4
#define B_MIX_WINDOW 16

/* A --mixed point under one HMEMLOOP_ASYNC setting. */
struct b_mix {
	enum b_status status;
	long ops;			/* all threads */
	double secs;			/* the first start to the last end */
	double tmin, tmax;		/* a thread's ops/s: least, most */
	char note[200];
};

struct b_results {
	size_t sizes[B_MAX_SIZES];
	int nsizes;
	bool shim;			/* hmemloop methods were run */
	char why[NMETHODS][320];	/* unavailable: why */
	struct b_point p[B_MAX_DIRS][NMETHODS][B_MAX_SIZES];
	bool workers;			/* the HMEMLOOP_ASYNC workers ran */
	/* Their sends: that found a held receive, that took one back from
	 * the provider (HMEMLOOP_STATS); -1 where unknown. */
	long long held, taken_back;
	struct b_mix mix[2][B_MAX_SIZES];	/* --mixed, by HMEMLOOP_ASYNC */
};

/* A method this run leaves out: one that needs hmemloop, without it,
 * unless the provider copies device memory itself (--hmem). */
static inline bool b_left_out(const struct b_results *r, int m)
{
	return b_mode->methods[m].hmemloop && !r->shim && !b_opt.hmem;
}

/* bench_async.c: the parent's side of the workers, HMEMLOOP_ASYNC=0 and
 * =1. Start them where the run has hmemloop methods (r->workers). */
void b_workers_start(struct b_results *r);
/* Method m's rate at point (d, s) under both settings, into p. */
void b_workers_rate(struct b_results *r, int d, int m, int s);
/* --mixed at every size under both settings (it needs the workers). */
void b_workers_mixed(struct b_results *r);
/* End them; their HMEMLOOP_STATS counts into r. */
void b_workers_stop(struct b_results *r);
/* Which worker's rate the plain rate columns show: the environment's
 * HMEMLOOP_ASYNC's (hmemloop's default is 1). */
int b_env_async(void);

/* bench_mixed.c, in a worker: the --mixed point of size len: 0, or -1
 * with the reason in b_errmsg. */
int b_mixed(struct b_ctx *c, size_t len, struct b_mix *x);
void b_mixed_close(void);

/* bench_report.c */
void b_report_header(const struct b_ctx *c, const struct b_results *r);
void b_report_tables(const struct b_results *r);
int b_report_csv(const struct b_results *r, const char *path);

#endif
