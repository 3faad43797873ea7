/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Counters: the shim adds to them what the provider would have
 * (cntradd.c). Reading one, or waiting on it, first completes the shim's
 * operations whose copies have landed (inflight.c); with none in flight,
 * a read costs one load more than the provider's.
 */
#include <stdlib.h>

#include "hml_log.h"
#include "hml_op.h"

static struct hml_cntr *cntr_of(struct fid_cntr *cntr)
{
	return hml_container_of(cntr->ops, struct hml_cntr, ops.ops);
}

static uint64_t hml_cntr_read(struct fid_cntr *cntr)
{
	if (hml_inflight_any())
		hml_inflight_progress();
	return cntr_of(cntr)->prov->read(cntr);
}

static uint64_t hml_cntr_readerr(struct fid_cntr *cntr)
{
	if (hml_inflight_any())
		hml_inflight_progress();
	return cntr_of(cntr)->prov->readerr(cntr);
}

/* The copies in flight are waited for, then the provider's wait; while it
 * sleeps, copies posted are waited for at post (inflight.c), so that
 * their counts wake it. */
static int hml_cntr_wait(struct fid_cntr *cntr, uint64_t threshold,
			 int timeout)
{
	int ret;

	hml_inflight_sleep(1);
	hml_inflight_drain();
	ret = cntr_of(cntr)->prov->wait(cntr, threshold, timeout);
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
		hml_inflight_watch(1);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_cntr *c = hml_container_of(h, struct hml_cntr, h);

	if (c->exported)
		hml_inflight_watch(-1);
	if (c->wait_obj == FI_WAIT_SET)
		hml_inflight_watch(-1);
	free(c);
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
	c->wait_obj = attr ? attr->wait_obj : FI_WAIT_NONE;
	if (c->wait_obj == FI_WAIT_SET)
		hml_inflight_watch(1);
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
