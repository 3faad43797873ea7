/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A device reset under hmemloop: cuDevicePrimaryCtxReset destroys the
 * primary context with every stream made in it, hmemloop's included, and
 * the primary context hmemloop retained for VMM memory. After it, and a
 * new context, a same-process fi_write of device memory must work:
 *   1. before any reset, on cuMemAlloc and on VMM memory;
 *   2. after a reset, in the primary context retained again;
 *   3. after another, in a context of the application's own, on VMM
 *      memory (whose copies run in the primary context, which nobody
 *      retained again).
 */
#include <stdio.h>
#include <string.h>

#include "hmltest.h"

#define LEN	4096
#define VMM	(2 << 20)		/* the double's and GPUs' granularity */

struct pair {
	struct t_fabric f;
	struct t_ep a, b;
	fi_addr_t to_b;
};

static void *vmm_alloc(CUdevice dev)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { CU_MEM_LOCATION_TYPE_DEVICE, dev },
	};
	CUmemAccessDesc access = {
		.location = { CU_MEM_LOCATION_TYPE_DEVICE, dev },
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	CUmemGenericAllocationHandle h;
	CUdeviceptr p;

	t_cu(cuMemCreate(&h, VMM, &prop, 0));
	t_cu(cuMemAddressReserve(&p, VMM, 0, 0, 0));
	t_cu(cuMemMap(p, VMM, 0, h, 0));
	t_cu(cuMemSetAccess(p, VMM, &access, 1));
	return (void *) (uintptr_t) p;
}

/* One fi_write from src to dst, both device memory; the bytes checked. */
static void write_once(struct pair *p, void *src, void *dst, unsigned seed,
		       const char *what)
{
	static char host[LEN];
	struct t_mr ms, md;
	int ctx;

	t_fill(host, LEN, seed);
	t_dev_put(src, host, LEN);
	t_reg(&p->f, src, LEN, FI_WRITE, 0, &ms);
	t_reg(&p->f, dst, LEN, FI_REMOTE_WRITE, 1, &md);
	t_post(p->a.cq, fi_write(p->a.ep, src, LEN, ms.desc, p->to_b,
				 t_raddr(&p->f, &md, 0), md.key, &ctx));
	t_expect(p->a.cq, &ctx, FI_WRITE, (size_t) -1);
	memset(host, 0, LEN);
	t_dev_get(host, dst, LEN);
	t_assert(t_check(host, LEN, seed), "%s: wrong bytes", what);
	t_fi(fi_close(&ms.mr->fid));
	t_fi(fi_close(&md.mr->fid));
	t_ok("%s", what);
}

static struct pair p;
static CUdevice dev;

static void alloc(void)
{
	write_once(&p, t_dev_alloc(LEN), t_dev_alloc(LEN), 1,
		   "fi_write, cuMemAlloc memory");
}

static void vmm(void)
{
	write_once(&p, vmm_alloc(dev), vmm_alloc(dev), 2,
		   "fi_write, VMM memory");
}

static void reset_primary(void)
{
	CUcontext ctx;

	t_cu(cuDevicePrimaryCtxReset(dev));
	t_cu(cuDevicePrimaryCtxRetain(&ctx, dev));
	t_cu(cuCtxSetCurrent(ctx));
	write_once(&p, t_dev_alloc(LEN), t_dev_alloc(LEN), 3,
		   "after cuDevicePrimaryCtxReset, in the primary context "
		   "again: fi_write, cuMemAlloc memory");
}

static void reset_own(void)
{
	CUcontext ctx;

	t_cu(cuDevicePrimaryCtxReset(dev));
	t_cu(t_ctx_create(&ctx, dev));
	write_once(&p, vmm_alloc(dev), vmm_alloc(dev), 4,
		   "after another reset, in a context of its own: fi_write, "
		   "VMM memory");
}

/* In this order: each reset after what came before it. */
static const struct t_case cases[] = {
	T_CASE("alloc", alloc),
	T_CASE("vmm", vmm),
	T_CASE("reset-primary", reset_primary),
	T_CASE("reset-own", reset_own),
};

static void setup(void)
{
	t_cu(cuDeviceGet(&dev, 0));
	t_open(&p.f, NULL);
	t_ep_open(&p.a, &p.f, NULL);
	t_ep_open(&p.b, &p.f, NULL);
	p.to_b = t_insert(&p.a, p.b.name);
}

static void teardown(void)
{
	t_ep_close(&p.a);
	t_ep_close(&p.b);
	t_close(&p.f);
}

T_MAIN(cases, .flags = T_CUDA, .setup = setup, .teardown = teardown);
