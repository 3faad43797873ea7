/* hmemloop-bench mode 1: the methods, the buffers and the results. */
#ifndef HML_BENCH_DEV_H
#define HML_BENCH_DEV_H

#include "bench.h"

/* Four buffers of the largest size: the two ends of every direction. */
enum b_loc { DEV_A, DEV_B, HOST_A, HOST_B, NLOC };

struct b_dir {
	const char *name;		/* CSV */
	const char *title;		/* table */
	enum b_loc src, dst;
};

#define NDIRS 3
extern const struct b_dir b_dirs[NDIRS];

struct b_ctx {
	struct b_fab fab;
	struct b_ep a, b;
	fi_addr_t self;			/* a, in a's own AV */
	fi_addr_t peer;			/* b, in a's AV: fi_send's receiver */
	CUstream stream;		/* non-blocking, the bench's own */
	size_t len;
	void *buf[NLOC];
	struct fid_mr *mr[NLOC];
	void *desc[NLOC];
	uint64_t key[NLOC];
};

enum {
	M_CEIL_ASYNC, M_CEIL_SYNC, M_WRITE, M_READ, M_SEND, M_STAGING,
	NMETHODS
};

struct b_method {
	const char *name;
	bool hmemloop;			/* needs the wrapper */
	/* Untimed set-up of one operation (fi_send: post the receive). */
	int (*prep)(struct b_ctx *c, const struct b_dir *d, size_t len);
	/* One operation, until the completion a caller waits for. */
	int (*one)(struct b_ctx *c, const struct b_dir *d, size_t len);
	/* n operations with B_WINDOW outstanding, no new one posted after
	 * deadline: how many completed, or -1. */
	long (*rate)(struct b_ctx *c, const struct b_dir *d, size_t len,
		     long n, double deadline);
	const char *rate_how;		/* what the rate measures */
};

extern const struct b_method b_methods[NMETHODS];

/* bench_device.c */
int b_ctx_open(struct b_ctx *c, size_t len, char *why, size_t whylen);
void b_ctx_close(struct b_ctx *c);
/* One operation of method m on patterned bytes, checked: 0 or -1. */
int b_validate(struct b_ctx *c, int m, const struct b_dir *d, size_t len);

enum b_status { P_NONE, P_OK, P_SKIPPED, P_FAILED, P_UNAVAIL };

struct b_point {
	enum b_status status;
	struct b_stats lat;		/* seconds */
	bool capped;			/* --max-time cut the latency ops */
	long rate_ops;			/* 0: not measured */
	double rate_secs;
	char note[320];
};

#define B_MAX_SIZES 40

struct b_results {
	size_t sizes[B_MAX_SIZES];
	int nsizes;
	bool shim;			/* hmemloop methods were run */
	char why[NMETHODS][320];	/* unavailable: why */
	struct b_point p[NDIRS][NMETHODS][B_MAX_SIZES];
};

/* bench_report.c */
void b_report_header(const struct b_ctx *c, const struct b_results *r);
void b_report_tables(const struct b_results *r);
int b_report_csv(const struct b_results *r, const char *path);

#endif
