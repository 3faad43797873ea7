/* Counters. */
#include <stdlib.h>

#include "hml.h"
#include "hml_log.h"

static void release(struct hml_fid *h)
{
	free(container_of(h, struct hml_cntr, h));
}

void hml_cntr_wrap(struct hml_domain *d, struct fid_cntr *cntr,
		   const struct fi_cntr_attr *attr)
{
	struct hml_cntr *c = calloc(1, sizeof(*c));

	(void) d;
	if (!c) {
		hml_warn("out of memory: counter %p passes through", cntr);
		return;
	}
	c->cntr = cntr;
	c->events = attr ? attr->events : FI_CNTR_EVENTS_COMP;
	hml_fid_wrap(&c->h, &cntr->fid, release);
}
