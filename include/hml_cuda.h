/* SPDX-License-Identifier: BSD-2-Clause */
/* The CUDA driver: opened on first need, never linked. */
#ifndef HML_CUDA_H
#define HML_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* cudaproc.c: look each of syms up into table (at its offset) through
 * lib's cuGetProcAddress_v2, at the 12.0 API; NULL, or the name of the
 * first that is missing. Shared with hmemloop --check. */
struct hml_cuda_sym {
	const char *name;
	size_t offset;
};
#define HML_CUDA_SYM(table, name, field) { name, offsetof(__typeof__(table), field) }
const char *hml_cuda_procs(void *lib, void *table,
			   const struct hml_cuda_sym *syms, size_t n);
/* One call at the API version given, or NULL. */
void *hml_cuda_proc(void *lib, const char *name, int version);

/* cuda.c and copy.c: the driver's calls the data path makes */
enum hml_memtype {
	HML_MEM_UNKNOWN,		/* not asked yet */
	HML_MEM_HOST,
	HML_MEM_DEVICE,
};

/* Where a buffer lives. */
struct hml_mem {
	int type;			/* enum hml_memtype */
	int dev;			/* device ordinal: where device memory
					 * is, pinned memory's context's */
	CUcontext ctx;			/* its context, NULL for VMM memory */
	CUdeviceptr start, end;		/* the allocation, as the driver
					 * knows it (device memory, and
					 * host memory it pinned) */
	unsigned access;		/* CU_POINTER_ATTRIBUTE_ACCESS_FLAGS */
};

/* Classify a buffer, asking the driver. Memory of a process where the
 * driver cannot be opened is host memory. -FI_EIO if the driver fails. */
int hml_cuda_classify(const void *ptr, struct hml_mem *m);

/*
 * One copy, in as many pieces as the caller has: begin makes a context of
 * the device current (the caller's is restored at end or post), each
 * piece is queued on this thread's stream for that context, and end waits
 * for all of them. Errors are -FI_EIO, logged once per kind.
 */
struct hml_stream;

struct hml_copy {
	bool pushed;			/* begin made a context current */
	bool batch;			/* pieces may wait in the stream's batch */
	const struct hml_mem *where;	/* the device whose context copies */
	struct hml_stream *s;
	int err;
};

/*
 * A copy posted and not waited for: whether it has landed is asked of its
 * stream, whose order also covers every copy queued on it before. Held
 * until put.
 */
struct hml_ticket {
	struct hml_stream *s;		/* NULL: nothing to wait for */
	uint64_t seq;
};

/* Device memory in the context of where, for messages that wait. */
int hml_cuda_alloc(const struct hml_mem *where, size_t n, void **ptr);
void hml_cuda_free(const struct hml_mem *where, void *ptr);

/* later: the copy is posted, and completes when a read finds it landed. */
int hml_copy_begin(struct hml_copy *c, const struct hml_mem *where,
		   bool later);
void hml_copy_piece(struct hml_copy *c, void *dst, const struct hml_mem *dm,
		    const void *src, const struct hml_mem *sm, size_t n);
int hml_copy_end(struct hml_copy *c);
/* End without waiting; on an error, wait as end does and leave t empty. */
int hml_copy_post(struct hml_copy *c, struct hml_ticket *t);
/* 1: landed; 0: not yet; -FI_EIO. */
int hml_ticket_poll(struct hml_ticket *t);
int hml_ticket_wait(struct hml_ticket *t);
/* Wait, and put: the copy is over. */
int hml_ticket_land(struct hml_ticket *t);
void hml_ticket_put(struct hml_ticket *t);

#endif
