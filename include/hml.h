/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop's view of the libfabric objects an application opens.
 *
 * Objects are wrapped in place: the application keeps the provider's own
 * fid, and only its op-table pointers are pointed at per-object copies of
 * the provider's tables, embedded in the structs below. A wrapper recovers
 * its state with hml_container_of() on the table pointer it was called
 * through.
 * Provider tables are static and shared with provider-internal objects, so
 * they are never written; fids are never translated, so binds, EQ entries,
 * contexts and FI_PEER objects stay exactly as the provider made them.
 *
 * Wrappers call the provider through its saved tables, never through the
 * fid, and a pass-through forwards to the provider's op of the wrapper's
 * own name: providers call their own ops through the fid (util's CQ read
 * calls fi_cq_readfrom), so a wrapper forwarding to another op could be
 * called back by it for ever. cq.c says where it departs from this.
 *
 * Lock order. Where locks nest, the outer one comes first:
 *   track.c's share_lock > a CQ's pump lock (filter.c) > a receive
 *   queue's lock (hml_msg.h) > rxq.c's arena lock; a domain's MR map lock
 *   (mrmap.c), taken alone;
 *   an endpoint's in-flight lock (inflight.c) > a stream's lock (copy.c)
 *   > cuda.c's failed_lock;
 *   a CQ's pump lock > the CQ's lock (cqueue.c), which is never taken
 *   under a receive queue's lock;
 *   av.c's list lock > an AV's lock (hml_av.h).
 * The registry's lock (registry.c) and twin.c's lock are taken alone. No provider call is made under a receive queue's lock.
 */
#ifndef HML_H
#define HML_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "hml_cuda.h"

#define HML_EXPORT __attribute__((visibility("default")))

/* libfabric 2.0 took container_of out of rdma/fabric.h. */
#define hml_container_of(ptr, type, member) \
	((type *) ((char *) (ptr) - offsetof(type, member)))

/*
 * fid.c: a copy of a provider op table. Tables grow at their end between libfabric
 * releases, and FI_CHECK_OP() trusts their size field, so the copy keeps the
 * provider's size and room for entries newer than our headers know.
 */
#define HML_TABLE_SPACE 256
#define HML_TABLE(type) union { type ops; char space[HML_TABLE_SPACE]; }

void hml_table_copy(void *copy, const void *prov);
/* Copy the provider's table at *slot into copy, unless *slot is empty or
 * already the copy; true if the caller should now set entries and install
 * the copy. */
#define hml_table_take(slot, copy, prov) ({				\
		bool t_ = *(slot) && *(slot) != &(copy)->ops;		\
		if (t_) {						\
			(prov) = *(slot);				\
			hml_table_copy((copy), *(slot));		\
		}							\
		t_; })
#define hml_table_has(tbl, member) \
	((tbl)->size >= offsetof(__typeof__(*(tbl)), member) + sizeof((tbl)->member))
#define hml_table_set(tbl, member, fn) do {				\
		if (hml_table_has(tbl, member) && (tbl)->member)	\
			(tbl)->member = (fn);				\
	} while (0)

/* symbols.c: libfabric's symbol name@version; hml_resolve warns where it
 * is missing. */
void *hml_lookup(const char *name, const char *version);
void *hml_resolve(const char *name, const char *version);

/* interpose.c: calls forwarded into libfabric run with this raised, so that
 * the fabrics libfabric opens for itself (rxm's tcp core, efa's shm) pass
 * through unwrapped. */
extern __thread int hml_depth;
#define HML_FORWARD(call) ({ hml_depth++; __typeof__(call) r_ = (call); \
			     hml_depth--; r_; })
void *hml_entry_point(const char *name, void *sym);

/* fid.c: every wrapped object starts with this. */
struct hml_fid {
	HML_TABLE(struct fi_ops) fi;		/* installed as fid->ops */
	const struct fi_ops *prov;
	struct fid *fid;
	void (*quiesce)(void);			/* before the provider's close */
	void (*release)(struct hml_fid *h);	/* after a successful close */
};

void hml_fid_wrap(struct hml_fid *h, struct fid *fid,
		  void (*release)(struct hml_fid *h));
struct hml_fid *hml_fid_of(const struct fid *fid);

/* fabric.c */
struct hml_fabric {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_fabric) ops;
	const struct fi_ops_fabric *prov;
	uint32_t api_version;
	int neqs;			/* atomic: event queues opened */
};

void hml_fabric_wrap(struct fid_fabric *fabric);

/* twin.c: what the provider granted to the application's hints plus
 * FI_HMEM, for an entry of its answer (the application never sees it) */
struct hml_twin {
	uint64_t mr_mode;		/* the twin's registration modes */
	size_t inject_size;
};

/* domain.c */
struct hml_mrmap {
	pthread_rwlock_t lock;
	struct hml_mr **by_key, **by_desc;
	size_t nbuckets, count;
};

struct hml_domain {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_domain) ops;
	const struct fi_ops_domain *prov;
	HML_TABLE(struct fi_ops_mr) mr;
	const struct fi_ops_mr *prov_mr;
	struct fid_domain *domain;
	struct hml_fabric *fabric;
	uint64_t caps;
	uint64_t mr_mode;
	uint32_t addr_format;
	enum fi_threading threading;
	bool hmem;			/* opened with FI_HMEM the application
					 * did not ask for (hmem.c) */
	struct hml_twin twin;		/* then its entry's twin */
	struct hml_mrmap mrs;

	/* hold.c: receives kept from the provider while no one can tell */
	bool hold_ok;			/* its progress and caps allow it */
	int holds_off;			/* atomic: reasons it may not now */
	int held;			/* atomic: receives held now */
	pthread_mutex_t flush_lock;	/* one flush at a time */
	struct hml_rxq *rxqs;		/* its queues, under flush_lock */
	struct hml_domain *next_domain;	/* every domain's */
};

void hml_domain_wrap(struct hml_fabric *f, struct fid_domain *domain,
		     const struct fi_info *info, const struct hml_twin *twin);

/* cntr.c */
struct hml_cntr {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_cntr) ops;
	const struct fi_ops_cntr *prov;
	struct fid_cntr *cntr;
	struct hml_domain *domain;
	int events;			/* enum fi_cntr_events */
	enum fi_wait_obj wait_obj;
	bool exported;			/* atomic: FI_GETWAIT was asked */
	unsigned long bumps;		/* atomic: the shim's adds, poll.c */
};

void hml_cntr_wrap(struct hml_domain *d, struct fid_cntr *cntr,
		   const struct fi_cntr_attr *attr);
/* cntradd.c */
void hml_cntr_bump(struct hml_cntr *c, size_t bytes, bool err);
bool hml_cntr_watched(const struct hml_cntr *c);

/* poll.c */
void hml_poll_wrap(struct fid_poll *pollset);

/* cq.c: completion queues; cqueue.c: their queues of the shim's entries */
#define HML_CQ_RXQS 64
struct hml_rxq;

struct hml_cqe {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
	fi_addr_t src_addr;
	int err;			/* positive FI_E* code; 0 for success */
	size_t olen;
	int prov_errno;			/* the provider's, for its entries */
	void *err_data;			/* a copy the entry owns */
	size_t err_data_size;
};

struct hml_cq {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_cq) ops;
	const struct fi_ops_cq *prov;
	struct fid_cq *cq;
	struct hml_domain *domain;
	enum fi_cq_format format;
	size_t entry_size;
	enum fi_wait_obj wait_obj;
	enum fi_cq_wait_cond wait_cond;
	bool serial;			/* the application never reads it from
					 * two threads at once (its domain's
					 * threading) */
	int sleepers;			/* atomic: threads in sread */
	bool exported;			/* atomic: FI_GETWAIT was asked */
	bool app_signal;		/* atomic: the application's
					 * fi_cq_signal, not answered yet */

	/* cqueue.c: hmemloop's entries, oldest at head */
	pthread_mutex_t lock;
	bool pumping;			/* filter.c: one pump at a time */
	bool from;			/* the provider has readfrom */
	size_t pending;			/* atomic copy of count, read unlocked */
	struct hml_cqe *ring;
	size_t head, count, cap;
	size_t size;			/* at most this many, counting: */
	size_t reserved;		/* places taken by operations */
	void *err_data;			/* of the last error handed out */

	/* filter.c: receive queues whose posted receives complete here;
	 * while there are any, reads pass the provider's entries through
	 * their records */
	struct hml_rxq *rxqs[HML_CQ_RXQS];
	int nrxqs;			/* atomic */
};

/*
 * struct fi_cq_err_entry as API 1.20 and later lay it out, whatever the
 * headers this is built with: 1.x headers end it at err_data_size. API 1.0
 * ends it at err_data, and 1.5 at err_data_size (hml_cq_err_size).
 */
struct hml_cq_err {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
	size_t olen;
	int err;
	int prov_errno;
	void *err_data;
	size_t err_data_size;
	fi_addr_t src_addr;
};

void hml_cq_wrap(struct hml_domain *d, struct fid_cq *cq,
		 const struct fi_cq_attr *attr);
bool hml_cq_busy(struct fid *fid);
/* Where fi_cq_attr gives no size: the default of util, efa and verbs. */
#define HML_CQ_DEFAULT_SIZE 1024

/* cqueue.c */
size_t hml_cq_err_size(uint32_t api_version);
size_t hml_cq_entry_size(enum fi_cq_format format);
bool hml_cq_reserve(struct hml_cq *cq);
void hml_cq_unreserve(struct hml_cq *cq);
size_t hml_cq_room(struct hml_cq *cq);
int hml_cq_push(struct hml_cq *cq, const struct hml_cqe *e);
int hml_cq_push_reserved(struct hml_cq *cq, const struct hml_cqe *e);
ssize_t hml_cq_take(struct hml_cq *cq, void *buf, size_t count,
		    fi_addr_t *src);
bool hml_cq_take_err(struct hml_cq *cq, struct hml_cq_err *buf);

/* cqwake.c */
void hml_cq_wake(struct hml_cq *cq);
bool hml_cq_watched(const struct hml_cq *cq);

/* av.c: address vectors (hml_av.h) */
struct hml_av;

/* ep.c */
enum {
	HML_CNTR_NONE = -1,
	HML_CNTR_SEND,
	HML_CNTR_RECV,
	HML_CNTR_READ,
	HML_CNTR_WRITE,
	HML_CNTR_REMOTE_READ,
	HML_CNTR_REMOTE_WRITE,
	HML_CNTR_MAX
};

struct hml_ep {
	struct hml_fid h;
	HML_TABLE(struct fi_ops_ep) ops;
	const struct fi_ops_ep *prov_ops;
	HML_TABLE(struct fi_ops_cm) cm;
	const struct fi_ops_cm *prov_cm;
	HML_TABLE(struct fi_ops_msg) msg;
	const struct fi_ops_msg *prov_msg;
	HML_TABLE(struct fi_ops_rma) rma;
	const struct fi_ops_rma *prov_rma;
	HML_TABLE(struct fi_ops_tagged) tagged;
	const struct fi_ops_tagged *prov_tagged;

	struct fid_ep *ep;
	struct hml_domain *domain;
	struct hml_ep *base;		/* self, or the endpoint an alias names */
	struct hml_ep *sep;		/* scalable endpoint of a tx/rx context */
	struct hml_ep **rx_ctx;		/* scalable endpoint: its rx contexts */
	int rx_ctx_cnt;

	int index;			/* rx context: its index in the sep */

	uint64_t caps;
	uint64_t tx_op_flags, rx_op_flags;
	size_t inject_size;
	size_t rx_size;			/* fi_rx_attr size */
	uint32_t addr_format;
	bool addressable;		/* reached through address vectors */
	bool cuda_forbidden;
	bool opaque;			/* bound to what the shim did not wrap */

	struct hml_av *av;
	struct hml_cq *tx_cq, *rx_cq;
	uint64_t tx_cq_flags, rx_cq_flags;
	struct hml_cntr *cntr[HML_CNTR_MAX];
	struct hml_ep *srx;		/* shared receive context bound */
	struct hml_ep *sharers;		/* track.c: SRX: endpoints enabled on it */
	struct hml_ep *share_next;

	struct hml_flight {		/* inflight.c (hml_op.h): its operations
					 * not completed yet, oldest first */
		pthread_mutex_t lock;
		struct hml_op *head, *tail;
		struct hml_stream *last;/* of the newest copy queued */
		size_t count;		/* atomic */
		unsigned int gen;	/* the process's, see inflight.c */
		bool listed;
	} flight;

	struct hml_rxq *rxq;		/* track.c: created when tracking starts */
	bool early_rx;			/* recv.c: receives were posted before
					 * it: the provider holds some
					 * hmemloop never saw */

	/* registry.c */
	struct hml_ep *self_next;
	size_t namelen;
	char name[64];
};

struct hml_ep *hml_ep_wrap(struct hml_domain *d, struct fid_ep *ep,
			   const struct fi_info *info);

/* completion.c: what the initiator, an RMA target and a receive report
 * (the whole operation's: hml_op.h) */
struct hml_mr;
void hml_complete_tx(struct hml_ep *e, const struct hml_cqe *c, uint64_t flags,
		     bool inject, int cntr);
void hml_complete_rx(struct hml_ep *t, const struct hml_cqe *c, bool asked);

/* registry.c: the endpoints of this process */
void hml_self_add(struct hml_ep *e);
void hml_self_remove(struct hml_ep *e);
struct hml_ep *hml_self_find(const void *addr, size_t len, uint32_t format);
bool hml_self_is(const struct hml_ep *e, const void *addr, size_t len,
		 uint32_t format);
extern unsigned int hml_self_gen;	/* bumped on every change */

/* mr.c and mrmap.c */
struct hml_mr {
	struct hml_fid h;
	struct fid_mr *mr;
	struct hml_domain *domain;
	struct hml_ep *ep;		/* FI_MR_ENDPOINT: bound endpoint */
	struct hml_cntr *cntr;		/* FI_RMA_EVENT: bound counter */
	uint64_t cntr_flags;		/* its FI_REMOTE_READ/WRITE */
	uint64_t key;
	void *desc;
	uint64_t access;
	enum fi_hmem_iface iface;
	int device;
	int memtype;			/* atomic: enum hml_memtype, lazily */
	struct hml_mem mem;		/* valid once memtype is */
	struct hml_mr *key_next, *desc_next;
	bool mapped;
	int refs;			/* atomic: the open region's, and one
					 * per operation using it */
	uint64_t len;
	size_t iov_count;
	struct iovec iov[];
};

/* libfabric 1.20's FI_MR_DMABUF, which older headers lack. */
#define HML_MR_DMABUF (1ULL << 40)

void hml_mr_wrap(struct hml_domain *d, struct fid_mr *mr,
		 const struct fi_mr_attr *attr, uint64_t flags);
void hml_mr_put(struct hml_mr *mr);
int hml_mrmap_init(struct hml_mrmap *m);
void hml_mrmap_fini(struct hml_mrmap *m);
void hml_mrmap_add(struct hml_mrmap *m, struct hml_mr *mr);
void hml_mrmap_del(struct hml_mrmap *m, struct hml_mr *mr);
struct hml_mr *hml_mrmap_key(struct hml_mrmap *m, uint64_t key,
			     const struct hml_ep *ep);
struct hml_mr *hml_mrmap_desc(struct hml_mrmap *m, const void *desc);

/* A one-buffer iovec, for the calls that take a buffer and a length:
 * built only on the path that needs one. */
#define HML_IOV(buf, len) (&(struct iovec) { (void *) (buf), (len) })

/* getinfo.c, twin.c and hmem.c: FI_HMEM asked for on the application's
 * behalf */
struct fi_info *hml_info_dup(const struct fi_info *info);
void hml_info_free(struct fi_info *info);
bool hml_twin_keep(const struct fi_info *entry, const struct fi_info *twin);
bool hml_twin_find(const struct fi_info *info, struct hml_twin *t);
struct fi_info *hml_hmem_domain_info(struct fi_info *info, struct hml_twin *t);
struct fi_info *hml_hmem_ep_info(const struct hml_domain *d,
				 struct fi_info *info);
bool hml_hmem_refused(struct fi_info **used, struct fi_info *info, int ret,
		      const char *call);
void hml_hmem_put(struct fi_info *used, const struct fi_info *info);
bool hml_hmem_reg(struct hml_domain *d, const struct fi_mr_attr *attr,
		  bool apps, uint64_t flags, struct fid_mr **mr);

#endif
