/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_HMEM on the application's behalf, after fi_getinfo (getinfo.c): the
 * domains and endpoints of an entry whose FI_HMEM was hidden from the
 * application are opened with it, and their registrations of device
 * memory, which the application makes as host memory, name their memory
 * (FI_HMEM_CUDA and the device), so that the provider's copies between
 * processes are device copies. The shim's own objects keep the
 * application's view: its same-process copies are unchanged.
 */
#include <string.h>

#include <rdma/fi_errno.h>

#include "hml.h"
#include "hml_config.h"
#include "hml_log.h"

/* What the provider is given where the application's info is one whose
 * FI_HMEM getinfo.c hid, or NULL. The rule is getinfo's: its answers carry
 * FI_MR_HMEM in auto mode. */
struct fi_info *hml_hmem_domain_info(const struct fi_info *info)
{
	struct fi_info *p;

	if (hml_config.hmem == HML_HMEM_OFF || !info || (info->caps & FI_HMEM))
		return NULL;
	if (hml_config.hmem == HML_HMEM_AUTO &&
	    !(info->domain_attr && (info->domain_attr->mr_mode & FI_MR_HMEM)))
		return NULL;
	if (!hml_hmem_verified(info))
		return NULL;
	p = hml_info_dup(info);
	if (p)
		hml_hmem_caps(p, true);
	return p;
}

/* An endpoint of a domain opened with FI_HMEM is too. */
struct fi_info *hml_hmem_ep_info(const struct hml_domain *d,
				 struct fi_info *info)
{
	struct fi_info *p;

	if (!d->hmem || !info || (info->caps & FI_HMEM))
		return info;
	p = hml_info_dup(info);
	if (!p)
		return info;
	hml_hmem_caps(p, true);
	return p;
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
