/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Counters: the shim adds to them what the provider would have
 * (cntradd.c). Reading one, or waiting on it, first completes the shim's
 * operations whose copies have landed (inflight.c); with none in flight,
 * a read costs one load more than the provider's.
 */
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"

/* The counter, before its provider is called: the receives its domain
 * holds go to the provider first (hold.c). */
static struct hml_cntr *cntr_of(struct fid_cntr *cntr)
{
	struct hml_cntr *c = hml_container_of(cntr->ops, struct hml_cntr,
					      ops.ops);

	hml_hold_flush(c->domain);
	return c;
}

/* Someone may sleep on the counter without a call (delta 1), or no
 * longer (-1): what it counts is counted at post, and its domain holds
 * no receive meanwhile. */
static void watched(struct hml_cntr *c, int delta)
{
	hml_inflight_watch(delta);
	hml_hold_off(c->domain, delta);
}

static uint64_t hml_cntr_read(struct fid_cntr *cntr)
{
	struct hml_cntr *c = cntr_of(cntr);

	if (hml_inflight_any())
		hml_inflight_progress();
	return c->prov->read(cntr);
}

static uint64_t hml_cntr_readerr(struct fid_cntr *cntr)
{
	struct hml_cntr *c = cntr_of(cntr);

	if (hml_inflight_any())
		hml_inflight_progress();
	return c->prov->readerr(cntr);
}

/* The copies in flight are waited for, then the provider's wait; while it
 * sleeps, copies posted are waited for at post (inflight.c), so that
 * their counts wake it. */
static int hml_cntr_wait(struct fid_cntr *cntr, uint64_t threshold,
			 int timeout)
{
	struct hml_cntr *c = cntr_of(cntr);
	int ret;

	hml_inflight_sleep(1);
	hml_hold_off(c->domain, 1);
	hml_inflight_drain();
	ret = c->prov->wait(cntr, threshold, timeout);
	hml_hold_off(c->domain, -1);
	hml_inflight_sleep(-1);
	return ret;
}

/* The application will wait on the counter's own wait object (poll the
 * fd): from now on what it counts is counted at post (cntradd.c). */
static int hml_cntr_control(struct fid *fid, int command, void *arg)
{
	struct hml_cntr *c = hml_container_of(fid->ops, struct hml_cntr,
					      h.fi.ops);
	int ret = c->h.prov->control(fid, command, arg);

	if (!ret && command == FI_GETWAIT &&
	    !__atomic_exchange_n(&c->exported, true, __ATOMIC_SEQ_CST))
		watched(c, 1);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_cntr *c = hml_container_of(h, struct hml_cntr, h);

	if (c->exported)
		watched(c, -1);
	if (c->wait_obj == FI_WAIT_SET)
		watched(c, -1);
	free(c);
}

void hml_cntr_wrap(struct hml_domain *d, struct fid_cntr *cntr,
		   const struct fi_cntr_attr *attr)
{
	struct hml_cntr *c = calloc(1, sizeof(*c));

	if (!c) {
		hml_warn("out of memory: counter %p passes through", cntr);
		return;
	}
	c->cntr = cntr;
	c->domain = d;
	c->events = attr ? attr->events : FI_CNTR_EVENTS_COMP;
	c->wait_obj = attr ? attr->wait_obj : FI_WAIT_NONE;
	if (c->wait_obj == FI_WAIT_SET)
		watched(c, 1);
	if (hml_table_take(&cntr->ops, &c->ops, c->prov)) {
		hml_table_set(&c->ops.ops, read, hml_cntr_read);
		hml_table_set(&c->ops.ops, readerr, hml_cntr_readerr);
		hml_table_set(&c->ops.ops, wait, hml_cntr_wait);
		cntr->ops = &c->ops.ops;
	}
	hml_fid_wrap(&c->h, &cntr->fid, release);
	c->h.quiesce = hml_inflight_drain;
	hml_table_set(&c->h.fi.ops, control, hml_cntr_control);
}
