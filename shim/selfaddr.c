/*
 * Is an address an endpoint of this process? A destination is resolved
 * through the initiator's address vector and looked up in the registry
 * (registry.c), byte for byte. The answer is cached per (address vector,
 * fi_addr): operations to other processes then cost a few loads and no
 * lock. Each address vector also keeps the endpoints of this process it
 * holds, for the source of their messages.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "hml.h"
#include "hml_log.h"

/* An EFA address's size. */
#define EFA_ADDR_LEN 32

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
struct slot {
	unsigned int seq;		/* odd while a writer changes it */
	unsigned int stamp;		/* see stamp() */
	fi_addr_t addr;			/* FI_ADDR_NOTAVAIL: empty */
	struct hml_ep *ep;		/* NULL: not this process */
};

struct hml_av_cache {
	size_t mask;
	size_t used;
	struct hml_av_cache *next_retired;
	struct slot slots[];
};

#define CACHE_FIRST_SIZE 64

static size_t hash(fi_addr_t addr)
{
	/* Table indices are small and dense: they index directly. */
	return addr ^ (addr >> 29);
}

/* Called with av->lock held: the slot of addr, or the empty one where it
 * would go. */
static struct slot *find(struct hml_av_cache *c, fi_addr_t addr)
{
	for (size_t i = hash(addr);; i++) {
		struct slot *s = &c->slots[i & c->mask];

		if (s->addr == addr || s->addr == FI_ADDR_NOTAVAIL)
			return s;
	}
}

static void set(struct slot *s, fi_addr_t addr, unsigned int stamp,
		struct hml_ep *ep)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&s->stamp, stamp, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ep, ep, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

/* Without a lock: true and *ep if addr's slot holds a verdict of stamp
 * now, read whole. */
static bool lookup(struct hml_av_cache *c, fi_addr_t addr, unsigned int now,
		   struct hml_ep **ep)
{
	for (size_t i = hash(addr), n = 0; n <= c->mask; i++, n++) {
		struct slot *s = &c->slots[i & c->mask];
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

static struct hml_av_cache *cache_new(size_t n)
{
	struct hml_av_cache *c = malloc(sizeof(*c) + n * sizeof(c->slots[0]));

	if (!c)
		return NULL;
	c->mask = n - 1;
	c->used = 0;
	c->next_retired = NULL;
	for (size_t i = 0; i < n; i++)
		c->slots[i] = (struct slot) { .addr = FI_ADDR_NOTAVAIL };
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
		struct slot *s = &c->slots[i];

		if (s->addr == FI_ADDR_NOTAVAIL || s->stamp != now)
			continue;
		*find(n, s->addr) = (struct slot) {
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
static void keep(struct hml_av *av, fi_addr_t addr, unsigned int stamp,
		 struct hml_ep *ep)
{
	struct hml_av_cache *c = av->cache;
	struct slot *s = find(c, addr);

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

/*
 * What the application inserted, kept for addresses of a fixed size, for
 * providers whose lookup cannot tell (udp;ofi_rxd 1.17 fails it for the
 * first address inserted).
 */
struct name {
	struct name *next;
	fi_addr_t addr;
	char bytes[];
};

#define NAME_BUCKETS 256

static size_t addr_size(uint32_t format)
{
	switch (format) {
	case FI_SOCKADDR_IN:
		return sizeof(struct sockaddr_in);
	case FI_SOCKADDR_IN6:
		return sizeof(struct sockaddr_in6);
	case FI_ADDR_EFA:
		return EFA_ADDR_LEN;
	default:
		return 0;
	}
}

static struct name **bucket(struct hml_av *av, fi_addr_t addr)
{
	return &av->names[addr % NAME_BUCKETS];
}

static void forget_locked(struct hml_av *av, fi_addr_t addr)
{
	for (struct name **p = bucket(av, addr), *n; (n = *p); p = &n->next) {
		if (n->addr == addr) {
			*p = n->next;
			free(n);
			return;
		}
	}
}

/* The endpoints of this process an AV holds, by fi_addr: for the source
 * address of a message from one of them. */
struct local {
	struct local *next;
	fi_addr_t addr;
	struct hml_ep *ep;
};

static void add_local(struct hml_av *av, fi_addr_t addr, struct hml_ep *ep)
{
	struct local *l;

	pthread_mutex_lock(&av->lock);
	for (l = av->locals; l && l->addr != addr; l = l->next)
		;
	if (!l && (l = malloc(sizeof(*l)))) {
		l->addr = addr;
		l->next = av->locals;
		av->locals = l;
	}
	if (l)
		l->ep = ep;
	pthread_mutex_unlock(&av->lock);
	__atomic_store_n(&av->remote_gen, 0, __ATOMIC_RELEASE);
	hml_rx_track(ep);
}

fi_addr_t hml_av_source(struct hml_av *av, struct hml_ep *ep)
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;

	pthread_mutex_lock(&av->lock);
	for (struct local *l = av->locals; l; l = l->next)
		if (l->ep == ep)
			addr = l->addr;
	pthread_mutex_unlock(&av->lock);
	return addr;
}

/* Called with av->lock held: the endpoints it holds at addr, or e. */
static void drop_locals(struct hml_av *av, fi_addr_t addr, struct hml_ep *e)
{
	for (struct local **p = &av->locals, *l; (l = *p);) {
		if (l->addr == addr || l->ep == e) {
			*p = l->next;
			free(l);
		} else {
			p = &l->next;
		}
	}
}

/* Called with av->lock held: nothing in c names e any more. */
static void forget_in(struct hml_av_cache *c, struct hml_ep *e)
{
	for (size_t i = 0; i <= c->mask; i++)
		if (c->slots[i].ep == e)
			set(&c->slots[i], c->slots[i].addr, 0, NULL);
}

/* An endpoint closes: av keeps it no more, as an address's verdict or as
 * a source. */
void hml_av_forget(struct hml_av *av, struct hml_ep *e)
{
	pthread_mutex_lock(&av->lock);
	drop_locals(av, FI_ADDR_NOTAVAIL, e);
	forget_in(av->cache, e);
	for (struct hml_av_cache *c = av->retired; c; c = c->next_retired)
		forget_in(c, e);
	pthread_mutex_unlock(&av->lock);
}

void hml_av_removed(struct hml_av *av, const fi_addr_t *fi_addr, size_t count)
{
	pthread_mutex_lock(&av->lock);
	for (size_t i = 0; i < count; i++) {
		if (av->names)
			forget_locked(av, fi_addr[i]);
		drop_locals(av, fi_addr[i], NULL);
	}
	pthread_mutex_unlock(&av->lock);
}

static bool inserted_name(struct hml_av *av, fi_addr_t addr, void *buf,
			  size_t *len)
{
	bool found = false;

	pthread_mutex_lock(&av->lock);
	for (struct name *n = av->names ? *bucket(av, addr) : NULL; n;
	     n = n->next) {
		if (n->addr == addr) {
			*len = addr_size(av->addr_format);
			memcpy(buf, n->bytes, *len);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&av->lock);
	return found;
}

/* Ask the provider what address fi_addr stands for, and the registry whose
 * it is. Any doubt answers "not this process": that only costs speed. */
static struct hml_ep *resolve(struct hml_av *av, fi_addr_t addr)
{
	char name[sizeof(((struct hml_ep *) 0)->name)];
	size_t len = sizeof(name);
	struct hml_ep *ep;
	int ret;

	ret = av->prov->lookup(av->av, addr, name, &len);
	if ((ret || len > sizeof(name)) && !inserted_name(av, addr, name, &len)) {
		hml_debug("AV %p: fi_addr %#lx: lookup failed (%d, %zu bytes): "
			  "not this process", av->av, (unsigned long) addr, ret,
			  len);
		return NULL;
	}
	ep = hml_self_find(name, len, av->addr_format);
	hml_debug("AV %p: fi_addr %#lx is %s", av->av, (unsigned long) addr,
		  ep ? "an endpoint of this process" : "not this process");
	return ep;
}

static void keep_names(struct hml_av *av, const void *addr, size_t count,
		       const fi_addr_t *fi_addr)
{
	size_t size = addr_size(av->addr_format);

	if (!size)
		return;
	pthread_mutex_lock(&av->lock);
	if (!av->names)
		av->names = calloc(NAME_BUCKETS, sizeof(*av->names));
	for (size_t i = 0; av->names && i < count; i++) {
		struct name *n = malloc(sizeof(*n) + size);

		if (!n || fi_addr[i] == FI_ADDR_NOTAVAIL) {
			free(n);
			continue;
		}
		forget_locked(av, fi_addr[i]);
		n->addr = fi_addr[i];
		memcpy(n->bytes, (const char *) addr + i * size, size);
		n->next = *bucket(av, n->addr);
		*bucket(av, n->addr) = n;
	}
	pthread_mutex_unlock(&av->lock);
}

/* Inserted with no fi_addr values to read: this process's endpoints are
 * found by their names, and their fi_addr by asking the AV about every
 * index it may have handed out. */
static void by_name(struct hml_av *av, const void *addr, size_t count)
{
	const char *p = addr;
	struct hml_ep *ep;
	size_t size;

	for (size_t i = 0; p && i < count; i++, p += size) {
		/* String addresses follow each other, each ended by a NUL. */
		size = av->addr_format == FI_ADDR_STR ? strlen(p) + 1 :
		       addr_size(av->addr_format);
		if (!size)
			return;
		ep = hml_self_find(p, size, av->addr_format);
		if (!ep)
			continue;
		hml_rx_track(ep);
		for (fi_addr_t a = 0; a < av->nslots; a++) {
			if (resolve(av, a) == ep) {
				add_local(av, a, ep);
				break;
			}
		}
	}
}

/* Addresses of this process as they are inserted: their endpoints start
 * recording receives now, before the application posts any for them. */
void hml_av_inserted(struct hml_av *av, const void *addr, size_t count,
		     const fi_addr_t *fi_addr, bool was_empty)
{
	unsigned int gen = __atomic_load_n(&hml_self_gen, __ATOMIC_ACQUIRE);
	bool remote = fi_addr && (was_empty ||
		      __atomic_load_n(&av->remote_gen, __ATOMIC_ACQUIRE) == gen);
	struct hml_ep *ep;

	if (!fi_addr)
		by_name(av, addr, count);
	for (size_t i = 0; fi_addr && i < count; i++) {
		if (fi_addr[i] == FI_ADDR_NOTAVAIL)
			continue;
		if (addr)
			keep_names(av, (const char *) addr +
				   i * addr_size(av->addr_format), 1, &fi_addr[i]);
		if ((ep = resolve(av, fi_addr[i]))) {
			add_local(av, fi_addr[i], ep);
			remote = false;
		}
	}
	/* Still every address another process's, for what the registry
	 * is now; a later change there must prove it again. */
	__atomic_store_n(&av->remote_gen, remote ? gen : 0, __ATOMIC_RELEASE);
}

static struct hml_ep *learn(struct hml_av *av, fi_addr_t addr,
			    unsigned int stamp)
{
	struct hml_ep *ep = resolve(av, addr);

	pthread_mutex_lock(&av->lock);
	keep(av, addr, stamp, ep);
	pthread_mutex_unlock(&av->lock);
	if (ep)
		add_local(av, addr, ep);
	return ep;
}

static struct hml_ep *target_ep(struct hml_ep *e, fi_addr_t addr, int bits)
{
	int idx;

	if (!e || !bits)
		return e;
	/* A scalable endpoint: the high bits choose its receive context. */
	idx = addr >> (64 - bits);
	if (!e->rx_ctx || idx >= e->rx_ctx_cnt)
		return NULL;
	return e->rx_ctx[idx];
}

/* Both counts only grow, so their sum changes whenever either does: the
 * registry (an endpoint enabled, renamed, closed) or the AV (an address
 * inserted or removed; table indices are reused). */
static unsigned int stamp(const struct hml_av *av)
{
	return __atomic_load_n(&hml_self_gen, __ATOMIC_ACQUIRE) +
	       __atomic_load_n(&av->gen, __ATOMIC_ACQUIRE);
}

void hml_av_changed(struct hml_av *av)
{
	__atomic_add_fetch(&av->gen, 1, __ATOMIC_RELEASE);
}

/* Kept out of line so that the common case, a cached answer, needs no
 * stack frame. */
static __attribute__((noinline)) struct hml_ep *
relearn(struct hml_av *av, fi_addr_t addr, fi_addr_t key, unsigned int now)
{
	return target_ep(learn(av, key, now), addr, av->rx_ctx_bits);
}

struct hml_ep *hml_av_target(struct hml_av *av, fi_addr_t addr)
{
	unsigned int now = stamp(av);
	fi_addr_t key = addr;
	struct hml_ep *ep;

	if (addr == FI_ADDR_NOTAVAIL)
		return NULL;
	if (av->rx_ctx_bits)
		key &= (1ULL << (64 - av->rx_ctx_bits)) - 1;
	if (!lookup(__atomic_load_n(&av->cache, __ATOMIC_ACQUIRE), key, now,
		    &ep))
		return relearn(av, addr, key, now);
	if (!av->rx_ctx_bits)
		return ep;
	return target_ep(ep, addr, av->rx_ctx_bits);
}

int hml_av_cache_init(struct hml_av *av)
{
	av->cache = cache_new(CACHE_FIRST_SIZE);
	if (!av->cache)
		return -FI_ENOMEM;
	hml_av_list(av);
	return 0;
}

void hml_av_cache_fini(struct hml_av *av)
{
	struct hml_av_cache *c, *cn;

	hml_av_unlist(av);
	for (c = av->retired; c; c = cn) {
		cn = c->next_retired;
		free(c);
	}
	free(av->cache);
	for (size_t i = 0; av->names && i < NAME_BUCKETS; i++) {
		while (av->names[i]) {
			struct name *n = av->names[i];

			av->names[i] = n->next;
			free(n);
		}
	}
	free(av->names);
	while (av->locals) {
		struct local *l = av->locals;

		av->locals = l->next;
		free(l);
	}
}
