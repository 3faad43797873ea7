/* SPDX-License-Identifier: BSD-2-Clause */
/* Address vectors: every change to one invalidates what selfaddr.c
 * learned from it. */
#include <stdlib.h>

#include "hml_msg.h"
#include "hml_log.h"

/* The AV, before its provider is called: the receives its domain holds
 * go to the provider first (hold.c). */
static struct hml_av *av_of(struct fid_av *av)
{
	struct hml_av *a = hml_container_of(av->ops, struct hml_av, ops.ops);

	hml_hold_flush(a->domain);
	return a;
}

/* ret of count addresses went in (addr: their bytes, where known). An
 * asynchronous insert (FI_EVENT) returns 0 and fills fi_addr later, and a
 * failed one may have inserted some: then fi_addr is not to be read. */
static int inserted(struct hml_av *a, int ret, const void *addr, size_t count,
		    const fi_addr_t *fi_addr)
{
	bool was_empty = !a->naddrs;

	a->naddrs += ret > 0 ? (size_t) ret : count;
	a->nslots += count;
	hml_av_inserted(a, addr, count, ret > 0 ? fi_addr : NULL, was_empty);
	hml_av_changed(a);
	return ret;
}

static int hml_av_insert(struct fid_av *av, const void *addr, size_t count,
			 fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct hml_av *a = av_of(av);

	return inserted(a, a->prov->insert(av, addr, count, fi_addr, flags,
					   context), addr, count, fi_addr);
}

static int hml_av_insertsvc(struct fid_av *av, const char *node,
			    const char *service, fi_addr_t *fi_addr,
			    uint64_t flags, void *context)
{
	struct hml_av *a = av_of(av);

	return inserted(a, a->prov->insertsvc(av, node, service, fi_addr, flags,
					      context), NULL, 1, fi_addr);
}

static int hml_av_insertsym(struct fid_av *av, const char *node,
			    size_t nodecnt, const char *service, size_t svccnt,
			    fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct hml_av *a = av_of(av);

	return inserted(a, a->prov->insertsym(av, node, nodecnt, service,
					      svccnt, fi_addr, flags, context),
			NULL, nodecnt * svccnt, fi_addr);
}

static int hml_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
			 uint64_t flags)
{
	struct hml_av *a = av_of(av);
	int ret;

	ret = a->prov->remove(av, fi_addr, count, flags);
	if (!ret) {
		a->naddrs -= count < a->naddrs ? count : a->naddrs;
		hml_av_removed(a, fi_addr, count);
	}
	hml_av_changed(a);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_av *a = hml_container_of(h, struct hml_av, h);

	hml_av_unlist(a);
	hml_av_cache_fini(a);
	hml_av_names_fini(a);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

void hml_av_wrap(struct hml_domain *d, struct fid_av *av,
		 const struct fi_av_attr *attr)
{
	struct hml_av *a = calloc(1, sizeof(*a));

	if (a)
		pthread_mutex_init(&a->lock, NULL);
	if (!a || hml_av_cache_init(a)) {
		if (a)
			pthread_mutex_destroy(&a->lock);
		free(a);
		hml_warn("out of memory: address vector %p passes through", av);
		return;
	}
	a->av = av;
	a->domain = d;
	a->addr_format = d->addr_format;
	a->rx_ctx_bits = attr->rx_ctx_bits;
	hml_av_list(a);
	if (hml_table_take(&av->ops, &a->ops, a->prov)) {
		hml_table_set(&a->ops.ops, insert, hml_av_insert);
		hml_table_set(&a->ops.ops, insertsvc, hml_av_insertsvc);
		hml_table_set(&a->ops.ops, insertsym, hml_av_insertsym);
		hml_table_set(&a->ops.ops, remove, hml_av_remove);
		av->ops = &a->ops.ops;
	}
	hml_fid_wrap(&a->h, &av->fid, release);
}
