/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-bench: declarations shared by its source files.
 *
 *   bench.c         options, timing and statistics, main
 *   bench_cuda.c    the CUDA driver, opened with dlopen
 *   bench_fabric.c  provider, endpoints, registrations, CQ waits
 *   bench_device.c  mode 1 and --cross: the methods, buffers and modes
 *   bench_run.c     mode 1 and --cross: the fork probe and the loops
 *   bench_report.c  mode 1 and --cross: text tables and CSV
 *   bench_async.c   mode 1 and --cross: the hmemloop rates under
 *                   HMEMLOOP_ASYNC=0 and =1, in two worker processes
 *   bench_mixed.c   --mixed: one thread per endpoint, in the workers
 *   bench_child.c   a child process of the bench on a control socket
 *   bench_pass.c    mode 2: pass-through cost between two processes
 *   bench_peers*.c  --peers: device memory between two processes
 *                   (bench_peers.h: what its files share)
 */
#ifndef HML_BENCH_H
#define HML_BENCH_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

/* Operations in flight for the message-rate figures: mode 1's default
 * (--window), and always --passthrough's and --peers'. */
#define B_WINDOW 64
#define B_MAX_WINDOW 4096
/* No completion for this long is a failure, not a slow point. */
#define B_STALL_S 30.0

struct b_opts {
	const char *prov;		/* mode 1: one provider */
	const char *provs[8];		/* mode 2: -p may repeat */
	int nprovs;
	size_t min_size, max_size;
	long iters;			/* mode 1: latency ops; mode 2: round trips */
	double max_time;		/* seconds one measured point may take */
	const char *csv;
	bool quick;
	bool no_shim;
	bool passthrough;
	bool cross;			/* mode 1 between GPU 0 and GPU 1 */
	bool staging_sync;		/* staging copies with cuMemcpy */
	bool hmem;			/* ask for FI_HMEM, register CUDA */
	int runs;
	const char *lib;
	size_t msg_size;		/* mode 2 */
	bool own_address;		/* mode 2: each endpoint's own name in
					 * its AV, as MPI puts it there */
	const char *child_role;		/* mode 2, internal */
	bool peers;			/* --peers */
	const char *peers_child;	/* --peers, internal: B's provider */
	bool host;			/* --peers: host buffers */
	bool mr_hmem;			/* FI_MR_HMEM in the hints */
	int window;			/* mode 1: rate's outstanding ops */
	bool mixed;			/* mode 1: --mixed */
	int worker;			/* internal: a rate worker's
					 * HMEMLOOP_ASYNC, or -1 */
};

/* bench_util.c */
extern struct b_opts b_opt;

void b_die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));
double b_now(void);
/* libhmemloop is in this process. */
bool b_shim_loaded(void);
/* Reads hmemloop's settings as the library does, at the start of main;
 * their bad values are said where the library is not in the process. */
void b_settings_load(void);
/* A setting of hmemloop's (include/hml_config.h), as the library reads it:
 * its value, and in *env whether the environment gave it. */
const char *b_setting(const char *name, bool *env);
struct b_stats {
	size_t n;
	double median, p99, min, max;
};
/* Sorts v. */
void b_stats(double *v, size_t n, struct b_stats *s);
const char *b_size_str(size_t n, char *buf, size_t len);

/* bench_cuda.c: the driver calls the bench makes, resolved with
 * cuGetProcAddress_v2 against the 12.0 API. */
struct b_cu {
	CUresult (*init)(unsigned int flags);
	CUresult (*error_name)(CUresult r, const char **name);
	CUresult (*driver_version)(int *version);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*device_name)(char *name, int len, CUdevice dev);
	CUresult (*device_count)(int *count);
	CUresult (*can_access_peer)(int *can, CUdevice dev, CUdevice peer);
	CUresult (*primary_retain)(CUcontext *ctx, CUdevice dev);
	CUresult (*ctx_set_current)(CUcontext ctx);
	CUresult (*ctx_sync)(void);
	CUresult (*ctx_enable_peer)(CUcontext peer, unsigned int flags);
	CUresult (*mem_alloc)(CUdeviceptr *p, size_t n);
	CUresult (*mem_free)(CUdeviceptr p);
	CUresult (*host_alloc)(void **p, size_t n, unsigned int flags);
	CUresult (*host_free)(void *p);
	CUresult (*memset_d8)(CUdeviceptr p, unsigned char v, size_t n);
	CUresult (*memcpy)(CUdeviceptr dst, CUdeviceptr src, size_t n);
	CUresult (*memcpy_async)(CUdeviceptr dst, CUdeviceptr src, size_t n,
				 CUstream stream);
	CUresult (*memcpy_peer_async)(CUdeviceptr dst, CUcontext dst_ctx,
				      CUdeviceptr src, CUcontext src_ctx,
				      size_t n, CUstream stream);
	CUresult (*stream_create)(CUstream *stream, unsigned int flags);
	CUresult (*stream_destroy)(CUstream stream);
	CUresult (*stream_sync)(CUstream stream);
	CUresult (*ipc_get)(CUipcMemHandle *h, CUdeviceptr p);
	CUresult (*ipc_open)(CUdeviceptr *p, CUipcMemHandle h,
			     unsigned int flags);
	CUresult (*ipc_close)(CUdeviceptr p);
};

extern struct b_cu cu;
/* Open the driver and make device 0's primary context current; on
 * failure returns -1 with the reason in why. */
int b_cuda_open(char *why, size_t len);
/* Devices the process sees: 0 where cuInit found none, -1 before. */
int b_cuda_count(void);
/* Device ordinal's name (devices 0 and 1) and primary context. */
const char *b_cuda_device(int ordinal);
int b_cuda_context(int ordinal, CUcontext *ctx);
int b_cuda_version(void);
/* 0, or an "error: CALL: NAME" string in b_errmsg and -1. */
int b_cu_ok(CUresult r, const char *call);

/* bench_fabric.c */
struct b_fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

struct b_ep {
	struct fid_ep *ep;
	struct fid_cq *tx, *rx;
	struct fid_av *av;
	char name[256];
	size_t namelen;
};

/* Per thread: --mixed's threads each have one. */
extern __thread char b_errmsg[256];

/* -FI_ENODATA when the provider is not here. */
int b_fab_open(struct b_fab *f, const char *prov);
void b_fab_close(struct b_fab *f);
void b_ep_open(struct b_ep *e, struct b_fab *f);
void b_ep_close(struct b_ep *e);
fi_addr_t b_av_insert(struct b_ep *e, const void *name);
/* gpu: the CUDA device of buf, or -1 for host memory. */
struct fid_mr *b_mr_reg(struct b_fab *f, void *buf, size_t len, uint64_t key,
			int gpu);
void b_mr_close(struct fid_mr *mr);
/* The address an initiator names for the start of a registered buffer. */
uint64_t b_raddr(const struct b_fab *f, const void *buf);
/* Read n completions from cq, driving the process's other CQs while
 * waiting (unless alone: cq only, as an application waiting for its
 * operation reads it): 0, or -1 with the reason in b_errmsg. */
int b_cq_wait_for(struct fid_cq *cq, long n, bool alone);
int b_cq_wait(struct fid_cq *cq, long n);
/* Read what completions there are, up to max, without waiting: the
 * count, or -1 with the reason in b_errmsg. */
long b_cq_poll(struct fid_cq *cq, long max);
/* Drive progress on every CQ the process opened. */
void b_progress(void);
/* Seconds without progress after which a wait or a post fails. */
extern double b_stall_s;
/* A stall guard for polling loops: call with what the last poll got;
 * drives progress on every CQ while nothing comes (unless alone: a
 * thread that must touch only its own, or a wait for hmemloop's
 * operations), true once b_stall_s passed. */
struct b_stall {
	unsigned spins;
	double end;
	bool alone;
};
bool b_stalled(struct b_stall *s, long got);
/* ret = call, retried while the provider says -FI_EAGAIN, driving
 * progress; -FI_ETIMEDOUT once that has gone on for b_stall_s. */
#define B_POST(ret, call) do {						\
		struct b_stall s_ = { 0, 0, false };			\
		while (((ret) = (call)) == -FI_EAGAIN &&		\
		       !b_stalled(&s_, 0))				\
			;						\
		if ((ret) == -FI_EAGAIN)				\
			(ret) = -FI_ETIMEDOUT;				\
	} while (0)
/* Put what before the reason in b_errmsg. */
void b_prefix(const char *what);
/* 0 for 0; else -1 with "WHAT: why" in b_errmsg. */
int b_post_failed(ssize_t ret, const char *what);

/* bench_child.c: this program started again as a child, on a socket
 * that is its stdin and stdout, one line a command or answer. setting
 * ("NAME=VALUE" or NULL) goes into its environment. argv[0] is filled
 * in; the child dies with this process. The child's PID, and its end of
 * the socket in *fd. */
pid_t b_spawn(char **argv, const char *setting, int *fd);
/* How a child ended, for a note; with stop, one still running after
 * 100 ms is ended, by its PID. */
const char *b_ended(pid_t pid, bool stop);
int b_say(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* One line by the deadline: 0, or -1 on EOF or timeout. */
int b_hear(int fd, char *line, size_t len, double deadline);
/* A command, formatted into cmd, and its answer within timeout seconds
 * into line: 0, or -1 on EOF or timeout. */
int b_vask(int fd, char *line, size_t len, double timeout, char *cmd,
	   size_t cmdlen, const char *fmt, va_list ap);

/* bench_device.c / bench_run.c / bench_report.c: mode 1 and --cross */
int b_device_main(void);
/* bench_async.c: a rate worker's side */
int b_worker_main(void);
/* bench_pass.c: mode 2 */
int b_pass_main(char **argv);
int b_pass_child(void);
/* bench_peers.c: --peers */
int b_peers_main(void);
int b_peers_child(void);

#endif
