/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * HMEMLOOP_STATS: what the library did, counted per thread without atomics
 * or locks (each thread's block is its own; the report at exit sums them)
 * and only where the setting asks for it: otherwise one load and a branch
 * that always goes the same way. Without HMEMLOOP_ENABLE=1 no wrapper runs,
 * and nothing is counted.
 */
#ifndef HML_STATS_H
#define HML_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fi_errno.h>

#include "hml_op.h"
#include "hml_route.h"

/* Source to destination: D device, H host. */
enum hml_stat_dir { HML_STAT_D2D, HML_STAT_H2D, HML_STAT_D2H, HML_STAT_H2H,
		    HML_STAT_DIRS };
enum hml_stat_err { HML_STAT_EINVAL, HML_STAT_EACCES, HML_STAT_EIO,
		    HML_STAT_ETRUNC, HML_STAT_EOPNOTSUPP, HML_STAT_EOTHER,
		    HML_STAT_ERRS };

struct hml_stats {
	uint64_t ops[HML_KINDS][HML_STAT_DIRS];	/* enum hml_kind */
	uint64_t bytes[HML_KINDS][HML_STAT_DIRS];
	uint64_t errors[HML_STAT_ERRS];
	uint64_t staged, taken_back, held;
	uint64_t passed[HML_REASONS];	/* the provider's, by reason */
	struct hml_stats *next;		/* the blocks of live threads */
};

extern bool hml_stats_on;
extern __thread struct hml_stats *hml_stats_mine;
struct hml_stats *hml_stats_thread(void);

/* The calling thread's block, made on its first count. */
static inline struct hml_stats *hml_stats(void)
{
	return hml_stats_mine ? hml_stats_mine : hml_stats_thread();
}

/* HML_STAT(staged): one counter up, where counting; an expression. */
#define HML_STAT(field) \
	(__builtin_expect(hml_stats_on, 0) ? (void) hml_stats()->field++ : \
					     (void) 0)

/* Each below: a predicted branch, and a call only where counting; macros,
 * so that the path they are on calls nothing more. */
void hml_stat_error_add(int err);
void hml_stat_done_add(enum hml_kind kind, const struct hml_side *src,
		       const struct hml_side *dst, size_t len);
void hml_stat_recv_add(bool tagged, const struct hml_side *src,
		       const struct hml_side *dst, size_t len, int err);

/* An operation the provider carries, counted under the router's reason
 * (enum hml_reason). */
#define hml_stat_pass(reason) HML_STAT(passed[reason])

/* A positive FI_E* the library reported in a completion or returned; 0
 * is none. */
#define hml_stat_error(err) do {					\
	int e_ = (err);							\
	if (__builtin_expect(hml_stats_on, 0) && e_)			\
		hml_stat_error_add(e_);					\
} while (0)

/* ret, a call's return: a refusal (negative, not -FI_EAGAIN) counted. */
#define hml_stat_ret(ret) ({						\
	ssize_t r_ = (ret);						\
	if (__builtin_expect(hml_stats_on, 0) && r_ < 0 &&		\
	    r_ != -FI_EAGAIN)						\
		hml_stat_error_add(-r_);				\
	r_; })

/* An operation done here, len bytes from src to dst. */
#define hml_stat_done(kind, src, dst, len) do {				\
	if (__builtin_expect(hml_stats_on, 0))				\
		hml_stat_done_add(kind, src, dst, len);			\
} while (0)

/* A message delivered to a receive (hml_rx_deliver): done, or an error
 * (err, positive); dst is read only when the copy was made. */
#define hml_stat_recv(tagged, src, dst, len, err) do {			\
	if (__builtin_expect(hml_stats_on, 0))				\
		hml_stat_recv_add(tagged, src, dst, len, err);		\
} while (0)

/* After the settings: count where HMEMLOOP_STATS asks for it. */
void hml_stats_start(void);

#endif
