/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The decision (hml_route.h): whose an operation is, and why, from what is
 * known of it. Nothing else decides; tests/unit/route.c holds a row for
 * each reason, and report/stats.c names them.
 */
#include <rdma/fi_errno.h>

#include "hml_route.h"

#define WAY(r, why) ((struct hml_way) { (r), (why) })

struct hml_way hml_route(const struct hml_facts *f)
{
	if (!f->local)
		return WAY(HML_PROVIDER, HML_WHY_REMOTE);
	/* No CUDA call may be made for it, not even to classify. */
	if (f->forbidden)
		return WAY(HML_PROVIDER, HML_WHY_FORBIDDEN);
	/* hmemloop cannot see the receives it would match. */
	if (f->msg && f->untracked)
		return WAY(HML_PROVIDER, HML_WHY_UNTRACKED);
	/* No provider takes as many (iov_limit): it answers. */
	if (f->many)
		return WAY(HML_PROVIDER, HML_WHY_MANY);
	if (!f->judged)
		return WAY(HML_JUDGE, HML_WHY_PAIR);
	/* Lengths that add up past 2^64. */
	if (f->err == -FI_EINVAL)
		return WAY(HML_REFUSE, HML_WHY_INVALID);
	/* The provider refuses a host one by its size; a device one it must
	 * not see. */
	if (f->inject && f->len > f->inject_size)
		return f->device ? WAY(HML_REFUSE, HML_WHY_DEVICE_INJECT) :
				   WAY(HML_PROVIDER, HML_WHY_OVERSIZE);
	/* The provider is the receive queue's matcher: a device payload
	 * goes to it as a host copy where that fits an inject; a larger one
	 * waits here for a receive posted later (README, Limits). */
	if (f->msg && f->early) {
		if (!f->device)
			return WAY(HML_PROVIDER, HML_WHY_EARLY);
		if (f->len <= f->inject_size)
			return WAY(HML_BOUNCE, HML_WHY_EARLY);
		return WAY(HML_HERE, HML_WHY_EARLY);
	}
	return WAY(HML_HERE, f->device ? HML_WHY_DEVICE : HML_WHY_PAIR);
}
