/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A registration tagged FI_HMEM_CUDA, in a domain of this entry opened
 * through fabric_open (libfabric's own fi_fabric: the library does not
 * wrap it). Providers refuse it with -FI_ENOSYS, before looking at the
 * memory, where libfabric's CUDA support did not start (util's
 * ofi_mr_regattr, efa's): Debian's shm, built without CUDA, grants FI_HMEM
 * all the same. Any other answer means CUDA support is there. The buffer
 * is one host byte of ours, local access only, so no device memory is
 * allocated and no context made for the probe.
 */
#include <sys/uio.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "hml_probe.h"

bool hml_registers_cuda(hml_fabric_fn fabric_open, const struct fi_info *info)
{
	static char byte;
	struct iovec iov = { &byte, 1 };
	union {
		struct fi_mr_attr attr;
		char space[256];	/* newer layouts are longer */
	} u = { .attr = {
		.mr_iov = &iov, .iov_count = 1, .access = FI_SEND | FI_RECV,
		.iface = FI_HMEM_CUDA,
	} };
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_mr *mr;
	int ret;

	if (fabric_open(info->fabric_attr, &fabric, NULL))
		return false;
	ret = fi_domain(fabric, (struct fi_info *) info, &domain, NULL);
	if (!ret) {
		ret = fi_mr_regattr(domain, &u.attr, 0, &mr);
		if (!ret)
			fi_close(&mr->fid);
		fi_close(&domain->fid);
		ret = ret == -FI_ENOSYS ? ret : 0;
	}
	fi_close(&fabric->fid);
	return !ret;
}
