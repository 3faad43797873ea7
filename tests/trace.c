/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Traces: one "trace: " line per observable event, the same in two runs of
 * a program that do the same (tests/harness, kind diff, compares them):
 * each CQ entry the wait helpers read, each call t_fi and t_post check,
 * counter values and the bytes of buffers. Pointers differ between runs,
 * so a trace prints the name the test gave an object (t_name) or a buffer
 * (t_name_buf: NAME+OFFSET), and a CQ entry only the fields its CQ's
 * format has and fi_cq(3) defines for that entry.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

struct name {
	const char *base;
	size_t n, size;		/* n elements of size bytes */
	char *name;		/* NULL once dropped */
	enum fi_cq_format format;	/* a CQ's; 0: not a CQ */
	bool device;		/* a buffer in device memory */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct name *names;
static size_t nnames, cap, mark;
/* Endpoints named, and how many were before the case that runs: a case
 * numbers its own from there, whatever an earlier one opened untraced. */
static unsigned neps, eps_mark;
static bool on, uncompared;
static int paused;

void t_trace_on(bool yes)
{
	on = yes;
}

void t_trace_pause(bool pause)
{
	paused += pause ? 1 : -1;
}

bool t_tracing(void)
{
	return on && !uncompared && !paused;
}

static void vtrace(const char *fmt, va_list ap)
{
	printf("trace: ");
	vprintf(fmt, ap);
	printf("\n");
}

void t_trace(const char *fmt, ...)
{
	va_list ap;

	if (!t_tracing())
		return;
	va_start(ap, fmt);
	vtrace(fmt, ap);
	va_end(ap);
}

/* ---- names ------------------------------------------------------------ */

/* Device memory: what the CUDA driver knows (not initialized for -H). */
static bool on_device(const void *p)
{
	unsigned int type = 0;

	return !t_host &&
	       cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				     (CUdeviceptr) (uintptr_t) p) ==
	       CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

/* The newest live name whose span holds p; with the lock held. */
static struct name *find(const void *p)
{
	const char *c = p;

	for (size_t i = nnames; i-- > 0;) {
		struct name *m = &names[i];

		if (m->name && c >= m->base &&
		    (size_t) (c - m->base) < m->n * m->size)
			return m;
	}
	return NULL;
}

/* A name for n elements of size bytes at base; a CQ's format, or -1 to keep
 * the one base has; whether it is a buffer, whose bytes are traced. */
static void add(const void *base, size_t n, size_t size, char *name,
		int format, bool buf)
{
	bool device = buf && on_device(base);
	struct name *old;

	t_assert(name, "out of memory");
	pthread_mutex_lock(&lock);
	/* A CQ named again keeps its format. */
	old = find(base);
	if (format < 0)
		format = old && old->base == (const char *) base ?
			 (int) old->format : 0;
	if (nnames == cap) {
		cap = cap ? 2 * cap : 64;
		names = realloc(names, cap * sizeof(*names));
		t_assert(names, "out of memory");
	}
	names[nnames++] = (struct name) { base, n, size, name, format,
					  device };
	pthread_mutex_unlock(&lock);
}

static char *vname(const char *fmt, va_list ap)
{
	char *s;

	return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

void t_name(const void *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add(p, 1, 1, vname(fmt, ap), -1, false);
	va_end(ap);
}

void t_name_array(const void *base, size_t n, size_t size, const char *fmt,
		  ...)
{
	va_list ap;

	va_start(ap, fmt);
	add(base, n, size, vname(fmt, ap), 0, false);
	va_end(ap);
}

void t_name_buf(const void *base, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add(base, len, 1, vname(fmt, ap), 0, true);
	va_end(ap);
}

void t_name_ep(struct t_ep *e)
{
	unsigned n;
	char *name;

	pthread_mutex_lock(&lock);
	n = neps++;
	pthread_mutex_unlock(&lock);
	t_assert(asprintf(&name, "ep%u", n) >= 0, "out of memory");
	if (e->shared_cq)
		free(name);
	else
		add(e->cq, 1, 1, name, e->format, false);
	for (int i = 0; i < 2; i++) {
		if (!e->cntr[i])
			continue;
		t_assert(asprintf(&name, "ep%u.cntr%d", n, i) >= 0,
			 "out of memory");
		add(e->cntr[i], 1, 1, name, 0, false);
	}
}

void t_unname(const void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&lock);
	for (size_t i = nnames; i-- > 0;) {
		if (names[i].name && names[i].base == (const char *) p) {
			free(names[i].name);
			names[i].name = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

void t_trace_case(const char *name)
{
	t_trace("case %s", name);
	pthread_mutex_lock(&lock);
	mark = nnames;
	eps_mark = neps;
	pthread_mutex_unlock(&lock);
}

void t_trace_case_end(void)
{
	pthread_mutex_lock(&lock);
	while (nnames > mark)
		free(names[--nnames].name);
	neps = eps_mark;
	pthread_mutex_unlock(&lock);
	uncompared = false;
	paused = 0;
}

bool t_no_oracle(const char *fmt, ...)
{
	va_list ap;

	if (t_tracing()) {
		va_start(ap, fmt);
		vtrace(fmt, ap);
		va_end(ap);
	}
	uncompared = true;
	return t_host;
}

/* p as NAME, NAME+OFF, NAME[I] or NAME[I]+OFF; NULL; or "unnamed"; with
 * the lock held. */
static const char *show(const void *p, char *buf, size_t size)
{
	const struct name *m;
	size_t off;

	if (!p)
		return "NULL";
	m = find(p);
	if (!m)
		return "unnamed";
	off = (const char *) p - m->base;
	if (m->size == 1 || m->n == 1)
		snprintf(buf, size, off ? "%s+%zu" : "%s", m->name, off);
	else
		snprintf(buf, size, off % m->size ? "%s[%zu]+%zu" : "%s[%zu]",
			 m->name, off / m->size, off % m->size);
	return buf;
}

/* ---- events ----------------------------------------------------------- */

long t_trace_ret(const char *what, long ret)
{
	if (!t_tracing())
		return ret;
	if (ret < 0)
		t_trace("%s = %ld (%s)", what, ret, fi_strerror((int) -ret));
	else
		t_trace("%s = %ld", what, ret);
	return ret;
}

/* The completion flags of fi_cq(3), by name; other bits are not
 * libfabric's to report (shm leaves FI_COMPLETION, sockets bits of its
 * own) and are not traced. */
static void flag_names(uint64_t flags, char *buf, size_t size)
{
	static const struct { uint64_t bit; const char *name; } f[] = {
		{ FI_SEND, "send" }, { FI_RECV, "recv" }, { FI_MSG, "msg" },
		{ FI_TAGGED, "tagged" }, { FI_RMA, "rma" },
		{ FI_ATOMIC, "atomic" }, { FI_MULTICAST, "multicast" },
		{ FI_READ, "read" }, { FI_WRITE, "write" },
		{ FI_REMOTE_READ, "remote_read" },
		{ FI_REMOTE_WRITE, "remote_write" },
		{ FI_REMOTE_CQ_DATA, "data" }, { FI_MULTI_RECV, "multi_recv" },
		{ FI_MORE, "more" }, { FI_CLAIM, "claim" },
	};
	size_t n = 0;

	snprintf(buf, size, "0");
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (flags & f[i].bit)
			n += snprintf(buf + n, size - n, "%s%s", n ? "|" : "",
				      f[i].name);
}

/* snprintf at the end of what line holds. */
#define ADD(...) (n += snprintf(line + n, sizeof(line) - n, __VA_ARGS__))

/*
 * One entry of cq, a success (ent) or an error (err), with its source
 * where src is not NULL. Only what the CQ's format has and fi_cq(3)
 * defines for the entry: len and olen for receives (and remote CQ data),
 * buf for a receive posted with FI_MULTI_RECV (an entry that releases one
 * says so), data with FI_REMOTE_CQ_DATA, tag for a tagged receive.
 * prov_errno is the provider's own, not traced.
 */
void t_trace_cqe(struct fid_cq *cq, const struct fi_cq_tagged_entry *ent,
		 const struct fi_cq_err_entry *err, const fi_addr_t *src)
{
	struct fi_cq_tagged_entry e = ent ? *ent : (struct fi_cq_tagged_entry) {
		err->op_context, err->flags, err->len, err->buf, err->data,
		err->tag };
	bool recv = e.flags & (FI_RECV | FI_REMOTE_CQ_DATA);
	enum fi_cq_format fmt = FI_CQ_FORMAT_TAGGED;
	char line[512], a[128];
	const struct name *q;
	size_t n = 0;

	if (!t_tracing())
		return;
	pthread_mutex_lock(&lock);
	q = find(cq);
	if (q && q->format && !err)
		fmt = q->format;
	ADD("cq %s: %s ctx %s", q ? q->name : "unnamed",
	    err ? "error" : "entry", show(e.op_context, a, sizeof(a)));
	if (err)
		ADD(" err %d (%s)", err->err, fi_strerror(err->err));
	if (fmt != FI_CQ_FORMAT_CONTEXT) {
		flag_names(e.flags, a, sizeof(a));
		ADD(" flags %s", a);
		if (recv)
			ADD(" len %zu", e.len);
	}
	if (err && recv)
		ADD(" olen %zu", err->olen);
	if (fmt >= FI_CQ_FORMAT_DATA && (e.flags & FI_RECV) &&
	    (e.flags & FI_MULTI_RECV))
		ADD(" buf %s", show(e.buf, a, sizeof(a)));
	if (fmt >= FI_CQ_FORMAT_DATA && (e.flags & FI_REMOTE_CQ_DATA))
		ADD(" data %#" PRIx64, e.data);
	if (fmt == FI_CQ_FORMAT_TAGGED && (e.flags & FI_TAGGED) &&
	    (e.flags & FI_RECV))
		ADD(" tag %#" PRIx64, e.tag);
	if (src && *src == FI_ADDR_NOTAVAIL)
		ADD(" from notavail");
	else if (src)
		ADD(" from %" PRIu64, (uint64_t) *src);
	pthread_mutex_unlock(&lock);
	t_trace("%s", line);
}

/* NAME, or "unnamed", of what p is; for a line traced at once. */
static const char *name_of(const void *p, char *buf, size_t size)
{
	const char *s;

	pthread_mutex_lock(&lock);
	s = show(p, buf, size);
	if (s != buf)
		snprintf(buf, size, "%s", s);
	pthread_mutex_unlock(&lock);
	return buf;
}

void t_trace_none(struct fid_cq *cq)
{
	char a[128];

	if (t_tracing())
		t_trace("cq %s: none", name_of(cq, a, sizeof(a)));
}

void t_trace_cntr(struct fid_cntr *c)
{
	char a[128];

	if (t_tracing())
		t_trace("cntr %s: %" PRIu64 " err %" PRIu64,
			name_of(c, a, sizeof(a)), fi_cntr_read(c),
			fi_cntr_readerr(c));
}

void t_trace_bytes(const void *p, size_t n)
{
	uint8_t *bytes;
	bool device;
	char a[128];

	if (!t_tracing())
		return;
	pthread_mutex_lock(&lock);
	t_assert(find(p), "t_trace_bytes: %p is in no named buffer", p);
	device = find(p)->device;
	pthread_mutex_unlock(&lock);
	bytes = malloc(n ? n : 1);
	t_assert(bytes, "out of memory");
	if (device)
		t_dev_get(bytes, p, n);
	else
		memcpy(bytes, p, n);
	t_trace("bytes %s, %zu: crc %08x", name_of(p, a, sizeof(a)), n,
		t_crc(bytes, n));
	free(bytes);
}
