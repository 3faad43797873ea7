/* SPDX-License-Identifier: BSD-2-Clause */
/* Counters: the shim adds to them what the provider would have. */
#include <stdlib.h>

#include "hml.h"
#include "hml_log.h"

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

static void release(struct hml_fid *h)
{
	free(hml_container_of(h, struct hml_cntr, h));
}

void hml_cntr_wrap(struct fid_cntr *cntr, const struct fi_cntr_attr *attr)
{
	struct hml_cntr *c = calloc(1, sizeof(*c));

	if (!c) {
		hml_warn("out of memory: counter %p passes through", cntr);
		return;
	}
	c->cntr = cntr;
	c->events = attr ? attr->events : FI_CNTR_EVENTS_COMP;
	hml_fid_wrap(&c->h, &cntr->fid, release);
}
