/* SPDX-License-Identifier: BSD-2-Clause */
/* What the unit tests share: a check that reports each failure and counts
 * it, and the exit status that follows (1 where any check failed). */
#ifndef UNIT_H
#define UNIT_H

#include <stdio.h>

static int u_failed;

#define u_check(cond, ...) do {						\
	if (!(cond)) {							\
		printf("FAIL: %s:%d: ", __FILE__, __LINE__);		\
		printf(__VA_ARGS__);					\
		printf("\n");						\
		u_failed++;						\
	}								\
} while (0)

static inline int u_done(const char *what)
{
	if (!u_failed)
		printf("ok: %s\n", what);
	return u_failed != 0;
}

#endif
