/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Address vectors. Inserting an EFA address inserts, into the shm AV
 * underneath, the shm name real EFA derives from it (efa_shm.c); the
 * fi_addr_t is the one shm returns, so completions' source addresses need
 * no translation. Lookups give the address back as EFA does: the 32 bytes,
 * with a pointer field that holds something else on every copy.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "efa.h"

static inline struct efa_av *av_of(struct fid_av *av)
{
	return efa_container(av, struct efa_av, av);
}

static int av_close(struct fid *fid)
{
	struct efa_av *a = efa_container(fid, struct efa_av, av.fid);
	int ret = fi_close(&a->shm->fid);

	if (ret)
		return ret;
	pthread_mutex_destroy(&a->lock);
	free(a->tab);
	a->magic = 0;
	free(a);
	return 0;
}

/* Called with the lock held. */
static int remember(struct efa_av *a, fi_addr_t fi_addr,
		    const struct efa_ep_addr *addr)
{
	if (fi_addr >= a->cap) {
		size_t cap = a->cap ? a->cap : 64;
		struct efa_av_entry *t;

		while (cap <= fi_addr)
			cap *= 2;
		t = realloc(a->tab, cap * sizeof(*t));
		if (!t)
			return -FI_ENOMEM;
		memset(t + a->cap, 0, (cap - a->cap) * sizeof(*t));
		a->tab = t;
		a->cap = cap;
	}
	a->tab[fi_addr].used = true;
	a->tab[fi_addr].addr = *addr;
	a->tab[fi_addr].addr.next = NULL;
	return 0;
}

static int av_insert(struct fid_av *av, const void *addr, size_t count,
		     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct efa_av *a = av_of(av);
	uint8_t gid[16];
	int done = 0;

	(void) context;
	if (flags & ~(uint64_t) FI_MORE)
		return -FI_EINVAL;	/* FI_EVENT needs an EQ; no FI_SYNC_ERR */
	efa_host_gid(gid);
	for (size_t i = 0; i < count; i++) {
		const struct efa_ep_addr *ea = (const struct efa_ep_addr *)
			((const char *) addr + i * EFA_EP_ADDR_LEN);
		char name[EFA_SHM_NAME_MAX];
		size_t namelen = sizeof(name);
		fi_addr_t shm_addr = FI_ADDR_NOTAVAIL;
		int ret;

		if (fi_addr)
			fi_addr[i] = FI_ADDR_NOTAVAIL;
		/* Only peers on this host are reachable without a device. */
		if (memcmp(ea->raw, gid, sizeof(gid))) {
			FI_WARN(&efa_prov, FI_LOG_AV, "address %zu is not on "
				"this host; the double has no device to reach "
				"it\n", i);
			continue;
		}
		if (efa_shm_name(ea, name, &namelen))
			continue;
		pthread_mutex_lock(&a->lock);
		ret = fi_av_insert(a->shm, name, 1, &shm_addr, 0, NULL);
		if (ret == 1 && shm_addr != FI_ADDR_NOTAVAIL) {
			if (remember(a, shm_addr, ea)) {
				fi_av_remove(a->shm, &shm_addr, 1, 0);
				ret = 0;
			}
		}
		pthread_mutex_unlock(&a->lock);
		if (ret != 1) {
			FI_WARN(&efa_prov, FI_LOG_AV, "shm refused %s\n", name);
			continue;
		}
		FI_INFO(&efa_prov, FI_LOG_AV, "%s is fi_addr %llu\n", name,
			(unsigned long long) shm_addr);
		if (fi_addr)
			fi_addr[i] = shm_addr;
		done++;
	}
	return done;
}

static int av_insertsvc(struct fid_av *av, const char *node,
			const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	(void) av; (void) node; (void) service; (void) fi_addr; (void) flags;
	(void) context;
	return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
			const char *service, size_t svccnt,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void) av; (void) node; (void) nodecnt; (void) service; (void) svccnt;
	(void) fi_addr; (void) flags; (void) context;
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
		     uint64_t flags)
{
	struct efa_av *a = av_of(av);
	int ret = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < count; i++) {
		if (fi_addr[i] >= a->cap || !a->tab[fi_addr[i]].used) {
			ret = -FI_EINVAL;
			break;
		}
		ret = fi_av_remove(a->shm, &fi_addr[i], 1, flags);
		if (ret)
			break;
		a->tab[fi_addr[i]].used = false;
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/* As EFA's efa_av_lookup: FI_AV_TABLE only, -FI_EINVAL for an unknown
 * address, at most 32 bytes copied, *addrlen lowered to 32 if larger. */
static int av_lookup(struct fid_av *av, fi_addr_t fi_addr, void *addr,
		     size_t *addrlen)
{
	struct efa_av *a = av_of(av);
	struct efa_ep_addr copy;

	if (a->type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (fi_addr == FI_ADDR_NOTAVAIL)
		return -FI_EINVAL;
	pthread_mutex_lock(&a->lock);
	if (fi_addr >= a->cap || !a->tab[fi_addr].used) {
		pthread_mutex_unlock(&a->lock);
		return -FI_EINVAL;
	}
	copy = a->tab[fi_addr].addr;
	pthread_mutex_unlock(&a->lock);
	copy.next = efa_garbage_ptr();
	memcpy(addr, &copy, *addrlen < EFA_EP_ADDR_LEN ? *addrlen :
	       EFA_EP_ADDR_LEN);
	if (*addrlen > EFA_EP_ADDR_LEN)
		*addrlen = EFA_EP_ADDR_LEN;
	return 0;
}

/* libfabric's FI_ADDR_EFA string form: fi_addr_efa://[GID]:QPN:QKEY */
static const char *av_straddr(struct fid_av *av, const void *addr, char *buf,
			      size_t *len)
{
	const struct efa_ep_addr *ea = addr;
	char gid[INET6_ADDRSTRLEN] = "?";
	char s[128];
	int n;

	(void) av;
	inet_ntop(AF_INET6, ea->raw, gid, sizeof(gid));
	n = snprintf(s, sizeof(s), "fi_addr_efa://[%s]:%u:%u", gid, ea->qpn,
		     ea->qkey);
	if (*len) {
		snprintf(buf, *len, "%s", s);
	}
	*len = (size_t) n + 1;
	return buf;
}

/* Nothing binds to it: no EQs in this double. */
EFA_FI_OPS(av_fi_ops, av_close, efa_no_bind, efa_no_control);

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
};

int efa_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		struct fid_av **av, void *context)
{
	struct efa_domain *d = efa_container(domain, struct efa_domain, domain);
	struct fi_av_attr shm_attr;
	struct efa_av *a;
	int ret;

	if (d->magic != EFA_MAGIC || !attr)
		return -FI_EINVAL;
	/* As efa_av_open: no names, no flags (FI_EVENT, FI_READ,
	 * FI_SYMMETRIC); every type becomes FI_AV_TABLE. */
	if (attr->name)
		return -FI_ENOSYS;
	if (attr->flags)
		return -FI_ENOSYS;
	if (attr->type == FI_AV_MAP)
		FI_INFO(&efa_prov, FI_LOG_AV, "FI_AV_MAP requested, opening "
			"FI_AV_TABLE as EFA does\n");
	attr->type = FI_AV_TABLE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -FI_ENOMEM;
	shm_attr = *attr;
	ret = fi_av_open(d->shm, &shm_attr, &a->shm, &a->av.fid);
	if (ret) {
		free(a);
		return ret;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->domain = d;
	a->type = FI_AV_TABLE;
	efa_fid_init(&a->av.fid, &a->magic, FI_CLASS_AV, context, &av_fi_ops);
	a->av.ops = &av_ops;
	*av = &a->av;
	return 0;
}
