/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Waiting for completions: the CQs whose progress the tests drive, and
 * t_wait and its kin, which read one entry within HMEMLOOP_TEST_WAIT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hmltest.h"

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

double t_wait_s(void)
{
	return t_env_num("HMEMLOOP_TEST_WAIT");
}

static struct fid_cq *driven[8];

void t_progress(struct fid_cq *cq)
{
	for (size_t i = 0; i < sizeof(driven) / sizeof(driven[0]); i++) {
		if (!driven[i] || driven[i] == cq) {
			driven[i] = cq;
			return;
		}
	}
	t_fail("too many CQs to drive");
}

void t_unprogress(struct fid_cq *cq)
{
	for (size_t i = 0; i < sizeof(driven) / sizeof(driven[0]); i++)
		if (driven[i] == cq)
			driven[i] = NULL;
}

void t_drive(struct fid_cq *cq)
{
	fi_cq_read(cq, NULL, 0);
	for (size_t i = 0; i < sizeof(driven) / sizeof(driven[0]); i++)
		if (driven[i] && driven[i] != cq)
			fi_cq_read(driven[i], NULL, 0);
}

static void drive(void)
{
	for (size_t i = 0; i < sizeof(driven) / sizeof(driven[0]); i++)
		if (driven[i])
			fi_cq_read(driven[i], NULL, 0);
}

/* Read one entry of cq, with its source where src is not NULL, within
 * seconds; trace what it read, or that nothing came. */
static int wait_for(struct fid_cq *cq, struct fi_cq_tagged_entry *ent,
		    struct fi_cq_err_entry *err, fi_addr_t *src,
		    double seconds)
{
	struct fi_cq_tagged_entry tmp;
	double end = t_now() + seconds;
	ssize_t ret;

	if (!ent)
		ent = &tmp;
	for (;;) {
		/* A CQ of a smaller format leaves the rest as it was. */
		memset(ent, 0, sizeof(*ent));
		ret = src ? fi_cq_readfrom(cq, ent, 1, src) :
			    fi_cq_read(cq, ent, 1);
		if (ret == 1) {
			t_trace_cqe(cq, ent, NULL, src);
			return 0;
		}
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry e = { 0 };

			t_assert(fi_cq_readerr(cq, &e, 0) == 1,
				 "fi_cq_readerr after -FI_EAVAIL returned no entry");
			t_trace_cqe(cq, NULL, &e, NULL);
			if (err)
				*err = e;
			return 1;
		}
		if (ret != -FI_EAGAIN)
			t_fail("fi_cq_read: %zd (%s)", ret, fi_strerror(-ret));
		drive();
		if (t_now() > end) {
			t_trace_none(cq);
			return -FI_EAGAIN;
		}
	}
}

int t_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *ent,
	   struct fi_cq_err_entry *err)
{
	return wait_for(cq, ent, err, NULL, t_wait_s());
}

int t_wait_from(struct fid_cq *cq, struct fi_cq_tagged_entry *ent,
		struct fi_cq_err_entry *err, fi_addr_t *src)
{
	return wait_for(cq, ent, err, src, t_wait_s());
}

bool t_quiet(struct fid_cq *cq, int ms)
{
	return wait_for(cq, NULL, NULL, NULL, ms / 1e3) == -FI_EAGAIN;
}

void t_expect(struct fid_cq *cq, void *ctx, uint64_t flags, size_t len)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &ent, &err);

	if (ret < 0)
		t_fail("no completion for context %p", ctx);
	if (ret > 0)
		t_fail("error completion for context %p: err %d (%s), "
		       "prov_errno %d", err.op_context, err.err,
		       fi_strerror(err.err), err.prov_errno);
	t_assert(ent.op_context == ctx, "completion for context %p, "
		 "expected %p", ent.op_context, ctx);
	t_assert((ent.flags & flags) == flags, "completion flags %#lx lack %#lx",
		 (unsigned long) ent.flags, (unsigned long) flags);
	t_assert(len == (size_t) -1 || ent.len == len,
		 "completion len %zu, expected %zu", ent.len, len);
}

int t_outcome_of(struct fid_cq *cq, void *ctx, int *err_out)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &ent, &err);

	if (ret < 0)
		return T_NO_CQE;
	if (ret > 0) {
		if (err_out)
			*err_out = err.err;
		printf("error completion: err %d (%s)\n", err.err,
		       fi_strerror(err.err < 0 ? -err.err : err.err));
		return T_ERR_CQE;
	}
	t_assert(ent.op_context == ctx, "completion for another context");
	return T_OK;
}
