/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Poll sets. fi_poll is the application's progress call for what the set
 * holds: the shim's operations whose copies have landed are completed
 * first. util's poll reads each CQ and counter through its ops, and so
 * sees the shim's entries and counts; sockets' looks at its own queues,
 * and at the counts it made itself (its fi_cntr_add is no event). So the
 * set's CQs with shim entries waiting, and its counters the shim added to
 * since the set last reported them, are reported here where the provider
 * did not report them.
 */
#include <stdlib.h>

#include "hml_log.h"
#include "hml_msg.h"

struct member {
	struct hml_fid *h;		/* a wrapped CQ or counter */
	void *context;
	unsigned long seen;		/* a counter's bumps last reported */
};

struct hml_poll {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_poll) ops;
	const struct fi_ops_poll *prov;
	pthread_mutex_t lock;
	struct member *members;
	size_t n, cap;
};

static struct hml_poll *poll_of(struct fid_poll *pollset)
{
	return hml_container_of(pollset->ops, struct hml_poll, ops.ops);
}

/* Has m something of the shim's to report? A counter's bumps are taken
 * as reported. */
static bool news(struct member *m)
{
	struct hml_cntr *c;
	unsigned long b;

	if (m->h->fid->fclass == FI_CLASS_CQ)
		return __atomic_load_n(&hml_container_of(m->h, struct hml_cq,
							 h)->pending,
				       __ATOMIC_ACQUIRE);
	c = hml_container_of(m->h, struct hml_cntr, h);
	b = __atomic_load_n(&c->bumps, __ATOMIC_ACQUIRE);
	if (b == m->seen)
		return false;
	m->seen = b;
	return true;
}

static bool listed(void **context, int n, void *ctx)
{
	for (int i = 0; i < n; i++)
		if (context[i] == ctx)
			return true;
	return false;
}

static int hml_poll_poll(struct fid_poll *pollset, void **context, int count)
{
	struct hml_poll *p = poll_of(pollset);
	int n;

	hml_hold_flush_every();
	if (hml_inflight_any())
		hml_inflight_progress();
	n = p->prov->poll(pollset, context, count);
	if (n < 0)
		return n;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n && n < count; i++)
		if (news(&p->members[i]) &&
		    !listed(context, n, p->members[i].context))
			context[n++] = p->members[i].context;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static int hml_poll_add(struct fid_poll *pollset, struct fid *fid,
			uint64_t flags)
{
	struct hml_poll *p = poll_of(pollset);
	struct hml_fid *h = hml_fid_of(fid);
	struct member *grown;
	int ret;

	ret = p->prov->poll_add(pollset, fid, flags);
	if (ret || !h || (fid->fclass != FI_CLASS_CQ &&
			  fid->fclass != FI_CLASS_CNTR))
		return ret;
	pthread_mutex_lock(&p->lock);
	if (p->n == p->cap) {
		grown = realloc(p->members, (p->cap ? p->cap * 2 : 4) *
					    sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&p->lock);
			hml_warn("out of memory: poll set %p may miss "
				 "completions of %p", pollset, fid);
			return 0;
		}
		p->members = grown;
		p->cap = p->cap ? p->cap * 2 : 4;
	}
	p->members[p->n++] = (struct member) { .h = h,
					       .context = fid->context };
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int hml_poll_del(struct fid_poll *pollset, struct fid *fid,
			uint64_t flags)
{
	struct hml_poll *p = poll_of(pollset);
	int ret;

	ret = p->prov->poll_del(pollset, fid, flags);
	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++)
		if (p->members[i].h->fid == fid) {
			p->members[i] = p->members[--p->n];
			break;
		}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static void release(struct hml_fid *h)
{
	struct hml_poll *p = hml_container_of(h, struct hml_poll, h);

	pthread_mutex_destroy(&p->lock);
	free(p->members);
	free(p);
}

void hml_poll_wrap(struct fid_poll *pollset)
{
	struct hml_poll *p = calloc(1, sizeof(*p));

	if (!p) {
		hml_warn("out of memory: poll set %p passes through", pollset);
		return;
	}
	pthread_mutex_init(&p->lock, NULL);
	if (hml_table_take(&pollset->ops, &p->ops, p->prov)) {
		hml_table_set(&p->ops.ops, poll, hml_poll_poll);
		hml_table_set(&p->ops.ops, poll_add, hml_poll_add);
		hml_table_set(&p->ops.ops, poll_del, hml_poll_del);
		pollset->ops = &p->ops.ops;
	}
	hml_fid_wrap(&p->h, &pollset->fid, release);
}
