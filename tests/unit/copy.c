/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Batches of copies (shim/data/copy.c), on the CUDA driver the harness
 * gives (the double, which runs a batch's copies last to first): copies
 * posted while their stream is busy go to cuMemcpyBatchAsync together,
 * but never one with a copy that touches what one before it in the batch
 * writes, or that writes what one before it reads; a full batch goes out;
 * a batch the driver refuses goes copy by copy, a copy that fails then is
 * its own operation's error, and batches stop only where every copy alone
 * succeeded. The driver's copy calls are traced, and what lands compared
 * with the copies made one by one in posting order. A failure names the
 * rule broken.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml_config.h"
#include "hml_cuda.h"
#include "hml_cudadrv.h"
#include "hml_stream.h"
#include "unit.h"

#define N 64			/* bytes a slot */
#define SLOTS 24
#define S(i) ((i) * N)		/* where slot i starts */
#define MAXC (HML_BATCH + 2)

_Static_assert(HML_BATCH == 16, "the full batch's row says b16");

struct cp {
	int dst, src, len;	/* offsets in the device buffer */
};

static const struct row {
	const char *rule;
	int n;
	struct cp cp[4];
	int many;		/* or: as many copies, each to a slot of its
				 * own, from slot 1 */
	bool refuse;		/* the driver refuses batches */
	int fail;		/* 1 + the copy whose cuMemcpyAsync fails */
	const char *trace;	/* the driver's copy calls, the first copy's
				 * first: a (async), bK (batch of K), BK
				 * (refused), A (failed) */
	bool batching;		/* batches go on after */
} rows[] = {
	{ "copies posted behind one in flight go in one batch",
	  3, { { S(1), S(2), N }, { S(3), S(4), N }, { S(5), S(6), N } },
	  .trace = "a b3", .batching = true },
	{ "copies that read the same place go in one batch",
	  2, { { S(1), S(5), N }, { S(2), S(5), N } },
	  .trace = "a b2", .batching = true },
	{ "a copy next to one in the batch, touching none of its bytes, "
	  "goes with it", 2, { { S(2), S(1), N }, { S(3), S(2) + N, N } },
	  .trace = "a b2", .batching = true },
	{ "a copy that reads what one in the batch writes goes after it",
	  3, { { S(1), S(2), N }, { S(3), S(4), N }, { S(5), S(1), N } },
	  .trace = "a b2 a", .batching = true },
	{ "a copy that writes what one in the batch reads goes after it",
	  3, { { S(1), S(2), N }, { S(3), S(4), N }, { S(2), S(5), N } },
	  .trace = "a b2 a", .batching = true },
	{ "a copy that writes what one in the batch writes goes after it",
	  3, { { S(1), S(2), N }, { S(3), S(4), N }, { S(1), S(5), N } },
	  .trace = "a b2 a", .batching = true },
	{ "one byte in common is enough",
	  2, { { S(1), S(2), N }, { S(3), S(1) + N - 1, 1 } },
	  .trace = "a a a", .batching = true },
	{ "a full batch goes out, and the next copy starts another",
	  .many = HML_BATCH + 1, .trace = "a b16 a", .batching = true },
	{ "a refused batch goes copy by copy; all of them succeeding, "
	  "batches stop", 3, { { S(1), S(2), N }, { S(3), S(4), N },
			       { S(5), S(6), N } },
	  .refuse = true, .trace = "a B3 a a a", .batching = false },
	{ "a copy that fails in a refused batch fails its own operation "
	  "alone, and batches go on", 3,
	  { { S(1), S(2), N }, { S(3), S(4), N }, { S(5), S(6), N } },
	  .refuse = true, .fail = 2, .trace = "a B3 a A a",
	  .batching = true },
};

static char *dev;		/* SLOTS slots of device memory */
static struct hml_mem dm;
static const struct hml_mem hm = { .type = HML_MEM_HOST };

/* The driver's copy calls, traced while a row runs. */
static struct drv {
	bool on, refuse;
	CUdeviceptr fail;	/* the destination whose copy fails */
	char trace[128];
} drv;
static struct hml_cudrv real;

/* A call on the trace: what, and the number of copies of a batch. */
static void traced(const char *what, size_t batch)
{
	size_t len = strlen(drv.trace);
	char *at = drv.trace + len;

	if (!drv.on)
		return;
	if (batch)
		snprintf(at, sizeof(drv.trace) - len, "%s%s%zu",
			 len ? " " : "", what, batch);
	else
		snprintf(at, sizeof(drv.trace) - len, "%s%s", len ? " " : "",
			 what);
}

static CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t n,
			     CUstream stream)
{
	if (drv.on && dst == drv.fail) {
		traced("A", 0);
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	traced("a", 0);
	return real.memcpy_async(dst, src, n, stream);
}

static CUresult memcpy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs,
			     size_t *sizes, size_t count,
			     CUmemcpyAttributes *attrs, size_t *attr_idxs,
			     size_t nattrs, CUstream stream)
{
	if (drv.refuse) {
		traced("B", count);
		return CUDA_ERROR_INVALID_VALUE;
	}
	traced("b", count);
	return real.memcpy_batch(dsts, srcs, sizes, count, attrs, attr_idxs,
				 nattrs, stream);
}

/* A copy of n bytes made and waited for: no batch, not traced. */
static int copy_now(void *dst, const struct hml_mem *d, const void *src,
		    const struct hml_mem *s, size_t n)
{
	struct hml_copy c;
	int err = hml_copy_begin(&c, &dm, false);

	if (err)
		return err;
	hml_copy_piece(&c, dst, d, src, s, n);
	return hml_copy_end(&c);
}

/* One operation's copy, posted: it may wait in a batch. */
static int post(const struct cp *p, struct hml_ticket *t)
{
	struct hml_copy c;

	hml_copy_begin(&c, &dm, true);
	hml_copy_piece(&c, dev + p->dst, &dm, dev + p->src, &dm, p->len);
	return hml_copy_post(&c, t);
}

static void run(const struct row *w)
{
	static char want[SLOTS * N], got[SLOTS * N];
	struct cp cp[MAXC] = { { S(SLOTS - 1), S(SLOTS - 2), N } };
	struct hml_ticket t[MAXC];
	int n = 1 + (w->many ? w->many : w->n), err;

	for (int i = 1; i < n; i++)
		cp[i] = w->many ? (struct cp) { S(1 + i), S(1), N } :
				  w->cp[i - 1];
	for (int i = 0; i < SLOTS * N; i++)
		want[i] = i * 7 + i / N;
	u_check(!copy_now(dev, &dm, want, &hm, sizeof(want)),
		"%s: the device memory not written", w->rule);

	drv = (struct drv) { .on = true, .refuse = w->refuse };
	if (w->fail)
		drv.fail = (CUdeviceptr) (uintptr_t) (dev + cp[w->fail].dst);
	hml_cuda_batching = true;
	/* The first goes at once, the stream idle; the others wait behind
	 * it. */
	for (int i = 0; i < n; i++)
		u_check(!post(&cp[i], &t[i]), "%s: copy %d not posted",
			w->rule, i);
	for (int i = 0; i < n; i++) {
		err = hml_ticket_land(&t[i]);
		u_check(err == (w->fail && i == w->fail ? -FI_EIO : 0),
			"%s: copy %d ends with %d", w->rule, i, err);
		if (!w->fail || i != w->fail)
			memmove(want + cp[i].dst, want + cp[i].src, cp[i].len);
	}
	drv.on = false;
	u_check(!strcmp(drv.trace, w->trace), "%s: the driver was called "
		"\"%s\", expected \"%s\"", w->rule, drv.trace, w->trace);
	u_check(hml_cuda_batching == w->batching, "%s: batches %s", w->rule,
		hml_cuda_batching ? "go on" : "stopped");
	u_check(!copy_now(got, &hm, dev, &dm, sizeof(got)) &&
		!memcmp(got, want, sizeof(got)), "%s: what landed is not the "
		"copies made in posting order", w->rule);
}

int main(void)
{
	struct hml_mem where = { .type = HML_MEM_DEVICE };
	void *p = NULL;

	/* The copy engines' batches, not hmemloop's kernel. */
	setenv("HMEMLOOP_KERNEL", "0", 1);
	setenv("HMEMLOOP_BATCH", "1", 1);
	hml_config_load();
	/* The driver is opened at the first look at a pointer. */
	hml_cuda_classify(&where, &dm);
	if (!hml_cu.mem_alloc || hml_cuda_alloc(&where, SLOTS * N, &p) ||
	    hml_cuda_classify(p, &dm) || dm.type != HML_MEM_DEVICE) {
		printf("skip: no CUDA driver that allocates device memory\n");
		return 77;
	}
	if (!hml_cu.memcpy_batch) {
		printf("skip: the CUDA driver has no cuMemcpyBatchAsync\n");
		return 77;
	}
	dev = p;
	real = hml_cu;
	hml_cu.memcpy_async = memcpy_async;
	hml_cu.memcpy_batch = memcpy_batch;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(&rows[i]);
	hml_cu = real;
	hml_cuda_free(&dm, dev);
	return u_done("copy: what goes in a batch, and a refused one");
}
