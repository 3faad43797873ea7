/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The provider: its registration, EFA addresses and their shm names, and
 * fi_getinfo, which asks shm for what it can do and answers as EFA RDM.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "efa.h"

/* libfabric prefers the provider of the higher version among those of one
 * name (ofi_insert_prov). Built-in providers are 100 * major + minor (117.0
 * on 1.17, 2xx on 2.x); this one is above any of them. */
#define EFA_DOUBLE_VERSION FI_VERSION(9999, 0)

struct fi_provider efa_prov = {
	.version = EFA_DOUBLE_VERSION,
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = "efa",
	.getinfo = efa_getinfo,
	.fabric = efa_fabric_open,
};

FI_EXT_INI
{
	return &efa_prov;
}

/* ---- addresses ---- */

/* One GID for the host, the same in every process: a link-local IPv6
 * address whose interface half is a hash of the host's name. */
void efa_host_gid(uint8_t gid[16])
{
	char host[256] = "";
	uint64_t h = 14695981039346656037ull;

	gethostname(host, sizeof(host) - 1);
	for (const char *p = host; *p; p++)
		h = (h ^ (uint8_t) *p) * 1099511628211ull;
	memset(gid, 0, 16);
	gid[0] = 0xfe;
	gid[1] = 0x80;
	for (int i = 0; i < 8; i++)
		gid[8 + i] = (uint8_t) (h >> (56 - 8 * i));
}

/* A fresh endpoint address: QPN unique in the process (and likely on the
 * host), QKEY unique on the host. Real EFA's QKEY is random; this one is
 * the process id and the endpoint's number, so that the shm regions named
 * after it, which a crashed process leaves in /dev/shm, can be told to be
 * garbage (tests/harness clears them). */
void efa_new_addr(struct efa_ep_addr *addr)
{
	static uint32_t next_qp;
	uint32_t n = __atomic_fetch_add(&next_qp, 1, __ATOMIC_RELAXED);

	memset(addr, 0, sizeof(*addr));
	efa_host_gid(addr->raw);
	addr->qpn = (uint16_t) (((uint32_t) getpid() * 64 + n) % 0xfffe + 1);
	addr->qkey = (uint32_t) getpid() << 8 | (n & 0xff);
	addr->next = efa_garbage_ptr();
}

/* Real EFA copies addresses with an uninitialised pointer in them: every
 * copy here gets a different non-NULL value that faults if followed. */
struct efa_ep_addr *efa_garbage_ptr(void)
{
	static uint64_t n;
	uint64_t c = __atomic_add_fetch(&n, 1, __ATOMIC_RELAXED);

	return (struct efa_ep_addr *) (uintptr_t)
		(0xefa0000000000008ull | (c & 0xffffffffffull) << 4);
}

/* The shm endpoint name real EFA derives from an address (efa_shm.c):
 * "GID_QPN_QKEY_UID". */
int efa_shm_name(const struct efa_ep_addr *addr, char *name, size_t *len)
{
	char gid[INET6_ADDRSTRLEN];
	int n;

	if (!inet_ntop(AF_INET6, addr->raw, gid, sizeof(gid)))
		return -FI_EINVAL;
	n = snprintf(name, *len, "%s_%04x_%08x_%04x", gid, addr->qpn,
		     addr->qkey, (unsigned) getuid());
	if (n <= 0 || (size_t) n >= *len)
		return -FI_EINVAL;
	*len = (size_t) n + 1;
	return 0;
}

/* ---- fid translation and stubs ---- */

#define INNER(type, field, fid) ({					\
		type *o_ = efa_container(fid, type, field);		\
		o_->magic == EFA_MAGIC ? &o_->shm->fid : NULL; })

struct fid *efa_inner(struct fid *fid)
{
	if (!fid)
		return NULL;
	switch (fid->fclass) {
	case FI_CLASS_FABRIC: return INNER(struct efa_fabric, fabric.fid, fid);
	case FI_CLASS_DOMAIN: return INNER(struct efa_domain, domain.fid, fid);
	case FI_CLASS_EP: return INNER(struct efa_ep, ep.fid, fid);
	case FI_CLASS_CQ: return INNER(struct efa_cq, cq.fid, fid);
	case FI_CLASS_CNTR: return INNER(struct efa_cntr, cntr.fid, fid);
	case FI_CLASS_AV: return INNER(struct efa_av, av.fid, fid);
	case FI_CLASS_MR: return INNER(struct efa_mr, mr.fid, fid);
	default: return NULL;
	}
}

void efa_fid_init(struct fid *fid, uint32_t *magic, size_t fclass,
		  void *context, struct fi_ops *ops)
{
	*magic = EFA_MAGIC;
	fid->fclass = fclass;
	fid->context = context;
	fid->ops = ops;
}

int efa_close(struct fid *shm, uint32_t *magic, void *obj)
{
	int ret = fi_close(shm);

	if (ret)
		return ret;
	*magic = 0;
	free(obj);
	return 0;
}

int efa_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void) fid; (void) bfid; (void) flags;
	return -FI_ENOSYS;
}

int efa_no_control(struct fid *fid, int command, void *arg)
{
	(void) fid; (void) command; (void) arg;
	return -FI_ENOSYS;
}

int efa_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		    void **ops, void *context)
{
	(void) fid; (void) name; (void) flags; (void) ops; (void) context;
	return -FI_ENOSYS;
}

bool efa_cuda_started(void)
{
	const char *s = getenv("EFA_DOUBLE_CUDA");

	return s && (!strcmp(s, "1") || !strcmp(s, "refuse"));
}

bool efa_cuda_refuses(void)
{
	const char *s = getenv("EFA_DOUBLE_CUDA");

	return s && !strcmp(s, "refuse");
}

bool efa_hmem_ep_refused(void)
{
	const char *s = getenv("EFA_DOUBLE_HMEM_EP");

	return s && !strcmp(s, "refuse");
}

/* ---- fi_getinfo ---- */

#define MR_RMA_TARGET (FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | \
		       FI_MR_RMA_EVENT)
#define ADDR_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)

/* Can these caps make the endpoint an RMA target? (fi_getinfo(3): without
 * a direction bit, every direction is implied.) */
static bool rma_target(uint64_t caps)
{
	if (!(caps & (FI_RMA | FI_ATOMIC)))
		return false;
	if (caps & (FI_REMOTE_READ | FI_REMOTE_WRITE))
		return true;
	return !(caps & (FI_READ | FI_WRITE));
}

/* The registration modes that matter for these caps (fi_mr(3)). */
static uint64_t mr_mode_for(uint64_t caps, uint64_t mode)
{
	if (!(caps & FI_HMEM))
		mode &= ~(uint64_t) FI_MR_HMEM;
	if (!rma_target(caps)) {
		if (!(mode & (FI_MR_LOCAL | FI_MR_HMEM)))
			return 0;
		mode &= ~(uint64_t) MR_RMA_TARGET;
	}
	return mode & ~(uint64_t) (EFA_MR_BASIC | EFA_MR_SCALABLE);
}

static void set_str(char **s, const char *v)
{
	free(*s);
	*s = v ? strdup(v) : NULL;
}

/* Hints for shm from the application's hints or from an info of ours: the
 * same caps minus what shm does not know, shm's names and address format,
 * and the registration mode real EFA asks shm for (efa_shm.c). */
struct fi_info *efa_shm_hints(uint32_t version, const struct fi_info *src)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	if (src) {
		h->caps = src->caps;
		h->mode = src->mode;
		if (src->tx_attr)
			*h->tx_attr = *src->tx_attr;
		if (src->rx_attr)
			*h->rx_attr = *src->rx_attr;
		if (src->ep_attr) {
			*h->ep_attr = *src->ep_attr;
			h->ep_attr->auth_key = NULL;
			h->ep_attr->auth_key_size = 0;
		}
		if (src->domain_attr) {
			*h->domain_attr = *src->domain_attr;
			h->domain_attr->name = NULL;
			h->domain_attr->auth_key = NULL;
			h->domain_attr->auth_key_size = 0;
		}
	}
	h->caps &= ~(uint64_t) (ADDR_CAPS | FI_ATOMIC);
	h->tx_attr->caps &= ~(uint64_t) (ADDR_CAPS | FI_ATOMIC);
	h->rx_attr->caps &= ~(uint64_t) (ADDR_CAPS | FI_ATOMIC);
	h->ep_attr->type = FI_EP_RDM;
	h->ep_attr->protocol = FI_PROTO_UNSPEC;
	h->ep_attr->protocol_version = 0;
	h->domain_attr->domain = NULL;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->domain_attr->mr_key_size = 0;
	h->domain_attr->mr_iov_limit = 0;
	h->domain_attr->caps = (h->domain_attr->caps & ~(uint64_t) ADDR_CAPS) |
			       FI_LOCAL_COMM;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		h->domain_attr->mr_mode = EFA_MR_BASIC;
	else
		h->domain_attr->mr_mode = FI_MR_VIRT_ADDR |
			(h->caps & FI_HMEM ? FI_MR_HMEM : 0);
	h->fabric_attr->name = strdup("shm");
	h->fabric_attr->prov_name = strdup("shm");
	if (!h->fabric_attr->name || !h->fabric_attr->prov_name) {
		fi_freeinfo(h);
		return NULL;
	}
	return h;
}

/* The shm info matching an info (or hints) of ours: shm's first answer. */
int efa_shm_info(uint32_t version, const struct fi_info *efa_info,
		 struct fi_info **shm_info)
{
	struct fi_info *hints = efa_shm_hints(version, efa_info);
	int ret;

	*shm_info = NULL;
	if (!hints)
		return -FI_ENOMEM;
	ret = fi_getinfo(version, NULL, NULL, 0, hints, shm_info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((*shm_info)->next) {
		fi_freeinfo((*shm_info)->next);
		(*shm_info)->next = NULL;
	}
	return 0;
}

#define NODATA(...) do {						\
		FI_INFO(&efa_prov, FI_LOG_CORE, __VA_ARGS__);		\
		return -FI_ENODATA;					\
	} while (0)

/* What real EFA RDM refuses before looking further (efa_user_info.c),
 * and what this double cannot do. */
static int check_hints(uint32_t version, const char *node, uint64_t flags,
		       const struct fi_info *hints)
{
	const struct fi_domain_attr *d = hints ? hints->domain_attr : NULL;
	uint8_t gid[16], want[16];
	uint64_t user_mode, need;

	efa_host_gid(gid);
	if (node && (flags & FI_SOURCE)) {
		if (inet_pton(AF_INET6, node, want) != 1 || memcmp(want, gid, 16))
			NODATA("node %s is not this host's GID\n", node);
	}
	if (!hints)
		return 0;
	if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != FI_EP_RDM)
		NODATA("only FI_EP_RDM endpoints\n");
	if (hints->addr_format != FI_FORMAT_UNSPEC &&
	    hints->addr_format != FI_ADDR_EFA)
		NODATA("address format %u is not FI_ADDR_EFA\n",
		       hints->addr_format);
	if (hints->src_addr && (hints->src_addrlen != EFA_EP_ADDR_LEN ||
				memcmp(hints->src_addr, gid, 16)))
		NODATA("src_addr is not an address of this host\n");
	if (hints->dest_addr && hints->dest_addrlen != EFA_EP_ADDR_LEN)
		NODATA("dest_addr is not an EFA address\n");
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, EFA_FABRIC_NAME))
		NODATA("fabric %s is not efa\n", hints->fabric_attr->name);
	if (hints->caps & ~(uint64_t) EFA_CAPS)
		NODATA("capabilities %#llx not supported\n", (unsigned long long)
		       (hints->caps & ~(uint64_t) EFA_CAPS));
	if ((hints->caps & FI_REMOTE_COMM) && !(hints->caps & FI_LOCAL_COMM))
		NODATA("FI_REMOTE_COMM without FI_LOCAL_COMM: real EFA then "
		       "sends everything through the device, which this double "
		       "does not have\n");
	if (hints->tx_attr && hints->tx_attr->rma_iov_limit > EFA_RMA_IOV_LIMIT)
		NODATA("rma_iov_limit above %d\n", EFA_RMA_IOV_LIMIT);
	if (!d)
		return 0;
	if (d->name && strcmp(d->name, EFA_DOMAIN_NAME))
		NODATA("domain %s is not %s\n", d->name, EFA_DOMAIN_NAME);
	if (d->caps & ~(uint64_t) (EFA_DOMAIN_CAPS))
		NODATA("domain capabilities not supported\n");
	if (d->mr_iov_limit > 1)
		NODATA("mr_iov_limit above 1\n");
	if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_TABLE &&
	    d->av_type != FI_AV_MAP)
		NODATA("AV type %d\n", d->av_type);
	if ((hints->caps & FI_HMEM) && !(d->mr_mode & FI_MR_HMEM))
		NODATA("FI_HMEM capability requires device registrations "
		       "(FI_MR_HMEM)\n");

	/* Registration modes: EFA needs FI_MR_BASIC's three bits (and
	 * FI_MR_HMEM with FI_HMEM), or FI_MR_BASIC itself. */
	user_mode = (uint64_t) d->mr_mode;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		if (user_mode != EFA_MR_UNSPEC && user_mode != EFA_MR_BASIC)
			NODATA("registration mode %#llx\n",
			       (unsigned long long) user_mode);
	} else if (user_mode & EFA_MR_BASIC) {
		if (user_mode != EFA_MR_BASIC)
			NODATA("FI_MR_BASIC with other bits\n");
	} else if (user_mode & EFA_MR_SCALABLE) {
		NODATA("FI_MR_SCALABLE is not supported\n");
	} else {
		need = mr_mode_for(hints->caps, EFA_MR_BASIC_MAP |
				   (hints->caps & FI_HMEM ? FI_MR_HMEM : 0));
		if (user_mode && (user_mode & need) != need)
			NODATA("registration mode %#llx lacks %#llx\n",
			       (unsigned long long) user_mode,
			       (unsigned long long) (need & ~user_mode));
	}
	return 0;
}

/* Our answer from shm's: EFA's names, address, registration mode and
 * capabilities; shm's sizes, orders, threading and progress. */
static int efa_info_from(uint32_t version, const struct fi_info *hints,
			 const struct fi_info *shm, struct fi_info **out)
{
	const struct fi_domain_attr *hd = hints ? hints->domain_attr : NULL;
	struct fi_info *fi = fi_dupinfo(shm);
	uint64_t prov_mode, user_mode = hd ? (uint64_t) hd->mr_mode : 0;
	struct efa_ep_addr *src;

	*out = NULL;
	if (!fi)
		return -FI_ENOMEM;
	fi->next = NULL;

	/* Caps: shm's (which honoured the hints) without atomics, FI_HMEM
	 * only if asked for, and EFA's locality caps as the usual rules for
	 * primary caps give them. */
	fi->caps &= ~(uint64_t) (FI_ATOMIC | ADDR_CAPS);
	fi->tx_attr->caps &= ~(uint64_t) (FI_ATOMIC | ADDR_CAPS);
	fi->rx_attr->caps &= ~(uint64_t) (FI_ATOMIC | ADDR_CAPS);
	if (!hints || !(hints->caps & FI_HMEM)) {
		fi->caps &= ~(uint64_t) FI_HMEM;
		fi->tx_attr->caps &= ~(uint64_t) FI_HMEM;
		fi->rx_attr->caps &= ~(uint64_t) FI_HMEM;
	}
	if (hints && hints->caps)
		fi->caps |= hints->caps & ADDR_CAPS;
	else
		fi->caps |= ADDR_CAPS;

	/* Registration mode, as EFA RDM reports it (efa_user_info.c). */
	prov_mode = EFA_MR_BASIC_MAP;
	if (fi->caps & FI_HMEM)
		prov_mode |= FI_MR_HMEM;
	if (user_mode & FI_MR_LOCAL)
		prov_mode |= FI_MR_LOCAL;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)) ||
	    (user_mode & EFA_MR_BASIC)) {
		fi->domain_attr->mr_mode = EFA_MR_BASIC;
	} else {
		/* An RMA target whose hints cannot take EFA's keys and
		 * addresses is not one. */
		if (rma_target(fi->caps) && hints &&
		    (!hd || (user_mode & prov_mode & MR_RMA_TARGET) !=
			    (prov_mode & MR_RMA_TARGET))) {
			fi->caps &= ~(uint64_t) (FI_REMOTE_READ | FI_REMOTE_WRITE);
			fi->rx_attr->caps &= ~(uint64_t) (FI_REMOTE_READ |
							  FI_REMOTE_WRITE);
		}
		if (hd && (user_mode & prov_mode) != prov_mode)
			prov_mode = mr_mode_for(fi->caps, prov_mode & user_mode);
		fi->domain_attr->mr_mode = (int) prov_mode;
	}

	fi->mode = shm->mode;
	fi->handle = hints ? hints->handle : NULL;
	fi->addr_format = FI_ADDR_EFA;
	free(fi->src_addr);
	free(fi->dest_addr);
	fi->src_addr = fi->dest_addr = NULL;
	fi->src_addrlen = fi->dest_addrlen = 0;
	src = calloc(1, EFA_EP_ADDR_LEN);
	if (!src)
		goto nomem;
	efa_host_gid(src->raw);
	fi->src_addr = src;
	fi->src_addrlen = EFA_EP_ADDR_LEN;
	if (hints && hints->dest_addr) {
		fi->dest_addr = malloc(EFA_EP_ADDR_LEN);
		if (!fi->dest_addr)
			goto nomem;
		memcpy(fi->dest_addr, hints->dest_addr, EFA_EP_ADDR_LEN);
		fi->dest_addrlen = EFA_EP_ADDR_LEN;
	}
	if (fi->nic) {
		fi_close(&fi->nic->fid);
		fi->nic = NULL;
	}

	fi->fabric_attr->fabric = NULL;
	set_str(&fi->fabric_attr->name, EFA_FABRIC_NAME);
	set_str(&fi->fabric_attr->prov_name, NULL);	/* libfabric's to set */
	fi->fabric_attr->prov_version = efa_prov.version;
	fi->fabric_attr->api_version = version;
	if (!fi->fabric_attr->name)
		goto nomem;

	fi->domain_attr->domain = NULL;
	set_str(&fi->domain_attr->name, EFA_DOMAIN_NAME);
	if (!fi->domain_attr->name)
		goto nomem;
	fi->domain_attr->caps = hd && hd->caps ? hd->caps & EFA_DOMAIN_CAPS :
				fi->caps & EFA_DOMAIN_CAPS;
	fi->domain_attr->mr_key_size = EFA_MR_KEY_SIZE;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->av_type = hd && hd->av_type != FI_AV_UNSPEC ?
				   hd->av_type : FI_AV_TABLE;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_EFA;
	fi->ep_attr->protocol_version = EFA_PROTOCOL_VERSION;
	if (fi->tx_attr->rma_iov_limit > EFA_RMA_IOV_LIMIT)
		fi->tx_attr->rma_iov_limit = EFA_RMA_IOV_LIMIT;
	*out = fi;
	return 0;
nomem:
	fi_freeinfo(fi);
	return -FI_ENOMEM;
}

int efa_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints,
		struct fi_info **info)
{
	struct fi_info *shm;
	int ret;

	(void) service;
	*info = NULL;
	ret = check_hints(version, node, flags, hints);
	if (ret)
		return ret;
	ret = efa_shm_info(version, hints, &shm);
	if (ret) {
		FI_INFO(&efa_prov, FI_LOG_CORE, "shm has nothing for these "
			"hints: %s\n", fi_strerror(-ret));
		return -FI_ENODATA;
	}
	ret = efa_info_from(version, hints, shm, info);
	fi_freeinfo(shm);
	return ret;
}
