/* SPDX-License-Identifier: BSD-2-Clause */
/* Helpers shared by the test programs: set up a provider, endpoints,
 * registrations and device memory; wait for completions; run cases
 * (cases.c); report. */
#ifndef HMLTEST_H
#define HMLTEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define T_SKIP 77

/* libfabric 2.0 took container_of out of rdma/fabric.h. */
#define t_container_of(ptr, type, member) \
	((type *) ((char *) (ptr) - offsetof(type, member)))

/* The mr_mode values of API 1.0, which applications of that API still
 * pass and libfabric 2.x headers deprecate. */
#define T_MR_UNSPEC	0
#define T_MR_BASIC	(1 << 0)
#define T_MR_SCALABLE	(1 << 1)

extern const char *t_prov;

/* The core provider under t_prov: tcp for tcp;ofi_rxm, t_prov itself for
 * one that is not layered. A copy, the caller's to free. */
char *t_core_prov(void);

void t_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void t_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void t_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* In a function of (..., fmt, ...): "TAG: " and fmt of its arguments, a
 * line, flushed (t_ok, t_case_skip, notes). */
#define T_SAY(tag, fmt) do {						\
		va_list ap_;						\
									\
		printf("%s: ", tag);					\
		va_start(ap_, fmt);					\
		vprintf(fmt, ap_);					\
		va_end(ap_);						\
		printf("\n");						\
		fflush(stdout);						\
	} while (0)
#define t_assert(cond, ...) do { if (!(cond)) t_fail(__VA_ARGS__); } while (0)
#define t_fi(call) t_fi_check((call), #call, __LINE__)
long t_fi_check(long ret, const char *what, int line);

/*
 * What a test opens, all zero for the defaults (o may be NULL). The fields
 * up to msg_order are the hints of t_open and its kin; the rest say what
 * t_ep_open makes.
 */
struct t_opts {
	const char *prov;		/* default t_prov; t_core_prov's for
					 * its core */
	uint32_t version;		/* API version, default 1.17 */
	uint64_t caps;			/* default FI_MSG|FI_TAGGED|FI_RMA */
	uint64_t mr_mode;		/* default: what the tests can handle
					 * (before API 1.5, FI_MR_BASIC) */
	uint64_t mode;
	enum fi_ep_type type;		/* default FI_EP_RDM */
	bool shared_rx;			/* rx_ctx_cnt FI_SHARED_CONTEXT */
	enum fi_cq_format cq_format;	/* default FI_CQ_FORMAT_TAGGED */
	size_t cq_size;			/* default: the provider's */
	uint64_t tx_op_flags;
	enum fi_threading threading;	/* default FI_THREAD_SAFE */
	enum fi_progress progress;	/* data progress, default the provider's */
	uint64_t msg_order;		/* transmit and receive, default none */
	/* The endpoint t_ep_open makes: bound and enabled, unless open_only
	 * (then t_ep_enable does it); its CQ and AV the caller's where given
	 * (t_ep_close leaves them open), else its own, an EQ instead of the
	 * AV for a connected one (FI_EP_MSG); */
	bool open_only;
	struct fid_cq *cq;
	struct fid_av *av;
	/* its own CQ, */
	enum fi_wait_obj cq_wait;	/* default FI_WAIT_NONE */
	enum fi_cq_wait_cond cq_cond;
	struct fid_wait *wait_set;	/* with cq_wait FI_WAIT_SET */
	void *cq_context;
	uint64_t cq_bind;		/* default FI_TRANSMIT | FI_RECV */
	uint64_t cq_flags;		/* more CQ bind flags: FI_SELECTIVE_COMPLETION */
	/* its counters: one of the caller's, bound with cntr_flags, and one
	 * of its own (e->cntr[i], FI_WAIT_NONE) for each nonzero own_cntr[i],
	 * bound with those flags; */
	struct fid_cntr *cntr;
	uint64_t cntr_flags;
	uint64_t own_cntr[2];
	/* a shared receive context, FI_OPT_MIN_MULTI_RECV where nonzero. */
	struct fid_ep *srx;
	size_t min_multi;
};

struct t_fabric {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

struct t_ep {
	struct t_fabric *f;
	struct fid_ep *ep;
	struct fid_cq *cq;		/* transmit and receive */
	struct fid_av *av;
	struct fid_eq *eq;		/* FI_EP_MSG, instead of av */
	struct fid_cntr *cntr[2];	/* t_opts.own_cntr's, closed with it */
	enum fi_cq_format format;	/* cq's */
	bool shared_cq, shared_av;	/* the caller's (t_opts.cq, .av) */
	char name[256];			/* none for FI_EP_MSG */
	size_t namelen;
};

struct t_mr {
	struct fid_mr *mr;
	void *desc;
	uint64_t key;
	void *base;
};

/* ---- the fixture (fixture.c) ---- */

/* o's hints, the caller's to free: for what asks libfabric itself. */
struct fi_info *t_hints(const struct t_opts *o);
/* Whether fi_getinfo has an answer for o's hints. */
bool t_offers(const struct t_opts *o);
/* A fabric and domain of o's hints; without any, the test skips. */
void t_open(struct t_fabric *f, const struct t_opts *o);
/* As t_open, but -FI_ENODATA (nothing fits the hints) is returned, not a
 * skip. */
int t_try_open(struct t_fabric *f, const struct t_opts *o);
void t_close(struct t_fabric *f);
/* An endpoint with what o asks for (see struct t_opts), enabled, its name
 * read and its CQ driven (t_progress). */
void t_ep_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o);
/* As t_ep_open, but a CQ, bind or fi_enable the provider refuses is
 * returned (-FI_E*, nothing left open), not a failure; *what names the
 * call where what is not NULL. */
int t_ep_try_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o,
		  const char **what);
/* For an endpoint opened with open_only: bind what o asks for, enable it,
 * read its name; as t_ep_try_open, -FI_E* and *what where refused (close
 * it then with t_ep_close). */
int t_ep_enable(struct t_ep *e, const struct t_opts *o, const char **what);
void t_ep_close(struct t_ep *e);
fi_addr_t t_insert(struct t_ep *e, const void *name);
void t_reg(struct t_fabric *f, void *buf, size_t len, uint64_t access,
	   uint64_t key, struct t_mr *m);
/* The address an initiator names for byte off of a region. */
uint64_t t_raddr(const struct t_fabric *f, const struct t_mr *m, size_t off);
/* A counter of completions with this wait object, in the wait set set
 * where given, its context ctx; -FI_E* where the provider has none such. */
int t_cntr_try_open(struct t_fabric *f, enum fi_wait_obj wait,
		    struct fid_wait *set, void *ctx, struct fid_cntr **c);
struct fid_cntr *t_cntr_open(struct t_fabric *f, enum fi_wait_obj wait);
/* A shared receive context (t_opts.srx) of f's domain; -FI_E* where the
 * provider has none. */
int t_srx_try_open(struct t_fabric *f, struct fid_ep **srx);

/* ---- the case runner (cases.c) ---- */

/* What a case needs; without it the case is skipped, saying so. */
#define T_NEED_DOUBLE	(1 << 0)	/* the CUDA driver double */
#define T_NEED_SHIM	(1 << 1)	/* HMEMLOOP_ENABLE=1 */

/* What check is told of a fresh case that limit_s ended. */
#define T_TIMED_OUT	(-1)

struct t_case {
	const char *name;
	void (*run)(void);
	unsigned need;
	int arg;			/* what t_arg() tells run */
	/* A case in a process of its own: this program again with its
	 * arguments and "-c NAME", with env (NAME=VALUE) set and
	 * HMEMLOOP_TEST_WAIT at most wait_s where given; killed after
	 * limit_s where given (check is told T_TIMED_OUT), else after
	 * 3 * HMEMLOOP_TEST_WAIT + 30 s (a failure). check judges its wait
	 * status; without, it must exit 0. */
	bool fresh;
	const char *env[2];
	double wait_s, limit_s;
	void (*check)(const struct t_case *c, int status);
};

/* A case that runs here and needs nothing. */
#define T_CASE(n, fn)	{ .name = (n), .run = (fn) }
/* A case in a process of its own, with what it needs and its settings. */
#define T_FRESH(n, fn, needs, ...) \
	{ .name = (n), .run = (fn), .need = (needs), .fresh = true, \
	  .env = { __VA_ARGS__ } }

/* A program: its cases, what it needs before them, its own options. */
#define T_CUDA		(1 << 0)	/* device 0's primary context current
					 * (t_cuda_init), unless -H */
#define T_HOST		(1 << 1)	/* -H: host memory (t_host), the
					 * provider alone the oracle; without,
					 * -H skips it */
#define T_TRACE		(1 << 2)	/* traces on (t_trace_on): kind diff */

struct t_prog {
	const struct t_case *cases, *more;	/* -l lists both */
	size_t n, nmore;
	unsigned flags;
	const char *opts;		/* its own options, getopt letters */
	void (*opt)(int c, const char *arg);
	void (*setup)(void);		/* before the cases */
	void (*run)(void);		/* instead of running both in order */
	void (*teardown)(void);		/* after them */
};

/*
 * Every program's main, T_MAIN(cases, more fields of struct t_prog):
 * "-p PROVIDER" (default tcp;ofi_rxm), "-c NAME,..." only those cases (a
 * name that matches none fails), -H on host memory, -l the cases' names,
 * and the program's own options; then the cases, each saying how long it
 * took, between setup and teardown.
 */
int t_main(int argc, char **argv, const struct t_prog *p);
/* For a program with a main of its own (tests/doubles/efa/efa_test.c: its
 * provider efa unless -p says another): the options as t_main reads
 * them, opts left for the program to read again from optind 1 on. */
void t_init(int argc, char **argv, const char *opts);
#define T_MAIN(table, ...)						\
	static const struct t_prog t_prog_ = {				\
		.cases = (table),					\
		.n = sizeof(table) / sizeof((table)[0]),		\
		__VA_ARGS__						\
	};								\
	int main(int argc, char **argv)					\
	{								\
		return t_main(argc, argv, &t_prog_);			\
	}								\
	struct t_prog	/* the caller's ';' ends this */
/* The second table's fields of struct t_prog. */
#define T_MORE(t)	.more = (t), .nmore = sizeof(t) / sizeof((t)[0])

/* -c NAME,...: the cases to run (all where NULL). */
extern const char *t_only;
bool t_wanted(const char *name);
/* Run the cases wanted, in order, saying how long each took: what a
 * program's run does for each of its sweep's settings. */
void t_run_cases(const struct t_case *cases, size_t n);
#define T_RUN_CASES(cases) \
	t_run_cases((cases), sizeof(cases) / sizeof((cases)[0]))
/* The running case's arg, and its name (NULL between cases). */
int t_arg(void);
const char *t_case_name(void);
/* True in the process a fresh case runs in. */
bool t_fresh(void);
/* "skip: " and the reason, counted; the case returns after it. */
void t_case_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int t_skips(void);
/* The CUDA driver double, not a GPU's driver (after cuInit). */
bool t_cuda_double(void);
bool t_shim_enabled(void);

/* A test setting (tests/env.c, the one list of them): its value, or its
 * default (NULL where none) where unset or empty; a name not in the list
 * fails. */
const char *t_env(const char *name);
/* Its value as a number; 0 where unset without a default. */
double t_env_num(const char *name);

/* Monotonic seconds; how long a test waits for what must come (seconds,
 * HMEMLOOP_TEST_WAIT, default 10). */
double t_now(void);
double t_wait_s(void);

/* Wait for the next completion: 0 and *ent, 1 and *err for an error
 * entry, -FI_EAGAIN after HMEMLOOP_TEST_WAIT seconds (default 10). Each
 * of the helpers below traces what it read (t_trace_on). */
int t_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *ent,
	   struct fi_cq_err_entry *err);
/* As t_wait, with fi_cq_readfrom: a success entry's source in *src. */
int t_wait_from(struct fid_cq *cq, struct fi_cq_tagged_entry *ent,
		struct fi_cq_err_entry *err, fi_addr_t *src);
/* Also drive this CQ's progress while waiting on others (t_ep_open does
 * it for each endpoint's CQ: providers with manual progress need the
 * target's CQ read for data to land). */
void t_progress(struct fid_cq *cq);
void t_unprogress(struct fid_cq *cq);
void t_drive(struct fid_cq *cq);
/* True if no completion arrives within ms milliseconds. */
bool t_quiet(struct fid_cq *cq, int ms);
/* Wait for a success entry with this context, failing on anything else. */
void t_expect(struct fid_cq *cq, void *ctx, uint64_t flags, size_t len);
/* Post, retrying while the provider says -FI_EAGAIN, driving progress. */
#define t_post(cq, call) ({ ssize_t r_;					\
		while ((r_ = (call)) == -FI_EAGAIN)			\
			t_drive(cq);					\
		t_fi_check(r_, #call, __LINE__); })

/* CUDA: device 0's primary context, current on the calling thread. */
void t_cuda_init(void);
/* A new context of dev, current: cuCtxCreate of the toolkit at hand. */
CUresult t_ctx_create(CUcontext *ctx, CUdevice dev);
void *t_dev_alloc(size_t n);
void t_dev_free(void *p);
void t_dev_put(void *dev, const void *host, size_t n);
void t_dev_get(void *host, const void *dev, size_t n);
/* Test buffers: device memory, or host memory where t_host is set (the
 * tests' -H, to compare with the provider alone). */
extern bool t_host;
void *t_mem_alloc(size_t n);
void t_mem_free(void *p);
void t_mem_put(void *p, const void *bytes, size_t n);
void t_mem_get(void *bytes, const void *p, size_t n);
#define t_cu(call) t_cu_check((call), #call, __LINE__)
void t_cu_check(CUresult r, const char *what, int line);

/* Where the error entry of each API version ends. */
#define T_ERR_END_1_0	offsetof(struct fi_cq_err_entry, err_data_size)
#define T_ERR_END_1_5	(T_ERR_END_1_0 + sizeof(size_t))
#define T_ERR_END_1_20	(T_ERR_END_1_5 + sizeof(fi_addr_t))
/* Fail unless fi_cq_readerr left every byte of raw (size bytes, 0xa5 before
 * the call) beyond end, where its API version's entry ends. */
void t_err_within(const void *raw, size_t size, size_t end, const char *what);

/* How a device operation ended: what the tests that show the bug without
 * hmemloop report (the values are child exit statuses). */
enum t_outcome {
	T_OK = 0,		/* right bytes, right completions */
	T_ERR_CQE = 10,		/* an error completion */
	T_NO_CQE = 11,		/* no completion in time */
	T_BAD_BYTES = 12,	/* completed, wrong bytes */
	T_POST_ERR = 13,	/* the post itself failed */
	T_CRASH = 100,		/* killed by a signal */
};

const char *t_outcome_name(int o);
/* Wait for the completion of ctx on cq: T_OK, T_ERR_CQE (printed, its err
 * in *err_out if not NULL) or T_NO_CQE. */
int t_outcome_of(struct fid_cq *cq, void *ctx, int *err_out);

/* ---- traces (trace.c): what the harness's kind diff compares ----
 *
 * With tracing on, a program prints a "trace: " line for each event it
 * observes: each CQ entry t_wait, t_wait_from, t_expect and t_quiet read
 * (or "none"), each return t_fi and t_post check (the last, after
 * -FI_EAGAIN), and what it traces itself. The lines must be the same in
 * two runs that behave the same, so pointers are shown by the names given
 * them: contexts, CQs and counters with t_name, arrays of contexts with
 * t_name_array (NAME[I]), buffers with t_name_buf (NAME+OFFSET). An
 * endpoint t_ep_open makes names its CQ "epN" and its own counters
 * "epN.cntrI", N counting the endpoints opened. What is named during a
 * case is forgotten when it ends; an unnamed pointer shows as "unnamed".
 * Tracing is for a program whose threads do not read CQs while it is on.
 */
void t_trace_on(bool on);
/* No lines between t_trace_pause(true) and (false), which nest: a part of
 * a case whose events are not the same in each run (a case's end ends its
 * pauses). */
void t_trace_pause(bool pause);
/* Whether lines go out now. */
bool t_tracing(void);
void t_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Only p's address is kept: the object need not be set yet. */
void t_name(const void *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), access(none, 1)));
void t_name_array(const void *base, size_t n, size_t size, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));
void t_name_buf(const void *base, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void t_unname(const void *p);
/* "what = ret (error)"; returns ret. */
long t_trace_ret(const char *what, long ret);
/* A CQ entry (ent, or an error err), its source where src is given. */
void t_trace_cqe(struct fid_cq *cq, const struct fi_cq_tagged_entry *ent,
		 const struct fi_cq_err_entry *err, const fi_addr_t *src);
void t_trace_none(struct fid_cq *cq);
/* A counter's value and error count. */
void t_trace_cntr(struct fid_cntr *c);
/* The CRC of n bytes at p, in a named buffer (device memory read back). */
void t_trace_bytes(const void *p, size_t n);
/* A case the provider alone cannot be the oracle of (it crashes, or has no
 * bound to compare with): traces why, in every run alike; then true on
 * host memory, where the case should return, and on device memory false,
 * the case running on, its assertions checked, untraced until it ends. */
bool t_no_oracle(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For the fixture: t_ep_open's names, and a case's start and end (cases.c). */
void t_name_ep(struct t_ep *e);
void t_trace_case(const char *name);
void t_trace_case_end(void);

/* Byte patterns: fill with a seed, or check every byte against one. */
void t_fill(void *buf, size_t n, unsigned seed);
bool t_check(const void *buf, size_t n, unsigned seed);
uint32_t t_crc(const void *buf, size_t n);

/* fork, with two pipes between parent and child: in each, *rd reads what
 * the other writes to its *wr. fork's value; stdout flushed before. */
pid_t t_fork_peer(int *rd, int *wr);

#endif
