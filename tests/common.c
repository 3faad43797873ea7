/* SPDX-License-Identifier: BSD-2-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

const char *t_prov = "tcp;ofi_rxm";

char *t_core_prov(void)
{
	char *name = strdup(t_prov), *semi;

	t_assert(name, "out of memory");
	if ((semi = strchr(name, ';')))
		*semi = '\0';
	return name;
}

void t_fail(const char *fmt, ...)
{
	T_SAY("FAIL", fmt);
	exit(1);
}

void t_skip(const char *fmt, ...)
{
	T_SAY("SKIP", fmt);
	exit(T_SKIP);
}

void t_ok(const char *fmt, ...)
{
	T_SAY("ok", fmt);
}

long t_fi_check(long ret, const char *what, int line)
{
	t_trace_ret(what, ret);
	if (ret < 0)
		t_fail("line %d: %s: %ld (%s)", line, what, ret,
		       fi_strerror((int) -ret));
	return ret;
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

pid_t t_fork_peer(int *rd, int *wr)
{
	int down[2], up[2];	/* to the child, to the parent */
	pid_t pid;

	t_assert(!pipe(down) && !pipe(up), "pipe");
	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0, "fork");
	close(pid ? down[0] : down[1]);
	close(pid ? up[1] : up[0]);
	*rd = pid ? up[0] : down[0];
	*wr = pid ? down[1] : up[1];
	return pid;
}
