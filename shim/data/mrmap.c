/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A domain's memory regions, found by key (the target of an RMA) and by
 * descriptor (a local buffer). Chained hash tables under a read-write lock:
 * only operations already known to target this process look here. A
 * region found is held until put: an operation in flight keeps it.
 */
#include <stdlib.h>

#include "hml.h"

#define FIRST_BUCKETS 64

static size_t slot(uint64_t v, size_t n)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return v & (n - 1);
}

static uint64_t desc_val(const void *desc)
{
	return (uintptr_t) desc;
}

int hml_mrmap_init(struct hml_mrmap *m)
{
	m->nbuckets = FIRST_BUCKETS;
	m->by_key = calloc(m->nbuckets, sizeof(*m->by_key));
	m->by_desc = calloc(m->nbuckets, sizeof(*m->by_desc));
	if (!m->by_key || !m->by_desc) {
		free(m->by_key);
		free(m->by_desc);
		return -FI_ENOMEM;
	}
	pthread_rwlock_init(&m->lock, NULL);
	return 0;
}

void hml_mrmap_fini(struct hml_mrmap *m)
{
	pthread_rwlock_destroy(&m->lock);
	free(m->by_key);
	free(m->by_desc);
}

static void link_mr(struct hml_mrmap *m, struct hml_mr *mr)
{
	size_t k = slot(mr->key, m->nbuckets);
	size_t d = slot(desc_val(mr->desc), m->nbuckets);

	mr->key_next = m->by_key[k];
	m->by_key[k] = mr;
	mr->desc_next = m->by_desc[d];
	m->by_desc[d] = mr;
}

static void grow(struct hml_mrmap *m)
{
	struct hml_mr **key = m->by_key, **desc = m->by_desc, *mr, *next;
	size_t n = m->nbuckets;

	m->by_key = calloc(2 * n, sizeof(*key));
	m->by_desc = calloc(2 * n, sizeof(*desc));
	if (!m->by_key || !m->by_desc) {
		free(m->by_key);
		free(m->by_desc);
		m->by_key = key;
		m->by_desc = desc;
		return;
	}
	m->nbuckets = 2 * n;
	for (size_t i = 0; i < n; i++) {
		for (mr = key[i]; mr; mr = next) {
			next = mr->key_next;
			link_mr(m, mr);
		}
	}
	free(key);
	free(desc);
}

void hml_mrmap_add(struct hml_mrmap *m, struct hml_mr *mr)
{
	pthread_rwlock_wrlock(&m->lock);
	if (m->count >= 2 * m->nbuckets)
		grow(m);
	link_mr(m, mr);
	m->count++;
	mr->mapped = true;
	pthread_rwlock_unlock(&m->lock);
}

static void unlink_key(struct hml_mr **p, struct hml_mr *mr)
{
	while (*p != mr)
		p = &(*p)->key_next;
	*p = mr->key_next;
}

static void unlink_desc(struct hml_mr **p, struct hml_mr *mr)
{
	while (*p != mr)
		p = &(*p)->desc_next;
	*p = mr->desc_next;
}

void hml_mrmap_del(struct hml_mrmap *m, struct hml_mr *mr)
{
	pthread_rwlock_wrlock(&m->lock);
	if (mr->mapped) {
		unlink_key(&m->by_key[slot(mr->key, m->nbuckets)], mr);
		unlink_desc(&m->by_desc[slot(desc_val(mr->desc), m->nbuckets)],
			    mr);
		m->count--;
		mr->mapped = false;
	}
	pthread_rwlock_unlock(&m->lock);
}

/* Both lookups hold the region for the caller, who puts it (hml_mr_put):
 * another thread may close it meanwhile. */
static struct hml_mr *hold(struct hml_mr *mr)
{
	if (mr)
		__atomic_add_fetch(&mr->refs, 1, __ATOMIC_RELAXED);
	return mr;
}

/* Under FI_MR_ENDPOINT a key names a region of one endpoint only (of a
 * scalable endpoint: of all its contexts). */
struct hml_mr *hml_mrmap_key(struct hml_mrmap *m, uint64_t key,
			     const struct hml_ep *ep)
{
	struct hml_mr *mr;

	pthread_rwlock_rdlock(&m->lock);
	for (mr = m->by_key[slot(key, m->nbuckets)]; mr; mr = mr->key_next)
		if (mr->key == key &&
		    (!mr->ep || mr->ep == ep || mr->ep == ep->sep))
			break;
	hold(mr);
	pthread_rwlock_unlock(&m->lock);
	return mr;
}

struct hml_mr *hml_mrmap_desc(struct hml_mrmap *m, const void *desc)
{
	struct hml_mr *mr;

	pthread_rwlock_rdlock(&m->lock);
	for (mr = m->by_desc[slot(desc_val(desc), m->nbuckets)]; mr;
	     mr = mr->desc_next)
		if (mr->desc == desc)
			break;
	hold(mr);
	pthread_rwlock_unlock(&m->lock);
	return mr;
}

void hml_mr_put(struct hml_mr *mr)
{
	if (mr && !__atomic_sub_fetch(&mr->refs, 1, __ATOMIC_ACQ_REL))
		free(mr);
}
