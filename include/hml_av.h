/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the shim knows about an address vector: is an address an endpoint
 * of this process? av.c wraps the AV and sees every change to it;
 * selfaddr.c answers the question (hml_av_target), asking the provider
 * and the registry (registry.c), and knows the AV's endpoints of this
 * process; avcache.c keeps its answers, per fi_addr, for readers that take
 * no lock.
 *
 * Lock order: an AV's lock (writers of its cache, names and endpoints of
 * this process) is taken alone; av.c's list lock, then an AV's lock. No
 * provider call is made under either.
 */
#ifndef HML_AV_H
#define HML_AV_H

#include "hml.h"

/* avcache.c: a verdict, and the table of them */
struct hml_av_slot {
	unsigned int seq;		/* odd while a writer changes it */
	unsigned int stamp;		/* hml_av_stamp() when it was learned */
	fi_addr_t addr;			/* FI_ADDR_NOTAVAIL: empty */
	struct hml_ep *ep;		/* NULL: not this process */
};

struct hml_av_cache {
	size_t mask;
	size_t used;
	struct hml_av_cache *next_retired;
	struct hml_av_slot slots[];
};

struct hml_av_name;
struct hml_av_local;

struct hml_av {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_av) ops;
	const struct fi_ops_av *prov;
	struct fid_av *av;
	struct hml_domain *domain;
	uint32_t addr_format;
	int rx_ctx_bits;
	struct hml_av *next_av;		/* avlist.c: all AVs */
	pthread_mutex_t lock;		/* writers; readers take none */

	/* avcache.c: the cache of verdicts */
	struct hml_av_cache *cache;	/* atomic */
	struct hml_av_cache *retired;
	unsigned int gen;		/* atomic: bumped on insert, remove */

	/* selfaddr.c */
	struct hml_av_name **names;	/* what was inserted, by fi_addr */
	bool unnamed;			/* some insert left no name kept */
	size_t naddrs;			/* at most this many in it */
	size_t nslots;			/* table indices it may have handed
					 * out are below this */
	unsigned int remote_gen;	/* atomic: all its addresses are other
					 * processes' as of this hml_self_gen
					 * (0: not known) */
	struct hml_av_local *locals;	/* its endpoints of this process */
};

/* av.c */
void hml_av_wrap(struct hml_domain *d, struct fid_av *av,
		 const struct fi_av_attr *attr);

/* avlist.c */
void hml_av_list(struct hml_av *av);
void hml_av_unlist(struct hml_av *av);
void hml_avs_forget(struct hml_ep *e);	/* it closes */
void hml_avs_named(struct hml_ep *e);	/* it has its name now */

/* avcache.c */
int hml_av_cache_init(struct hml_av *av);
void hml_av_cache_fini(struct hml_av *av);
void hml_av_cache_keep(struct hml_av *av, fi_addr_t addr, unsigned int stamp,
		       struct hml_ep *ep);
void hml_av_cache_forget(struct hml_av *av, struct hml_ep *e);
void hml_av_changed(struct hml_av *av);

/* Both counts only grow, so their sum changes whenever either does: the
 * registry (an endpoint enabled, renamed, closed) or the AV (an address
 * inserted or removed; table indices are reused). */
static inline unsigned int hml_av_stamp(const struct hml_av *av)
{
	return __atomic_load_n(&hml_self_gen, __ATOMIC_ACQUIRE) +
	       __atomic_load_n(&av->gen, __ATOMIC_ACQUIRE);
}

/* Table indices are small and dense: they index directly. */
static inline size_t hml_av_hash(fi_addr_t addr)
{
	return addr ^ (addr >> 29);
}

/* Without a lock: true and *ep if addr's slot holds a verdict of stamp
 * now, read whole (the writer's side is avcache.c's). */
static inline bool hml_av_cached(struct hml_av *av, fi_addr_t addr,
				 unsigned int now, struct hml_ep **ep)
{
	struct hml_av_cache *c = __atomic_load_n(&av->cache, __ATOMIC_ACQUIRE);

	for (size_t i = hml_av_hash(addr), n = 0; n <= c->mask; i++, n++) {
		struct hml_av_slot *s = &c->slots[i & c->mask];
		unsigned int seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		fi_addr_t a = __atomic_load_n(&s->addr, __ATOMIC_RELAXED);
		unsigned int stamp;

		if (a == FI_ADDR_NOTAVAIL)
			return false;
		if (a != addr)
			continue;
		stamp = __atomic_load_n(&s->stamp, __ATOMIC_RELAXED);
		*ep = __atomic_load_n(&s->ep, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		return !(seq & 1) && stamp == now &&
		       __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq;
	}
	return false;
}

/* selfaddr.c: is an address an endpoint of this process? */
struct hml_ep *hml_av_relearn(struct hml_av *av, fi_addr_t addr,
			      fi_addr_t key, unsigned int now);
void hml_av_inserted(struct hml_av *av, const void *addr, size_t count,
		     const fi_addr_t *fi_addr, bool was_empty);
void hml_av_removed(struct hml_av *av, const fi_addr_t *fi_addr, size_t count);
void hml_av_locals_forget(struct hml_av *av, struct hml_ep *e);
void hml_av_learn(struct hml_av *av, struct hml_ep *e);
fi_addr_t hml_av_source(struct hml_av *av, struct hml_ep *ep);
void hml_av_names_fini(struct hml_av *av);
/* Who is told of each endpoint of this process found in an address
 * vector: the message layer, which records its receives from then on. */
void hml_av_on_found(void (*fn)(struct hml_ep *ep));

/* A scalable endpoint's receive context, which the high bits of addr
 * choose; e itself where it is not one. */
static inline struct hml_ep *hml_av_rx_ctx(struct hml_ep *e, fi_addr_t addr,
					   int bits)
{
	int idx;

	if (!e || !bits)
		return e;
	idx = addr >> (64 - bits);
	if (!e->rx_ctx || idx >= e->rx_ctx_cnt)
		return NULL;
	return e->rx_ctx[idx];
}

/* The endpoint of this process addr is in av, or NULL: from the cache
 * where it has the answer of now, else asked (selfaddr.c). */
static inline struct hml_ep *hml_av_target(struct hml_av *av, fi_addr_t addr)
{
	unsigned int now = hml_av_stamp(av);
	fi_addr_t key = addr;
	struct hml_ep *ep;

	if (addr == FI_ADDR_NOTAVAIL)
		return NULL;
	if (av->rx_ctx_bits)
		key &= (1ULL << (64 - av->rx_ctx_bits)) - 1;
	if (!hml_av_cached(av, key, now, &ep))
		return hml_av_relearn(av, addr, key, now);
	return hml_av_rx_ctx(ep, addr, av->rx_ctx_bits);
}

/* The address vector an endpoint's addresses are in: its own, or that of
 * the scalable endpoint it is a context of. */
static inline struct hml_av *hml_ep_av(const struct hml_ep *b)
{
	return b->av ? b->av : b->sep ? b->sep->av : NULL;
}

/* The endpoint of this process an operation of e to addr reaches, if any:
 * for another process, a few loads and no lock. */
static inline struct hml_ep *hml_target(struct hml_ep *e, fi_addr_t addr)
{
	struct hml_ep *b = e->base;
	struct hml_av *av = hml_ep_av(b);
	unsigned int rg;

	if (!av || b->opaque)
		return NULL;
	/* An AV with no address of this process: nothing to look up. */
	rg = __atomic_load_n(&av->remote_gen, __ATOMIC_ACQUIRE);
	if (rg && rg == __atomic_load_n(&hml_self_gen, __ATOMIC_ACQUIRE))
		return NULL;
	return hml_av_target(av, addr);
}

#endif
