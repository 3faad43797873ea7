/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The cache of an address vector's verdicts (hml_av.h): per fi_addr, the
 * endpoint of this process it is, or none, as selfaddr.c learned it.
 * Operations to other processes then cost a few loads and no lock
 * (hml_av_cached, the reader, is inline in hml_av.h).
 */
#include <stdlib.h>

#include <rdma/fi_errno.h>

#include "hml_av.h"

/*
 * The cache: an open-addressed table of fi_addr keys, each slot holding its
 * verdict in place. Writers (under the AV's lock) change a slot inside a
 * sequence count that readers check, so a reader never needs a lock, and
 * any doubt (a slot being written, a key not found) sends it to the slow
 * path. A verdict is good while its stamp is the current one; a full table
 * of stale ones is emptied in place, and only one of current ones grows
 * (the table it replaces is kept until the AV closes, for readers that may
 * still be in it): churn (inserts, removes, endpoints opened and closed)
 * reuses what is there.
 */
#define CACHE_FIRST_SIZE 64

/* Called with av->lock held: the slot of addr, or the empty one where it
 * would go. */
static struct hml_av_slot *find(struct hml_av_cache *c, fi_addr_t addr)
{
	for (size_t i = hml_av_hash(addr);; i++) {
		struct hml_av_slot *s = &c->slots[i & c->mask];

		if (s->addr == addr || s->addr == FI_ADDR_NOTAVAIL)
			return s;
	}
}

static void set(struct hml_av_slot *s, fi_addr_t addr, unsigned int stamp,
		struct hml_ep *ep)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&s->stamp, stamp, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ep, ep, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static struct hml_av_cache *cache_new(size_t n)
{
	struct hml_av_cache *c = malloc(sizeof(*c) + n * sizeof(c->slots[0]));

	if (!c)
		return NULL;
	c->mask = n - 1;
	c->used = 0;
	c->next_retired = NULL;
	for (size_t i = 0; i < n; i++)
		c->slots[i] = (struct hml_av_slot) { .addr = FI_ADDR_NOTAVAIL };
	return c;
}

/* Called with av->lock held: the table, half full, made room in. Its
 * current verdicts are kept, in a table twice the size where they are
 * more than a quarter of it; otherwise every slot is emptied in place
 * (the few current ones are learned again). */
static struct hml_av_cache *make_room(struct hml_av *av, unsigned int now)
{
	struct hml_av_cache *c = av->cache, *n;
	size_t current = 0;

	for (size_t i = 0; i <= c->mask; i++)
		current += c->slots[i].addr != FI_ADDR_NOTAVAIL &&
			   c->slots[i].stamp == now;
	if (4 * current <= c->mask + 1) {
		for (size_t i = 0; i <= c->mask; i++)
			if (c->slots[i].addr != FI_ADDR_NOTAVAIL)
				set(&c->slots[i], FI_ADDR_NOTAVAIL, 0, NULL);
		c->used = 0;
		return c;
	}
	n = cache_new(2 * (c->mask + 1));
	if (!n)
		return NULL;
	for (size_t i = 0; i <= c->mask; i++) {
		struct hml_av_slot *s = &c->slots[i];

		if (s->addr == FI_ADDR_NOTAVAIL || s->stamp != now)
			continue;
		*find(n, s->addr) = (struct hml_av_slot) {
			.stamp = now, .addr = s->addr, .ep = s->ep,
		};
		n->used++;
	}
	c->next_retired = av->retired;
	av->retired = c;
	__atomic_store_n(&av->cache, n, __ATOMIC_RELEASE);
	return n;
}

/* Called with av->lock held: the verdict on addr, kept. */
static void keep_locked(struct hml_av *av, fi_addr_t addr, unsigned int stamp,
			struct hml_ep *ep)
{
	struct hml_av_cache *c = av->cache;
	struct hml_av_slot *s = find(c, addr);

	if (s->addr == FI_ADDR_NOTAVAIL) {
		if (2 * (c->used + 1) > c->mask + 1) {
			if (!(c = make_room(av, stamp)))
				return;
			s = find(c, addr);
		}
		c->used += s->addr == FI_ADDR_NOTAVAIL;
	}
	set(s, addr, stamp, ep);
}

void hml_av_cache_keep(struct hml_av *av, fi_addr_t addr, unsigned int stamp,
		       struct hml_ep *ep)
{
	pthread_mutex_lock(&av->lock);
	keep_locked(av, addr, stamp, ep);
	pthread_mutex_unlock(&av->lock);
}

/* Called with av->lock held: nothing in c names e any more. */
static void forget_in(struct hml_av_cache *c, struct hml_ep *e)
{
	for (size_t i = 0; i <= c->mask; i++)
		if (c->slots[i].ep == e)
			set(&c->slots[i], c->slots[i].addr, 0, NULL);
}

/* An endpoint closes: no verdict names it any more. */
void hml_av_cache_forget(struct hml_av *av, struct hml_ep *e)
{
	pthread_mutex_lock(&av->lock);
	forget_in(av->cache, e);
	for (struct hml_av_cache *c = av->retired; c; c = c->next_retired)
		forget_in(c, e);
	pthread_mutex_unlock(&av->lock);
}

void hml_av_changed(struct hml_av *av)
{
	__atomic_add_fetch(&av->gen, 1, __ATOMIC_RELEASE);
}

int hml_av_cache_init(struct hml_av *av)
{
	av->cache = cache_new(CACHE_FIRST_SIZE);
	return av->cache ? 0 : -FI_ENOMEM;
}

void hml_av_cache_fini(struct hml_av *av)
{
	struct hml_av_cache *c, *cn;

	for (c = av->retired; c; c = cn) {
		cn = c->next_retired;
		free(c);
	}
	free(av->cache);
}
