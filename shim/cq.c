/*
 * Completion queues: every read path returns the shim's entries first,
 * then the provider's. While the shim has none, reads cost one load more
 * than the provider's own.
 */
#include <stdlib.h>

#include "hml.h"
#include "hml_log.h"

static struct hml_cq *cq_of(struct fid_cq *cq)
{
	return container_of(cq->ops, struct hml_cq, ops.ops);
}

static bool pending(struct hml_cq *c)
{
	return __atomic_load_n(&c->pending, __ATOMIC_ACQUIRE);
}

/*
 * The shim's entries, then the provider's for the rest of buf: reading
 * still drives a manual-progress provider. An error the provider has
 * waiting is reported on the next read.
 */
static ssize_t merge(ssize_t ours, ssize_t theirs)
{
	if (theirs > 0)
		return ours + theirs;
	return ours ? ours : theirs;
}

static ssize_t hml_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	struct hml_cq *c = cq_of(cq);
	ssize_t n;

	if (!pending(c) || !buf)
		return c->prov->read(cq, buf, count);
	n = hml_cq_take(c, buf, count, NULL);
	if (n < 0)
		return n;
	return merge(n, c->prov->read(cq, (char *) buf + n * c->entry_size,
					 count - n));
}

static ssize_t hml_cq_readfrom(struct fid_cq *cq, void *buf, size_t count,
			       fi_addr_t *src)
{
	struct hml_cq *c = cq_of(cq);
	ssize_t n;

	if (!pending(c) || !buf)
		return c->prov->readfrom(cq, buf, count, src);
	n = hml_cq_take(c, buf, count, src);
	if (n < 0)
		return n;
	return merge(n, c->prov->readfrom(cq, (char *) buf +
					     n * c->entry_size, count - n,
					     src ? src + n : NULL));
}

static ssize_t hml_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			      uint64_t flags)
{
	struct hml_cq *c = cq_of(cq);

	if (pending(c) && hml_cq_take_err(c, buf))
		return 1;
	return c->prov->readerr(cq, buf, flags);
}

/* Blocking reads return the shim's entries at once, if it has any. */
static ssize_t hml_cq_sread(struct fid_cq *cq, void *buf, size_t count,
			    const void *cond, int timeout)
{
	struct hml_cq *c = cq_of(cq);

	if (pending(c) && buf && count)
		return hml_cq_read(cq, buf, count);
	return c->prov->sread(cq, buf, count, cond, timeout);
}

static ssize_t hml_cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count,
				fi_addr_t *src, const void *cond, int timeout)
{
	struct hml_cq *c = cq_of(cq);

	if (pending(c) && buf && count)
		return hml_cq_readfrom(cq, buf, count, src);
	return c->prov->sreadfrom(cq, buf, count, src, cond, timeout);
}

static void release(struct hml_fid *h)
{
	struct hml_cq *cq = container_of(h, struct hml_cq, h);

	/* fi_cq(3): completions left in a closed CQ are lost. */
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
}

void hml_cq_wrap(struct hml_domain *d, struct fid_cq *cq,
		 const struct fi_cq_attr *attr)
{
	struct hml_cq *c;

	/* A format the shim cannot write: it can report nothing here. */
	if (!hml_cq_entry_size(attr->format)) {
		hml_info("CQ %p has format %d: it passes through", cq,
			 attr->format);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		hml_warn("out of memory: completion queue %p passes through", cq);
		return;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->cq = cq;
	c->domain = d;
	c->format = attr->format;
	c->entry_size = hml_cq_entry_size(attr->format);
	if (hml_table_take(&cq->ops, &c->ops, c->prov)) {
		hml_table_set(&c->ops.ops, read, hml_cq_read);
		hml_table_set(&c->ops.ops, readfrom, hml_cq_readfrom);
		hml_table_set(&c->ops.ops, readerr, hml_cq_readerr);
		hml_table_set(&c->ops.ops, sread, hml_cq_sread);
		hml_table_set(&c->ops.ops, sreadfrom, hml_cq_sreadfrom);
		cq->ops = &c->ops.ops;
	}
	hml_fid_wrap(&c->h, &cq->fid, release);
}
