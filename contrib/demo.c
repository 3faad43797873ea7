/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-demo: one process writes 1 MiB of CUDA device memory into
 * another of its device buffers with fi_write, through its own address,
 * as a checkpoint engine updating weights on one node does. Without
 * hmemloop the provider copies device memory as host memory and fails;
 * with it the CUDA driver does the copy.
 *
 *   hmemloop-demo [-p PROVIDER]          (default shm)
 *   hmemloop hmemloop-demo [-p PROVIDER]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define LEN (1 << 20)

static int fi_check(ssize_t ret, const char *what)
{
	if (ret) {
		fprintf(stderr, "%s: %s\n", what, fi_strerror((int) -ret));
		exit(2);
	}
	return ret;
}

static void cu_check(CUresult r, const char *what)
{
	const char *s = "?";

	if (r != CUDA_SUCCESS) {
		cuGetErrorString(r, &s);
		fprintf(stderr, "%s: %s\n", what, s);
		exit(2);
	}
}

/* Wait up to 5 s for the write's completion; 0 when it succeeded. */
static int wait_write(struct fid_cq *cq)
{
	struct fi_cq_entry entry;
	struct fi_cq_err_entry err = { 0 };
	time_t end = time(NULL) + 5;
	ssize_t ret;

	while ((ret = fi_cq_read(cq, &entry, 1)) == -FI_EAGAIN)
		if (time(NULL) > end) {
			printf("no completion in 5 s\n");
			return 1;
		}
	if (ret == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) {
		printf("error completion: %s\n", fi_strerror(abs(err.err)));
		return 1;
	}
	return ret != 1;
}

int main(int argc, char **argv)
{
	const char *prov = "shm";
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *src_mr, *dst_mr;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	char name[256], *host = malloc(LEN);
	size_t namelen = sizeof(name);
	CUdeviceptr src, dst;
	CUcontext ctx;
	CUdevice dev;
	fi_addr_t self;
	uint64_t raddr;
	ssize_t ret;
	int c, ok;

	while ((c = getopt(argc, argv, "p:")) != -1)
		if (c == 'p')
			prov = optarg;

	cu_check(cuInit(0), "cuInit");
	cu_check(cuDeviceGet(&dev, 0), "cuDeviceGet");
	cu_check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	cu_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	cu_check(cuMemAlloc(&src, LEN), "cuMemAlloc");
	cu_check(cuMemAlloc(&dst, LEN), "cuMemAlloc");
	memset(host, 0xab, LEN);
	cu_check(cuMemcpyHtoD(src, host, LEN), "cuMemcpyHtoD");
	cu_check(cuMemsetD8(dst, 0, LEN), "cuMemsetD8");
	cu_check(cuCtxSynchronize(), "cuCtxSynchronize");

	/* An application that does not ask for FI_HMEM, as in issue 12328. */
	hints->caps = FI_RMA;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_LOCAL;
	hints->fabric_attr->prov_name = strdup(prov);
	fi_check(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info),
		 "fi_getinfo");
	fi_check(fi_fabric(info->fabric_attr, &fabric, NULL), "fi_fabric");
	fi_check(fi_domain(fabric, info, &domain, NULL), "fi_domain");
	fi_check(fi_endpoint(domain, info, &ep, NULL), "fi_endpoint");
	fi_check(fi_cq_open(domain, &cq_attr, &cq, NULL), "fi_cq_open");
	fi_check(fi_av_open(domain, &av_attr, &av, NULL), "fi_av_open");
	fi_check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind");
	fi_check(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind");
	fi_check(fi_enable(ep), "fi_enable");
	fi_check(fi_getname(&ep->fid, name, &namelen), "fi_getname");
	if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1)
		fi_check(-FI_EINVAL, "fi_av_insert");
	fi_check(fi_mr_reg(domain, (void *) src, LEN, FI_WRITE, 0, 1, 0, &src_mr,
			   NULL), "fi_mr_reg");
	fi_check(fi_mr_reg(domain, (void *) dst, LEN, FI_REMOTE_WRITE, 0, 2, 0,
			   &dst_mr, NULL), "fi_mr_reg");
	raddr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? dst : 0;

	printf("fi_write of 1 MiB of device memory to this process over %s: ",
	       prov);
	fflush(stdout);
	while ((ret = fi_write(ep, (void *) src, LEN, fi_mr_desc(src_mr), self,
			       raddr, fi_mr_key(dst_mr), NULL)) == -FI_EAGAIN)
		fi_cq_read(cq, NULL, 0);
	fi_check(ret, "fi_write");
	ok = !wait_write(cq);
	if (ok) {
		memset(host, 0, LEN);
		cu_check(cuMemcpyDtoH(host, dst, LEN), "cuMemcpyDtoH");
		for (size_t i = 0; i < LEN; i++)
			ok &= (unsigned char) host[i] == 0xab;
		printf("%s\n", ok ? "right bytes" : "completed, wrong bytes");
	}
	fi_close(&src_mr->fid);
	fi_close(&dst_mr->fid);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return ok ? 0 : 1;
}
