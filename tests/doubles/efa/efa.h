/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An EFA provider double for machines without EFA: a libfabric DL provider
 * (libefa-fi.so) named "efa" that gives RDM endpoints EFA's addresses,
 * registrations and capabilities, and moves every byte through libfabric's
 * shm provider, as real EFA does between endpoints of one host.
 *
 * Proxy objects, in the manner of libfabric's hook providers: each object
 * the application sees starts with the public struct and points at the shm
 * object it stands for. Operations forward to that object, fids passed in
 * are translated, contexts are passed through untouched. An object's state
 * is always found from its fid, never from its op tables, so a library that
 * swaps the tables (hmemloop does) keeps working.
 *
 * Only public headers: those under rdma/, and rdma/providers/fi_prov.h
 * and fi_log.h.
 */
#ifndef EFA_DOUBLE_H
#define EFA_DOUBLE_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#define EFA_FABRIC_NAME "efa"
#define EFA_DOMAIN_NAME "efa0-rdm"
#define EFA_SHM_NAME_MAX 256

/* EFA's raw address: 16-byte GID, QP number, padding, QKEY, and a pointer
 * field that real EFA leaves holding whatever was there. */
struct efa_ep_addr {
	uint8_t raw[16];
	uint16_t qpn;
	uint16_t pad;
	uint32_t qkey;
	struct efa_ep_addr *next;
};
#define EFA_EP_ADDR_LEN sizeof(struct efa_ep_addr)
_Static_assert(sizeof(struct efa_ep_addr) == 32, "EFA addresses are 32 bytes");

/* What EFA RDM offers (prov/efa efa_prov_info.c, efa_user_info.c): FI_HMEM
 * only when asked for, FI_ATOMIC not at all in this double. */
#define EFA_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE |	\
		  FI_RECV | FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE |	\
		  FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV |		\
		  FI_RMA_EVENT | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_HMEM)
#define EFA_DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define EFA_MR_BASIC_MAP (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)
/* The mr_mode values of API 1.0, which libfabric 2.x headers deprecate and
 * EFA still takes (OFI_MR_BASIC, OFI_MR_SCALABLE in libfabric's ofi.h). */
#define EFA_MR_UNSPEC 0
#define EFA_MR_BASIC (1 << 0)
#define EFA_MR_SCALABLE (1 << 1)
#define EFA_MR_KEY_SIZE 4
#define EFA_RMA_IOV_LIMIT 1
#define EFA_PROTOCOL_VERSION 4

/* Every object of the double carries this after its public struct, so a
 * fid handed in can be checked before it is translated. */
#define EFA_MAGIC 0xefadb1e5u

extern struct fi_provider efa_prov;

#define efa_container(ptr, type, member) \
	((type *) ((char *) (ptr) - offsetof(type, member)))

struct efa_fabric {
	struct fid_fabric fabric;
	uint32_t magic;
	struct fid_fabric *shm;
};

struct efa_domain {
	struct fid_domain domain;
	uint32_t magic;
	struct fid_domain *shm;
	struct efa_fabric *fabric;
	uint64_t caps;			/* of the info it was opened with */
	uint64_t mr_mode;
	enum fi_av_type av_type;
	uint32_t api_version;
	uint32_t next_key;		/* atomic: the provider's MR keys */
};

struct efa_ep {
	struct fid_ep ep;
	uint32_t magic;
	struct fid_ep *shm;
	struct efa_domain *domain;
	struct efa_ep_addr addr;
	/* Default op flags: the application's (FI_SETOPSFLAG changes them)
	 * and those shm's endpoint was made with. While they agree, calls go
	 * to shm as they came; otherwise as the *msg call with our flags. */
	uint64_t tx_flags, rx_flags;
	uint64_t shm_tx_flags, shm_rx_flags;
	bool enabled;
	bool min_multi_recv_set;	/* kept: see efa_ep.c */
	size_t min_multi_recv;
};

struct efa_cq {
	struct fid_cq cq;
	uint32_t magic;
	struct fid_cq *shm;
};

struct efa_cntr {
	struct fid_cntr cntr;
	uint32_t magic;
	struct fid_cntr *shm;
};

struct efa_av_entry {
	bool used;
	struct efa_ep_addr addr;	/* its pointer field is not kept */
};

struct efa_av {
	struct fid_av av;
	uint32_t magic;
	struct fid_av *shm;
	struct efa_domain *domain;
	enum fi_av_type type;
	pthread_mutex_t lock;
	struct efa_av_entry *tab;	/* indexed by fi_addr (= shm's) */
	size_t cap;
};

struct efa_mr {
	struct fid_mr mr;
	uint32_t magic;
	struct fid_mr *shm;
};

/* efa_prov.c: the host's GID, endpoint addresses, shm names, info. */
void efa_host_gid(uint8_t gid[16]);
void efa_new_addr(struct efa_ep_addr *addr);
struct efa_ep_addr *efa_garbage_ptr(void);
int efa_shm_name(const struct efa_ep_addr *addr, char *name, size_t *len);
struct fi_info *efa_shm_hints(uint32_t version, const struct fi_info *src);
int efa_shm_info(uint32_t version, const struct fi_info *efa_info,
		 struct fi_info **shm_info);
/* The shm object behind one of our fids, or NULL if it is not ours. */
struct fid *efa_inner(struct fid *fid);

/* Fill in the fid of a new object, and its magic: it is ours from then. */
void efa_fid_init(struct fid *fid, uint32_t *magic, size_t fclass,
		  void *context, struct fi_ops *ops);

/* Close shm's object, then ours (obj, whose magic is *magic). */
int efa_close(struct fid *shm, uint32_t *magic, void *obj);

/* Stubs for operations the double does not have. */
int efa_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int efa_no_control(struct fid *fid, int command, void *arg);
int efa_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		    void **ops, void *context);

/* The fi_ops of one of the double's objects: its close, bind and control,
 * no ops_open. */
#define EFA_FI_OPS(name, close_fn, bind_fn, control_fn)			\
	static struct fi_ops name = {					\
		.size = sizeof(struct fi_ops),				\
		.close = close_fn,					\
		.bind = bind_fn,					\
		.control = control_fn,					\
		.ops_open = efa_no_ops_open,				\
	}

int efa_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints,
		struct fi_info **info);

/* efa_fabric.c */
int efa_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context);

/* efa_ep.c */
int efa_ep_open(struct fid_domain *domain, struct fi_info *info,
		struct fid_ep **ep, void *context);

/* efa_cq.c */
int efa_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **cq, void *context);
int efa_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context);

/* efa_av.c */
int efa_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		struct fid_av **av, void *context);

/* efa_mr.c */
extern struct fi_ops_mr efa_mr_ops;

/* EFA_DOUBLE_CUDA=1: act as on a libfabric whose CUDA support started
 * (device registrations accepted, logged at FI_LOG_LEVEL=info);
 * EFA_DOUBLE_CUDA=refuse: started, but the device cannot register device
 * memory (device registrations fail -FI_EFAULT). */
bool efa_cuda_started(void);
bool efa_cuda_refuses(void);
/* EFA_DOUBLE_HMEM_EP=refuse: fi_endpoint with FI_HMEM fails -FI_ENODATA,
 * as shm's does with an info none of its entries takes. */
bool efa_hmem_ep_refused(void);

#endif
