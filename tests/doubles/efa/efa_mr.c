/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Memory registration as EFA RDM does it (efa_mr.c): provider-chosen keys,
 * and an FI_HMEM_CUDA (or other device) region on a domain opened without
 * FI_HMEM silently taken for host memory, with one warning in the log. The
 * region is registered with shm under the key we chose, so the key and
 * descriptor the application gets are shm's and RMA can go straight there.
 */
#include <stdlib.h>
#include <string.h>

#include "efa.h"

static int mr_close(struct fid *fid)
{
	struct efa_mr *m = efa_container(fid, struct efa_mr, mr.fid);

	return efa_close(&m->shm->fid, &m->magic, m);
}

static int mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct efa_mr *m = efa_container(fid, struct efa_mr, mr.fid);
	struct fid *inner = efa_inner(bfid);

	if (!inner)
		return -FI_EINVAL;
	return fi_mr_bind(m->shm, inner, flags);	/* counter or endpoint */
}

static int mr_control(struct fid *fid, int command, void *arg)
{
	struct efa_mr *m = efa_container(fid, struct efa_mr, mr.fid);
	int ret = fi_control(&m->shm->fid, command, arg);

	/* FI_ENABLE may settle the key and descriptor. */
	m->mr.key = m->shm->key;
	m->mr.mem_desc = m->shm->mem_desc;
	return ret;
}

EFA_FI_OPS(mr_fi_ops, mr_close, mr_bind, mr_control);

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		      uint64_t flags, struct fid_mr **mr)
{
	struct efa_domain *d = efa_container(fid, struct efa_domain, domain.fid);
	struct fi_mr_attr a;
	struct efa_mr *m;
	int ret;

	if (fid->fclass != FI_CLASS_DOMAIN || d->magic != EFA_MAGIC || !attr)
		return -FI_EINVAL;
	if (attr->iov_count > 1)
		return -FI_EINVAL;	/* mr_iov_limit is 1 */
	a = *attr;
	if (a.iface != FI_HMEM_SYSTEM && !(d->caps & FI_HMEM)) {
		FI_WARN_ONCE(&efa_prov, FI_LOG_MR, "FI_HMEM support is "
			     "disabled, assuming FI_HMEM_SYSTEM instead of %s\n",
			     fi_tostr(&attr->iface, FI_TYPE_HMEM_IFACE));
		a.iface = FI_HMEM_SYSTEM;
		memset(&a.device, 0, sizeof(a.device));
	} else if (a.iface != FI_HMEM_SYSTEM && efa_cuda_refuses()) {
		/* As EFA's ibv_reg_mr where the kernel cannot pin device
		 * pages for the NIC (no peer-memory or dmabuf support). */
		FI_INFO(&efa_prov, FI_LOG_MR, "efa double: registration of "
			"%p as %s refused\n", a.mr_iov[0].iov_base,
			fi_tostr(&a.iface, FI_TYPE_HMEM_IFACE));
		return -FI_EFAULT;
	} else if (a.iface != FI_HMEM_SYSTEM && efa_cuda_started()) {
		/* shm here cannot take it: it gets host memory, and the
		 * log says what a libfabric with CUDA would have had. */
		FI_INFO(&efa_prov, FI_LOG_MR, "efa double: registration of "
			"%p as %s, device %d\n", a.mr_iov[0].iov_base,
			fi_tostr(&a.iface, FI_TYPE_HMEM_IFACE), a.device.cuda);
		a.iface = FI_HMEM_SYSTEM;
		memset(&a.device, 0, sizeof(a.device));
	}
	/* The key is ours to choose; shm takes the one it is given. */
	a.requested_key = __atomic_fetch_add(&d->next_key, 1, __ATOMIC_RELAXED);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	ret = fi_mr_regattr(d->shm, &a, flags, &m->shm);
	if (ret) {
		free(m);
		return ret;
	}
	efa_fid_init(&m->mr.fid, &m->magic, FI_CLASS_MR, attr->context,
		     &mr_fi_ops);
	m->mr.key = m->shm->key;
	m->mr.mem_desc = m->shm->mem_desc;
	*mr = &m->mr;
	return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		   uint64_t access, uint64_t offset, uint64_t requested_key,
		   uint64_t flags, struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr = {
		.mr_iov = iov,
		.iov_count = count,
		.access = access,
		.offset = offset,
		.requested_key = requested_key,
		.context = context,
		.iface = FI_HMEM_SYSTEM,
	};

	return mr_regattr(fid, &attr, flags, mr);
}

static int mr_reg(struct fid *fid, const void *buf, size_t len,
		  uint64_t access, uint64_t offset, uint64_t requested_key,
		  uint64_t flags, struct fid_mr **mr, void *context)
{
	struct iovec iov = { (void *) buf, len };

	return mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr,
		       context);
}

struct fi_ops_mr efa_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};
