/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The router's decision (shim/route/route.c): one row for each reason an
 * operation is the provider's, hmemloop's or refused, from what is known
 * of it; a failure names the rule broken.
 */
#include <rdma/fi_errno.h>

#include "hml_route.h"
#include "unit.h"

/* An RMA operation of no bytes to an endpoint of this process, judged,
 * host memory, no inject, inject_size 4096: the rows change from it. */
#define BASE .local = true, .judged = true, .inject_size = 4096

static const struct row {
	const char *rule;
	struct hml_facts f;
	enum hml_route route;
	enum hml_reason reason;
} rows[] = {
	{ "another process's endpoint is the provider's",
	  { .local = false }, HML_PROVIDER, HML_WHY_REMOTE },
	{ "an endpoint that forbade CUDA calls is the provider's, "
	  "classified or not",
	  { .local = true, .forbidden = true }, HML_PROVIDER,
	  HML_WHY_FORBIDDEN },
	{ "a message to a receive queue hmemloop does not record is the "
	  "provider's",
	  { .local = true, .msg = true, .untracked = true }, HML_PROVIDER,
	  HML_WHY_UNTRACKED },
	{ "more buffers than hmemloop takes: the provider answers",
	  { .local = true, .many = true }, HML_PROVIDER, HML_WHY_MANY },
	{ "nothing decided before the buffers are classified",
	  { .local = true }, HML_JUDGE, HML_WHY_PAIR },
	{ "lengths past 2^64 are refused at the call",
	  { BASE, .err = -FI_EINVAL }, HML_REFUSE, HML_WHY_INVALID },
	{ "a host inject over inject_size is the provider's to refuse",
	  { BASE, .inject = true, .len = 8192 }, HML_PROVIDER,
	  HML_WHY_OVERSIZE },
	{ "a device inject over inject_size is refused here",
	  { BASE, .inject = true, .len = 8192, .device = true }, HML_REFUSE,
	  HML_WHY_DEVICE_INJECT },
	{ "a host message where the provider may hold the match is the "
	  "provider's",
	  { BASE, .msg = true, .early = true }, HML_PROVIDER, HML_WHY_EARLY },
	{ "a device message there that fits an inject goes as a host copy",
	  { BASE, .msg = true, .early = true, .device = true }, HML_BOUNCE,
	  HML_WHY_EARLY },
	{ "a larger device message there waits here for a later receive",
	  { BASE, .msg = true, .early = true, .device = true,
	    .len = 8192 }, HML_HERE, HML_WHY_EARLY },
	{ "device memory between endpoints of this process is hmemloop's",
	  { BASE, .device = true }, HML_HERE, HML_WHY_DEVICE },
	{ "host memory between endpoints of this process is hmemloop's too: "
	  "one engine per pair",
	  { BASE }, HML_HERE, HML_WHY_PAIR },
	{ "a host message between endpoints of this process is hmemloop's",
	  { BASE, .msg = true }, HML_HERE, HML_WHY_PAIR },
	{ "a classification error is reported by the operation, here",
	  { BASE, .err = -FI_EIO }, HML_HERE, HML_WHY_PAIR },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct hml_way w = hml_route(&rows[i].f);

		u_check(w.route == rows[i].route && w.reason == rows[i].reason,
			"%s: route %d (%s), expected %d (%s)", rows[i].rule,
			w.route, hml_reason_name(w.reason), rows[i].route,
			hml_reason_name(rows[i].reason));
	}
	return u_done("route: every reason's row");
}
