/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CQ queue's error entries (hml_cq_take_err) as each API version lays
 * out fi_cq_err_entry: 1.0 ends at err_data, 1.5 adds err_data_size (also
 * input: the application's buffer for error data), 1.20 adds src_addr.
 * Every field of the version is filled, and not a byte past its end; error
 * data goes into the application's buffer, cut to the smaller size, or
 * else the application gets the CQ's own.
 */
#include <stdlib.h>
#include <string.h>

#include "hml.h"
#include "unit.h"

#define GUARD 0xa5

/* An application's entry and the bytes after it. */
typedef union {
	struct hml_cq_err e;
	unsigned char b[sizeof(struct hml_cq_err) + 16];
} errbuf;

static char ctx;
static struct hml_fabric fabric;
static struct hml_domain domain = { .fabric = &fabric };

static void push_err(struct hml_cq *cq, int prov_errno, const char *data)
{
	struct hml_cqe e = {
		.op_context = &ctx, .flags = FI_RECV | FI_MSG, .len = 100,
		.buf = &ctx, .data = 5, .tag = 6, .src_addr = 42,
		.err = FI_ETRUNC, .olen = 7, .prov_errno = prov_errno,
	};

	if (data) {
		e.err_data_size = strlen(data);
		e.err_data = malloc(e.err_data_size);
		memcpy(e.err_data, data, e.err_data_size);
	}
	u_check(hml_cq_push(cq, &e) == 0, "push failed");
}

/* The entry read into buf, an application's of API version v, which from
 * 1.5 gives data and size for error data: true if there was one; every
 * byte past the version's layout untouched. */
static bool take(struct hml_cq *cq, uint32_t v, errbuf *buf, void *data,
		 size_t len)
{
	size_t size = hml_cq_err_size(v);
	bool got;

	memset(buf, GUARD, sizeof(*buf));
	if (!FI_VERSION_LT(v, FI_VERSION(1, 5))) {
		buf->e.err_data = data;
		buf->e.err_data_size = len;
	}
	fabric.api_version = v;
	got = hml_cq_take_err(cq, &buf->e);
	for (size_t i = size; i < sizeof(buf->b); i++)
		u_check(buf->b[i] == GUARD, "API %u.%u: byte %zu of %zu "
			"written", FI_MAJOR(v), FI_MINOR(v), i, size);
	return got;
}

static void fields(const struct hml_cq_err *e, uint32_t v, int prov_errno)
{
	u_check(e->op_context == &ctx && e->flags == (FI_RECV | FI_MSG) &&
		e->len == 100 && e->buf == &ctx && e->data == 5 &&
		e->tag == 6 && e->olen == 7 && e->err == FI_ETRUNC,
		"API %u.%u: a field differs", FI_MAJOR(v), FI_MINOR(v));
	u_check(e->prov_errno == prov_errno, "API %u.%u: prov_errno %d, "
		"expected %d", FI_MAJOR(v), FI_MINOR(v), e->prov_errno,
		prov_errno);
}

int main(void)
{
	struct hml_cq cq = { .domain = &domain, .size = 16 };
	struct hml_cqe ok = { .op_context = &ctx };
	struct fi_cq_entry entry;
	char mine[4], large[16];
	errbuf buf;

	pthread_mutex_init(&cq.lock, NULL);
	u_check(hml_cq_err_size(FI_VERSION(1, 0)) ==
		offsetof(struct hml_cq_err, err_data_size), "1.0's size");
	u_check(hml_cq_err_size(FI_VERSION(1, 5)) ==
		offsetof(struct hml_cq_err, src_addr), "1.5's size");
	u_check(hml_cq_err_size(FI_VERSION(1, 20)) ==
		sizeof(struct hml_cq_err), "1.20's size");

	/* No error at the head: nothing read. */
	hml_cq_push(&cq, &ok);
	u_check(!take(&cq, FI_VERSION(1, 20), &buf, NULL, 0),
		"an error read where a completion is first");
	u_check(buf.b[0] == GUARD, "the entry written with nothing to read");
	u_check(hml_cq_take(&cq, &entry, 1, NULL) == 1 &&
		entry.op_context == &ctx, "the completion not read");

	/* 1.0: err_data is output only; the CQ's own data. */
	push_err(&cq, -77, "ERRDATA!");
	u_check(take(&cq, FI_VERSION(1, 0), &buf, NULL, 0), "1.0: no entry");
	fields(&buf.e, FI_VERSION(1, 0), -77);
	u_check(buf.e.err_data && !memcmp(buf.e.err_data, "ERRDATA!", 8),
		"1.0: the error data not handed out");

	/* An error without data or provider errno: -err is the errno. */
	push_err(&cq, 0, NULL);
	u_check(take(&cq, FI_VERSION(1, 0), &buf, NULL, 0), "1.0: no entry");
	fields(&buf.e, FI_VERSION(1, 0), -FI_ETRUNC);
	u_check(!buf.e.err_data, "1.0: error data where there is none");

	/* 1.5: into the application's buffer, cut to its size. */
	push_err(&cq, -77, "ERRDATA!");
	u_check(take(&cq, FI_VERSION(1, 5), &buf, mine, sizeof(mine)),
		"1.5: no entry");
	fields(&buf.e, FI_VERSION(1, 5), -77);
	u_check(buf.e.err_data == mine && buf.e.err_data_size == 4 &&
		!memcmp(mine, "ERRD", 4), "1.5: not in the application's "
		"buffer, cut to 4 bytes");

	/* 1.5, a buffer larger than the data: the data's size. */
	push_err(&cq, -77, "ERRDATA!");
	u_check(take(&cq, FI_VERSION(1, 5), &buf, large, sizeof(large)),
		"1.5: no entry");
	u_check(buf.e.err_data == large && buf.e.err_data_size == 8 &&
		!memcmp(large, "ERRDATA!", 8), "1.5: not in the application's "
		"buffer, 8 bytes");

	/* 1.5, no buffer given: the CQ's own, whole. */
	push_err(&cq, -77, "ERRDATA!");
	u_check(take(&cq, FI_VERSION(1, 5), &buf, NULL, 0), "1.5: no entry");
	u_check(buf.e.err_data && buf.e.err_data != mine &&
		buf.e.err_data_size == 8 &&
		!memcmp(buf.e.err_data, "ERRDATA!", 8),
		"1.5: the CQ's error data not handed out whole");

	/* 1.20: src_addr too; a buffer given and no data: it stays the
	 * application's, empty. */
	push_err(&cq, 0, NULL);
	u_check(take(&cq, FI_VERSION(1, 20), &buf, mine, sizeof(mine)),
		"1.20: no entry");
	fields(&buf.e, FI_VERSION(1, 20), -FI_ETRUNC);
	u_check(buf.e.src_addr == 42, "1.20: src_addr %lu, expected 42",
		(unsigned long) buf.e.src_addr);
	u_check(buf.e.err_data == mine && buf.e.err_data_size == 0,
		"1.20: the application's buffer not kept, empty");

	u_check(cq.count == 0, "%zu entries left", cq.count);
	free(cq.err_data);
	free(cq.ring);
	return u_done("CQ error entries for API 1.0, 1.5 and 1.20");
}
