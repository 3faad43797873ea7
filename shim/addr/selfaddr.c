/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Is an address an endpoint of this process? A destination is resolved
 * through the initiator's address vector and looked up in the registry
 * (registry.c), byte for byte. The answer is kept per (address vector,
 * fi_addr) in the AV's cache (avcache.c). Each address vector also keeps
 * the names inserted in it and the endpoints of this process it holds, for
 * the source of their messages. An endpoint is recognised whenever its
 * name and an address vector meet: at the insert, when the endpoint is
 * given its name (enabled, renamed: hml_avs_named), or at an operation.
 * Whoever registered (hml_av_on_found: the message layer) is told of each
 * endpoint of this process found.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "hml_av.h"
#include "hml_log.h"

/* An EFA address's size. */
#define EFA_ADDR_LEN 32

/*
 * What the application inserted: for providers whose lookup cannot tell
 * (udp;ofi_rxd 1.17 fails it for the first address inserted), and for an
 * endpoint named after the insert.
 */
struct hml_av_name {
	struct hml_av_name *next;
	fi_addr_t addr;
	size_t len;
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

static struct hml_av_name **bucket(struct hml_av *av, fi_addr_t addr)
{
	return &av->names[addr % NAME_BUCKETS];
}

static void forget_locked(struct hml_av *av, fi_addr_t addr)
{
	for (struct hml_av_name **p = bucket(av, addr), *n; (n = *p); p = &n->next) {
		if (n->addr == addr) {
			*p = n->next;
			free(n);
			return;
		}
	}
}

/* The endpoints of this process an AV holds, by fi_addr: for the source
 * address of a message from one of them. */
struct hml_av_local {
	struct hml_av_local *next;
	fi_addr_t addr;
	struct hml_ep *ep;
};

static void add_local(struct hml_av *av, fi_addr_t addr, struct hml_ep *ep)
{
	struct hml_av_local *l;

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
}

static void (*on_found)(struct hml_ep *ep);

void hml_av_on_found(void (*fn)(struct hml_ep *ep))
{
	on_found = fn;
}

/* An endpoint of this process at addr: the source of its messages, and
 * whoever asked is told. */
static void found(struct hml_av *av, fi_addr_t addr, struct hml_ep *ep)
{
	add_local(av, addr, ep);
	if (on_found)
		on_found(ep);
}

fi_addr_t hml_av_source(struct hml_av *av, struct hml_ep *ep)
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;

	pthread_mutex_lock(&av->lock);
	for (struct hml_av_local *l = av->locals; l; l = l->next)
		if (l->ep == ep)
			addr = l->addr;
	pthread_mutex_unlock(&av->lock);
	return addr;
}

/* Called with av->lock held: the endpoints it holds at addr, or e. */
static void drop_locals(struct hml_av *av, fi_addr_t addr, struct hml_ep *e)
{
	for (struct hml_av_local **p = &av->locals, *l; (l = *p);) {
		if (l->addr == addr || l->ep == e) {
			*p = l->next;
			free(l);
		} else {
			p = &l->next;
		}
	}
}

/* An endpoint closes: av holds it no more as a source. */
void hml_av_locals_forget(struct hml_av *av, struct hml_ep *e)
{
	pthread_mutex_lock(&av->lock);
	drop_locals(av, FI_ADDR_NOTAVAIL, e);
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
	for (struct hml_av_name *n = av->names ? *bucket(av, addr) : NULL; n;
	     n = n->next) {
		if (n->addr == addr && n->len <= *len) {
			*len = n->len;
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
	if (ret || len > sizeof(name)) {
		len = sizeof(name);
		ret = !inserted_name(av, addr, name, &len);
	}
	if (ret) {
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

/* The size of the inserted address at p: string addresses follow each
 * other, each ended by a NUL. */
static size_t name_size(const struct hml_av *av, const char *p)
{
	return av->addr_format == FI_ADDR_STR ? strlen(p) + 1 :
	       addr_size(av->addr_format);
}

/* The name inserted at fi_addr, kept; without one, the AV is scanned when
 * an endpoint is named (hml_avs_named). */
static void keep_name(struct hml_av *av, const char *p, fi_addr_t fi_addr)
{
	size_t size = p ? name_size(av, p) : 0;
	struct hml_av_name *n;

	if (fi_addr == FI_ADDR_NOTAVAIL)
		return;
	pthread_mutex_lock(&av->lock);
	if (!av->names)
		av->names = calloc(NAME_BUCKETS, sizeof(*av->names));
	n = size && size <= sizeof(((struct hml_ep *) 0)->name) && av->names ?
	    malloc(sizeof(*n) + size) : NULL;
	if (n) {
		forget_locked(av, fi_addr);
		n->addr = fi_addr;
		n->len = size;
		memcpy(n->bytes, p, size);
		n->next = *bucket(av, n->addr);
		*bucket(av, n->addr) = n;
	} else {
		av->unnamed = true;
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

	av->unnamed = true;
	for (size_t i = 0; p && i < count; i++, p += size) {
		size = name_size(av, p);
		if (!size)
			return;
		ep = hml_self_find(p, size, av->addr_format);
		if (!ep)
			continue;
		if (on_found)
			on_found(ep);
		for (fi_addr_t a = 0; a < av->nslots; a++) {
			if (resolve(av, a) == ep) {
				found(av, a, ep);
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

	const char *p = addr;

	if (!fi_addr)
		by_name(av, addr, count);
	for (size_t i = 0; fi_addr && i < count; i++) {
		keep_name(av, p, fi_addr[i]);
		if (p)
			p += name_size(av, p);
		if (fi_addr[i] == FI_ADDR_NOTAVAIL)
			continue;
		if ((ep = resolve(av, fi_addr[i]))) {
			found(av, fi_addr[i], ep);
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

	hml_av_cache_keep(av, addr, stamp, ep);
	if (ep)
		found(av, addr, ep);
	return ep;
}

/* Not in the cache as of now: asked, and kept. Out of line, so that the
 * common case, a cached answer, needs no stack frame (hml_av.h). */
struct hml_ep *hml_av_relearn(struct hml_av *av, fi_addr_t addr,
			      fi_addr_t key, unsigned int now)
{
	return hml_av_rx_ctx(learn(av, key, now), addr, av->rx_ctx_bits);
}

/* An endpoint of this process was named after addresses went into av:
 * the fi_addr values that hold its name. */
void hml_av_learn(struct hml_av *av, struct hml_ep *e)
{
	fi_addr_t hits[16];
	size_t n = 0;
	bool scan;

	pthread_mutex_lock(&av->lock);
	for (size_t i = 0; av->names && i < NAME_BUCKETS; i++)
		for (struct hml_av_name *a = av->names[i]; a; a = a->next)
			if (n < sizeof(hits) / sizeof(hits[0]) &&
			    hml_self_is(e, a->bytes, a->len, av->addr_format))
				hits[n++] = a->addr;
	scan = av->unnamed;
	pthread_mutex_unlock(&av->lock);
	for (size_t i = 0; i < n; i++)
		found(av, hits[i], e);
	/* Inserted where no name could be kept: the provider is asked. */
	for (fi_addr_t a = 0; scan && a < av->nslots; a++)
		if (resolve(av, a) == e)
			found(av, a, e);
}

void hml_av_names_fini(struct hml_av *av)
{
	for (size_t i = 0; av->names && i < NAME_BUCKETS; i++) {
		while (av->names[i]) {
			struct hml_av_name *n = av->names[i];

			av->names[i] = n->next;
			free(n);
		}
	}
	free(av->names);
	while (av->locals) {
		struct hml_av_local *l = av->locals;

		av->locals = l->next;
		free(l);
	}
}
