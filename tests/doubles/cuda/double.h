/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUDA driver double: a libcuda.so.1 for machines without a GPU.
 *
 * Device memory lives in one memfd.  Applications get addresses in a
 * PROT_NONE mapping of it, so the host cannot touch device memory; the
 * double moves bytes through a second, read-write mapping.  Copies and
 * memsets are queued on streams and performed when the application
 * synchronises, the way a GPU finishes them late.
 *
 * Private declarations shared by the double's source files.
 */
#ifndef CUDA_DOUBLE_H
#define CUDA_DOUBLE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

/*
 * Take the driver's own view of cuda.h: every exported name (_v2, _ptds,
 * _ptsz and the old unversioned ones) then has a prototype, and the
 * compiler checks each definition against the toolkit's declaration.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Only the cu* entry points leave the library. */
#define API __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

#define DRIVER_VERSION	13000
#define MAX_DEVICES	16
#define CTX_STACK_MAX	256
#define CTX_COST	(300ULL << 20)	/* device memory a context takes */
#define DEFAULT_MEM	(80ULL << 30)	/* memory of each device */
#define GRANULE		(2ULL << 20)	/* VMM granularity */
#define KEY_DEV		(1ULL << 63)	/* keys of device memory: memfd offsets */

#define CTX_MAGIC	0x43747821u
#define STREAM_MAGIC	0x53747221u
#define EVENT_MAGIC	0x45766e21u
#define HANDLE_MAGIC	0x486e6421u

/* What a queued operation does. */
enum op_kind {
	OP_COPY,
	OP_SET,
	OP_WAIT,	/* wait for another stream's work up to a point */
	OP_MARK,	/* an event record: nothing to do */
};

struct op {
	struct op *next;
	uint64_t seq;		/* global order of queueing */
	enum op_kind kind;
	bool from_sync;		/* queued by a "synchronous" call */
	char *dst;
	const char *src;
	size_t len;		/* bytes */
	void *snap;		/* staged copy of a pageable source */
	uint32_t val;		/* OP_SET pattern */
	int width;		/* OP_SET element size */
	struct CUstream_st *wait;
	uint64_t wait_seq;
	uint64_t key[2][2];	/* [dst, src][lo, hi): memory it touches */
};

/* Handles are never freed, so a stale handle is reported, not followed. */
struct CUstream_st {
	uint32_t magic;
	bool dead;
	bool legacy;		/* the context's legacy default stream */
	bool per_thread;	/* a thread's per-thread default stream */
	bool polled;		/* NOT_READY already reported for its work */
	bool busy;		/* on dbl.busy: has queued work */
	unsigned flags;
	int prio;
	uint64_t gen;		/* ctx->gen when created */
	struct CUctx_st *ctx;
	pthread_t owner;
	struct op *head, *tail;
	uint64_t joined;	/* last legacy op this stream waits for */
	uint64_t legacy_joined;	/* last op of ours the legacy stream waits for */
	struct CUstream_st *next;	/* ctx->streams */
	struct CUstream_st *busy_next, *busy_prev;
};

struct CUctx_st {
	uint32_t magic;
	bool dead;		/* destroyed, or an inactive primary context */
	bool primary;
	int dev;
	unsigned flags;
	uint64_t gen;		/* bumped when it dies: its streams go stale */
	unsigned long long id;	/* cuCtxGetId: new each time it comes to life */
	struct CUstream_st legacy;
	struct CUstream_st *streams;
	struct CUctx_st **peers;
	size_t npeers;
	struct CUctx_st *next;	/* dbl.ctxs */
};

struct CUevent_st {
	uint32_t magic;
	bool dead;
	bool recorded;
	bool polled;
	unsigned flags;
	uint64_t gen;
	struct CUctx_st *ctx;
	struct CUstream_st *stream;	/* where it was last recorded */
	uint64_t seq;
	struct timespec when;
};

/* Sorted, non-overlapping extents of [base, base + size). */
struct extent {
	uint64_t off, len;
};

struct extents {
	uint64_t base, size;
	struct extent *v;
	size_t n, cap;
};

enum region_kind {
	R_DEVICE,	/* cuMemAlloc */
	R_MANAGED,	/* cuMemAllocManaged */
	R_PINNED,	/* cuMemAllocHost, cuMemHostAlloc */
	R_REGISTERED,	/* cuMemHostRegister */
	R_VMM,		/* cuMemMap */
	R_IPC,		/* cuIpcOpenMemHandle: another process's cuMemAlloc */
};

struct vmm_handle {
	uint32_t magic;
	bool released;
	int dev;
	uint64_t phys, size;
	unsigned maps;
	uint64_t id;
	unsigned types;		/* requestedHandleTypes */
	struct vmm_handle *next;
};

struct resv {
	uintptr_t va;
	size_t size;
	struct resv *next;
};

/* An address range the double knows about. */
struct region {
	enum region_kind kind;
	uintptr_t va;
	size_t size;		/* what the application asked for */
	size_t span;		/* what it occupies */
	uint64_t phys;		/* memfd offset, device kinds */
	int dev;
	struct CUctx_st *ctx;	/* owner; NULL for VMM mappings */
	struct vmm_handle *h;
	struct ipc_map *ipc;	/* R_IPC: whose memory, how often opened */
	char *alias;		/* R_IPC: where the double reaches its bytes */
	struct resv *resv;
	uint64_t id;		/* CU_POINTER_ATTRIBUTE_BUFFER_ID */
	unsigned flags;		/* host alloc or register flags */
	bool sync_memops;
	unsigned char access[MAX_DEVICES];	/* VMM: CUmemAccess_flags */
};

/* How memory behaves in a copy. */
enum mem {
	MEM_HOST,	/* pageable */
	MEM_PINNED,
	MEM_DEVICE,
	MEM_MANAGED,
};

struct device {
	uint64_t total, used;
	struct extents phys;
	struct CUctx_st *primary;
	unsigned primary_refs;
};

struct dbl {
	pthread_mutex_t lock;
	int ndev;
	struct device dev[MAX_DEVICES];
	size_t page;
	uint64_t span;		/* memfd bytes per device */
	int memfd;
	char *view;		/* device addresses: PROT_NONE */
	char *alias;		/* the same pages, read-write, for the double */
	char *vmm;		/* cuMemAddressReserve space: PROT_NONE */
	uint64_t vmm_size;
	struct extents vmm_va;
	struct region **regs;	/* sorted by va */
	size_t nregs, cap;
	struct resv *resvs;
	struct vmm_handle *handles;
	struct CUctx_st *ctxs;
	struct CUstream_st *busy;
	uint64_t seq;
	uint64_t ids;
	unsigned long long ctx_ids;
	bool trace;
	uint64_t fail_copy, fail_sync, fail_query;
	bool fail_copy_on, fail_sync_on, fail_query_on;	/* "N+": N and later */
	uint64_t copies, syncs, queries;
};

extern struct dbl dbl;

/* double.c */
bool ready(void);
void lock(void);
void unlock(void);
CUresult traced(const char *fn, CUresult r);
/*
 * The exported entry points: each runs call and traces its result under
 * its own name.  ENTRY_V2 makes name and name_v2, which the driver keeps
 * alike.  ENTRY_PT makes name, on the legacy default stream, and name##pt
 * (_ptsz or _ptds), on the calling thread's: call reads which in ptds.
 */
#define ENTRY(name, params, call)					\
	API CUresult name params					\
	{								\
		return traced(__func__, call);				\
	}
#define ENTRY_V2(name, params, call)					\
	ENTRY(name, params, call)					\
	ENTRY(name##_v2, params, call)
#define ENTRY_PT(name, pt, params, call)				\
	API CUresult name params					\
	{								\
		const bool ptds = false;				\
		return traced(__func__, call);				\
	}								\
	API CUresult name##pt params					\
	{								\
		const bool ptds = true;					\
		return traced(__func__, call);				\
	}
bool dev_ok(CUdevice dev);
/* The first checks of a call, in the driver's order: initialized, then
 * arguments (invalid if bad); dev_check then the device. */
CUresult arg_check(bool invalid);
CUresult dev_check(bool invalid, CUdevice dev);
/* arg_check(), then the lock, which is held when it returns CUDA_SUCCESS. */
CUresult enter(bool invalid);
uint64_t round_up(uint64_t x, uint64_t a);
void ext_init(struct extents *e, uint64_t base, uint64_t size);
int ext_alloc(struct extents *e, uint64_t len, uint64_t align, uint64_t hint,
	      uint64_t *out);
void ext_free(struct extents *e, uint64_t off);
int driver_version(void);
bool copy_fails(void);
/* double_copy.c: the copies of a batch or of a kernel launch */
CUresult copies_async(const CUdeviceptr *dsts, const CUdeviceptr *srcs,
		      const size_t *sizes, size_t count, CUstream h,
		      bool kernel);
bool sync_fails(void);
bool query_fails(void);

/* double_ctx.c */
struct CUctx_st *ctx_top(void);
CUresult ctx_current(struct CUctx_st **ctx);
/* enter(), then the current context: the lock is held, and *ctx set, only
 * when it returns CUDA_SUCCESS. */
CUresult enter_ctx(bool invalid, struct CUctx_st **ctx);
bool ctx_live(struct CUctx_st *c);
CUresult ctx_init_primary(int dev);

/* double_stream.c */
void stream_init(struct CUstream_st *s, struct CUctx_st *c, unsigned flags);
CUresult stream_get(CUstream h, bool ptds, struct CUstream_st **out);
CUresult join(struct CUstream_st *s);
void push(struct CUstream_st *s, struct op *op);
CUresult enqueue(struct CUstream_st *s, struct op *op);
void stream_run(struct CUstream_st *s, uint64_t upto);
CUresult stream_drain(struct CUstream_st *s);
void ctx_drain(struct CUctx_st *c);
CUresult ctx_sync(struct CUctx_st *c);
void flush_keys(uint64_t lo, uint64_t hi, bool sync_only);
void free_ops(struct op *op);

/* double_mem.c */
ssize_t region_index(uintptr_t addr);
struct region *region_find(uintptr_t addr);
bool region_overlaps(uintptr_t addr, size_t len);
struct region *region_new(enum region_kind kind, uintptr_t va, size_t size);
void region_del(struct region *r);
bool on_device(const struct region *r);
bool in_gpu_space(uintptr_t a);
CUresult phys_get(int dev, uint64_t size, uint64_t align, uint64_t *phys);
void phys_put(int dev, uint64_t phys, uint64_t span);
CUresult mem_range(uintptr_t addr, size_t len, bool write, enum mem *kind,
		   bool *sync_memops);
size_t mem_piece(uintptr_t addr, size_t len, char **p, uint64_t *key);
void mem_drop_ctx(struct CUctx_st *c);
void region_flush(struct region *r, bool sync_only);

/* double_vmm.c */
struct resv *resv_find(uintptr_t addr);

/* double_ipc.c */
void ipc_unmap(struct region *r);

/* double_proc.c */
const char *error_name(CUresult r);

#pragma GCC visibility pop

#endif
