/* SPDX-License-Identifier: BSD-2-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

const char *t_prov = "tcp;ofi_rxm";
const char *t_argv0;

char *t_core_prov(void)
{
	char *name = strdup(t_prov), *semi;

	t_assert(name, "out of memory");
	if ((semi = strchr(name, ';')))
		*semi = '\0';
	return name;
}

static void vsay(const char *tag, const char *fmt, va_list ap)
{
	printf("%s: ", tag);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
}

void t_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("FAIL", fmt, ap);
	va_end(ap);
	exit(1);
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("SKIP", fmt, ap);
	va_end(ap);
	exit(T_SKIP);
}

void t_ok(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("ok", fmt, ap);
	va_end(ap);
}

long t_fi_check(long ret, const char *what, int line)
{
	t_trace_ret(what, ret);
	if (ret < 0)
		t_fail("line %d: %s: %ld (%s)", line, what, ret,
		       fi_strerror((int) -ret));
	return ret;
}

void t_init(int argc, char **argv, const char *opts)
{
	char all[64];
	int c;

	t_argv0 = argv[0];
	snprintf(all, sizeof(all), "p:c:%s", opts ? opts : "");
	while ((c = getopt(argc, argv, all)) != -1) {
		/* The program's own options may come first: read them all. */
		if (c == 'p')
			t_prov = optarg;
		else if (c == 'c')
			t_only = optarg;
		else if (c == '?')
			t_fail("usage: %s [-p PROVIDER] [-c CASE,...]", argv[0]);
	}
	optind = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static struct fi_info *hints_for(const struct t_opts *o)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = o && o->caps ? o->caps : FI_MSG | FI_TAGGED | FI_RMA;
	h->mode = o ? o->mode : 0;
	h->ep_attr->type = o && o->type ? o->type : FI_EP_RDM;
	h->domain_attr->mr_mode = o && o->mr_mode ? o->mr_mode :
		FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = o && o->threading ? o->threading :
				    FI_THREAD_SAFE;
	if (o && o->progress)
		h->domain_attr->data_progress = o->progress;
	h->fabric_attr->prov_name = strdup(t_prov);
	if (o) {
		h->tx_attr->op_flags = o->tx_op_flags;
		h->tx_attr->msg_order = h->rx_attr->msg_order = o->msg_order;
	}
	return h;
}

static int open_at(struct t_fabric *f, uint32_t version, struct fi_info *hints)
{
	int ret;

	memset(f, 0, sizeof(*f));
	ret = fi_getinfo(version, NULL, NULL, 0, hints, &f->info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA)
		return ret;
	t_fi(ret);
	t_fi(fi_fabric(f->info->fabric_attr, &f->fabric, NULL));
	t_fi(fi_domain(f->fabric, f->info, &f->domain, NULL));
	return 0;
}

int t_open_hints(struct t_fabric *f, struct fi_info *hints)
{
	return open_at(f, FI_VERSION(1, 17), hints);
}

int t_try_open(struct t_fabric *f, const struct t_opts *o)
{
	return open_at(f, o && o->version ? o->version : FI_VERSION(1, 17),
		       hints_for(o));
}

void t_open(struct t_fabric *f, const struct t_opts *o)
{
	if (t_try_open(f, o) == -FI_ENODATA)
		t_skip("provider %s is not available here with what the test "
		       "needs", t_prov);
}

void t_close(struct t_fabric *f)
{
	t_fi(fi_close(&f->domain->fid));
	t_fi(fi_close(&f->fabric->fid));
	fi_freeinfo(f->info);
}

static const struct t_opts no_opts;

/* Set min_multi where the provider takes it: shm 1.17 crashes on it before
 * fi_enable; 2.x's shm and rxm take it only before, when they make their
 * receive queues (util_srx). */
static int min_multi(struct t_ep *e, const struct t_opts *o, bool enabled)
{
	size_t n = o->min_multi;

	if (!n || enabled != (FI_MAJOR(fi_version()) < 2))
		return 0;
	return fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			 &n, sizeof(n));
}

static int bind_all(struct t_ep *e, const struct t_opts *o, const char **what)
{
	struct fi_cntr_attr cntr_attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_NONE,
	};
	int ret;

#define TRY(call) do {							\
		*what = #call;						\
		if ((ret = (call)))					\
			return ret;					\
	} while (0)
	TRY(fi_ep_bind(e->ep, &e->cq->fid, (o->cq_bind ? o->cq_bind :
				FI_TRANSMIT | FI_RECV) | o->cq_flags));
	TRY(fi_ep_bind(e->ep, &e->av->fid, 0));
	for (int i = 0; i < 2; i++) {
		if (!o->own_cntr[i])
			continue;
		t_fi(fi_cntr_open(e->f->domain, &cntr_attr, &e->cntr[i], NULL));
		TRY(fi_ep_bind(e->ep, &e->cntr[i]->fid, o->own_cntr[i]));
	}
	if (o->cntr)
		TRY(fi_ep_bind(e->ep, &o->cntr->fid, o->cntr_flags));
	if (o->srx)
		TRY(fi_ep_bind(e->ep, &o->srx->fid, 0));
	TRY(min_multi(e, o, false));
	TRY(fi_enable(e->ep));
	TRY(min_multi(e, o, true));
#undef TRY
	return 0;
}

int t_ep_try_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o,
		  const char **what)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr;
	const char *call;
	int ret;

	if (!o)
		o = &no_opts;
	if (!what)
		what = &call;
	cq_attr = (struct fi_cq_attr) {
		.format = o->cq_format ? o->cq_format : FI_CQ_FORMAT_TAGGED,
		.size = o->cq_size,
		.wait_obj = o->cq_wait,
		.wait_cond = o->cq_cond,
		.wait_set = o->wait_set,
	};
	memset(e, 0, sizeof(*e));
	e->f = f;
	*what = "fi_cq_open";
	ret = fi_cq_open(f->domain, &cq_attr, &e->cq, o->cq_context);
	if (ret)
		return ret;
	t_fi(fi_endpoint(f->domain, f->info, &e->ep, NULL));
	t_fi(fi_av_open(f->domain, &av_attr, &e->av, NULL));
	ret = bind_all(e, o, what);
	if (ret) {
		t_ep_close(e);
		memset(e, 0, sizeof(*e));
		return ret;
	}
	e->namelen = sizeof(e->name);
	t_fi(fi_getname(&e->ep->fid, e->name, &e->namelen));
	t_progress(e->cq);
	t_name_ep(e, cq_attr.format);
	return 0;
}

void t_ep_open(struct t_ep *e, struct t_fabric *f, const struct t_opts *o)
{
	const char *what;
	int ret = t_ep_try_open(e, f, o, &what);

	if (ret)
		t_fail("t_ep_open: %s: %d (%s)", what, ret, fi_strerror(-ret));
}

void t_ep_close(struct t_ep *e)
{
	t_unprogress(e->cq);
	t_unname(e->cq);
	for (int i = 0; i < 2; i++)
		t_unname(e->cntr[i]);
	t_fi(fi_close(&e->ep->fid));
	t_fi(fi_close(&e->av->fid));
	t_fi(fi_close(&e->cq->fid));
	for (int i = 0; i < 2; i++)
		if (e->cntr[i])
			t_fi(fi_close(&e->cntr[i]->fid));
}

fi_addr_t t_insert(struct t_ep *e, const void *name)
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;

	t_assert(fi_av_insert(e->av, name, 1, &addr, 0, NULL) == 1,
		 "fi_av_insert failed");
	return addr;
}

void t_reg(struct t_fabric *f, void *buf, size_t len, uint64_t access,
	   uint64_t key, struct t_mr *m)
{
	t_fi(fi_mr_reg(f->domain, buf, len, access, 0, key, 0, &m->mr, NULL));
	m->desc = fi_mr_desc(m->mr);
	m->key = fi_mr_key(m->mr);
	m->base = buf;
}

uint64_t t_raddr(const struct t_fabric *f, const struct t_mr *m, size_t off)
{
	if (f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
		return (uintptr_t) m->base + off;
	return off;
}

bool t_host;

void *t_mem_alloc(size_t n)
{
	void *p = t_host ? aligned_alloc(4096, n) : t_dev_alloc(n);

	t_assert(p, "out of memory");
	return p;
}

void t_mem_free(void *p)
{
	if (t_host)
		free(p);
	else
		t_dev_free(p);
}

void t_mem_put(void *p, const void *bytes, size_t n)
{
	if (t_host)
		memcpy(p, bytes, n);
	else
		t_dev_put(p, bytes, n);
}

void t_mem_get(void *bytes, const void *p, size_t n)
{
	if (t_host)
		memcpy(bytes, p, n);
	else
		t_dev_get(bytes, p, n);
}

void t_cu_check(CUresult r, const char *what, int line)
{
	const char *s = NULL;

	if (r == CUDA_SUCCESS)
		return;
	cuGetErrorString(r, &s);
	t_fail("line %d: %s: %d (%s)", line, what, r, s ? s : "?");
}

void t_cuda_init(void)
{
	CUcontext ctx;
	CUdevice dev;
	CUresult r;

	r = cuInit(0);
	if (r == CUDA_ERROR_NO_DEVICE)
		t_skip("no CUDA device");
	t_cu(r);
	t_cu(cuDeviceGet(&dev, 0));
	t_cu(cuDevicePrimaryCtxRetain(&ctx, dev));
	t_cu(cuCtxSetCurrent(ctx));
}

CUresult t_ctx_create(CUcontext *ctx, CUdevice dev)
{
#if CUDA_VERSION >= 13000
	return cuCtxCreate(ctx, NULL, 0, dev);
#else
	return cuCtxCreate(ctx, 0, dev);
#endif
}

void *t_dev_alloc(size_t n)
{
	CUdeviceptr p;

	t_cu(cuMemAlloc(&p, n));
	return (void *) (uintptr_t) p;
}

void t_dev_free(void *p)
{
	t_cu(cuMemFree((CUdeviceptr) (uintptr_t) p));
}

void t_dev_put(void *dev, const void *host, size_t n)
{
	t_cu(cuMemcpyHtoD((CUdeviceptr) (uintptr_t) dev, host, n));
	t_cu(cuCtxSynchronize());
}

/* No synchronization first: a copy still in flight must show. */
void t_dev_get(void *host, const void *dev, size_t n)
{
	t_cu(cuMemcpyDtoH(host, (CUdeviceptr) (uintptr_t) dev, n));
}

static uint8_t pattern(size_t i, unsigned seed)
{
	uint32_t x = (uint32_t) i * 2654435761u + seed * 40503u + seed;

	return (uint8_t) (x >> 13 ^ x);
}

void t_fill(void *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *) buf)[i] = pattern(i, seed);
}

bool t_check(const void *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *) buf)[i] != pattern(i, seed))
			return false;
	return true;
}

uint32_t t_crc(const void *buf, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= ((const uint8_t *) buf)[i];
		for (int k = 0; k < 8; k++)
			c = c >> 1 ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

void t_err_within(const void *raw, size_t size, size_t end, const char *what)
{
	const uint8_t *p = raw;

	for (size_t i = end; i < size; i++) {
#if FI_MAJOR_VERSION >= 2
		/* The inline fi_cq_readerr of 2.x headers sets src_addr,
		 * whatever the API version. */
		if (i >= T_ERR_END_1_5 && i < T_ERR_END_1_20)
			continue;
#endif
		t_assert(p[i] == 0xa5, "%s: byte %zu of the error entry "
			 "written, beyond the %zu bytes of its layout", what, i,
			 end);
	}
}

const char *t_outcome_name(int o)
{
	switch (o) {
	case T_OK: return "success";
	case T_ERR_CQE: return "error completion";
	case T_NO_CQE: return "no completion";
	case T_BAD_BYTES: return "wrong bytes";
	case T_POST_ERR: return "post failed";
	case T_CRASH: return "crash";
	default: return "test failure";
	}
}
