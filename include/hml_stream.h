/* SPDX-License-Identifier: BSD-2-Clause */
/* A thread's copy streams (data/stream.c), and what copy.c keeps on each:
 * its batch, its marks, its failures. */
#ifndef HML_STREAM_H
#define HML_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hml_cudadrv.h"
#include "hml_kernel.h"

#define HML_MARKS 8
#define HML_BATCH HML_KERNEL_BATCH

struct hml_fail {
	struct hml_fail *next;
	uint64_t seq;
	int err;
};

struct hml_stream {
	CUstream stream;
	CUcontext ctx;
	unsigned long long id;
	int refs;			/* atomic */
	uint64_t posted;		/* atomic: copies queued, by number */
	uint64_t done;			/* atomic: those known to have landed */
	CUevent ev[HML_MARKS];		/* made by the thread, as needed */
	uint64_t mark[HML_MARKS];		/* atomic: the copy ev follows, or 0 */
	pthread_mutex_t lock;		/* the batch, the marks, the failures */
	uint64_t sent;			/* atomic: copies wholly queued */
	int nb;				/* atomic: copies in the batch */
	int nk;				/* those the kernel may make */
	int nh;				/* of those, to or from the host */
	CUdeviceptr dst[HML_BATCH], src[HML_BATCH];
	size_t len[HML_BATCH];
	uint64_t seq[HML_BATCH];		/* whose pieces they are */
	struct hml_fail *fails;		/* copies failed, until asked */
	int nfails;			/* atomic */
	uint64_t lost;			/* atomic: copies to this one failed
					 * where no memory was left to tell
					 * which */
};

/* This thread's stream in the current context ctx, whose ID is id. */
CUresult hml_stream_for(CUcontext ctx, unsigned long long id,
			struct hml_stream **stream);
/* A hold on s given back: the last destroys it. */
void hml_stream_put(struct hml_stream *s);
/* Is the stream's context what it was? Its stream is not, otherwise. */
bool hml_stream_live(const struct hml_stream *s);

#endif
