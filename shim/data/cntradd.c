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
}
