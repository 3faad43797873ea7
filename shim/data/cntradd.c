/* SPDX-License-Identifier: BSD-2-Clause */
/* What the shim adds to a counter for an operation it completed: apart
 * from cntr.c, whose reads progress the operations that add. */
#include "hml.h"

/* libfabric 2.x counters can count bytes; the value is part of the ABI. */
#define HML_CNTR_EVENTS_BYTES 1

void hml_cntr_bump(struct hml_cntr *c, size_t bytes, bool err)
{
	if (!c)
		return;
	if (err)
		fi_cntr_adderr(c->cntr, 1);
	else
		fi_cntr_add(c->cntr, c->events == HML_CNTR_EVENTS_BYTES ?
				     bytes : 1);
	__atomic_add_fetch(&c->bumps, 1, __ATOMIC_RELEASE);
}

/* May someone sleep on the counter without reading it: its wait object is
 * in the application's hands (FI_GETWAIT) or in a wait set? Then what it
 * counts is counted at post (inflight.c), as a CQ's entries are. */
bool hml_cntr_watched(const struct hml_cntr *c)
{
	return c && (c->wait_obj == FI_WAIT_SET ||
		     __atomic_load_n(&c->exported, __ATOMIC_SEQ_CST));
}
