/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_HMEM on the application's behalf, after fi_getinfo (getinfo.c): the
 * domains and endpoints opened from an entry whose FI_HMEM twin was kept
 * (twin.c) are opened with FI_HMEM, and their registrations of device
 * memory, which the application makes as host memory, name their memory
 * (FI_HMEM_CUDA and the device), so that the provider's copies between
 * processes are device copies. The shim's own objects keep the
 * application's info, and so its limits: its same-process copies are
 * unchanged.
 */
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_log.h"

/*
 * The application's info as the provider is given it: FI_HMEM, the
 * registration mode the twin needs with it (FI_MR_HMEM: the application
 * registers device memory, as its hints said), and the twin's inject size
 * where it is smaller. shm's FI_HMEM entry has 0 and shm refuses more at
 * fi_domain and fi_endpoint, though its injects copy through its own
 * buffers whatever the endpoint was given. Everything else is the
 * application's own.
 */
static struct fi_info *given(struct fi_info *info, const struct hml_twin *t)
{
	struct fi_info *p = hml_info_dup(info);

	if (!p)
		return info;
	p->caps |= FI_HMEM;
	if (p->tx_attr) {
		p->tx_attr->caps |= FI_HMEM;
		if (p->tx_attr->inject_size > t->inject_size)
			p->tx_attr->inject_size = t->inject_size;
	}
	if (p->rx_attr)
		p->rx_attr->caps |= FI_HMEM;
	/* The twin's other modes are the entry's already (twin.c). */
	if (p->domain_attr)
		p->domain_attr->mr_mode |= (int) (t->mr_mode & FI_MR_HMEM);
	return p;
}

/* What the provider is given at fi_domain: the above where info has a
 * twin (then in *t), else info itself. */
struct fi_info *hml_hmem_domain_info(struct fi_info *info, struct hml_twin *t)
{
	if (hml_config.hmem == HML_HMEM_OFF || !info || (info->caps & FI_HMEM) ||
	    !hml_twin_find(info, t))
		return info;
	return given(info, t);
}

/* An endpoint of a domain opened with FI_HMEM is too. */
struct fi_info *hml_hmem_ep_info(const struct hml_domain *d,
				 struct fi_info *info)
{
	if (!d->hmem || !info || (info->caps & FI_HMEM))
		return info;
	return given(info, &d->twin);
}

/*
 * After the provider answered ret to an open with *used: whether to open
 * again, with the application's own info, because the provider refused
 * FI_HMEM. The application then gets what it asked for, as without
 * hmemloop; the first refusal is said.
 */
bool hml_hmem_refused(struct fi_info **used, struct fi_info *info, int ret,
		      const char *call)
{
	if (*used == info || !ret)
		return false;
	hml_info_once("%s with FI_HMEM refused by the provider (%d): opened "
		      "as the application asked", call, ret);
	hml_info_free(*used);
	*used = info;
	return true;
}

void hml_hmem_put(struct fi_info *used, const struct fi_info *info)
{
	if (used != info)
		hml_info_free(used);
}

/* How much of an fi_mr_attr an application of this API version passes:
 * hmem_data came with 1.19, page_size with 1.22, base_mr and sub_mr_cnt
 * with 2.0. */
static size_t mr_attr_size(uint32_t api)
{
	if (FI_VERSION_GE(api, FI_VERSION(2, 0)))
		return 112;
	if (FI_VERSION_GE(api, FI_VERSION(1, 22)))
		return 96;
	if (FI_VERSION_GE(api, FI_VERSION(1, 19)))
		return 88;
	return 80;
}

/* The device all of a registration's buffers are on, or -1. */
static int device_of(const struct fi_mr_attr *attr)
{
	struct hml_mem m;
	int dev = -1;

	for (size_t i = 0; i < attr->iov_count; i++) {
		if (!attr->mr_iov[i].iov_len)
			continue;
		if (hml_cuda_classify(attr->mr_iov[i].iov_base, &m) ||
		    m.type != HML_MEM_DEVICE || (dev >= 0 && m.dev != dev))
			return -1;
		dev = m.dev;
	}
	return dev;
}

/*
 * Register device memory that the application registers as host memory
 * with FI_HMEM_CUDA and its device; attr is the application's own where
 * it called fi_mr_regattr (then as long as its API version makes it), else
 * the shim's. True if it is made; false where there is nothing to name,
 * and where the provider refuses it: the application then gets the
 * registration it asked for, which worked before.
 */
bool hml_hmem_reg(struct hml_domain *d, const struct fi_mr_attr *attr,
		  bool apps, uint64_t flags, struct fid_mr **mr)
{
	union {
		struct fi_mr_attr attr;
		char space[128];
	} u = { 0 };
	int dev, ret;

	if (!d->hmem || attr->iface != FI_HMEM_SYSTEM || (flags & HML_MR_DMABUF))
		return false;
	dev = device_of(attr);
	if (dev < 0)
		return false;
	memcpy(&u, attr, apps ? mr_attr_size(d->fabric->api_version) :
			       sizeof(*attr));
	u.attr.iface = FI_HMEM_CUDA;
	u.attr.device.cuda = dev;
	ret = HML_FORWARD(d->prov_mr->regattr(&d->domain->fid, &u.attr, flags,
					      mr));
	if (ret) {
		hml_info("registration of %p (%zu buffers) on device %d "
			 "refused as FI_HMEM_CUDA (%d): made as the "
			 "application asked", attr->mr_iov[0].iov_base,
			 attr->iov_count, dev, ret);
		return false;
	}
	hml_mr_wrap(d, *mr, &u.attr, flags);
	hml_debug("registration %p of %p (%zu buffers): FI_HMEM_CUDA, "
		  "device %d", *mr, attr->mr_iov[0].iov_base, attr->iov_count,
		  dev);
	return true;
}
