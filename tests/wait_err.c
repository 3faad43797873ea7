/* SPDX-License-Identifier: BSD-2-Clause */
/* The wait test's cases, section 4: error entries. */
#include "wait.h"

static void strerror_check(struct fid_cq *cq, const struct fi_cq_err_entry *e,
			   const char *what)
{
	char buf[256] = "";
	const char *s = fi_cq_strerror(cq, e->prov_errno, e->err_data, buf,
				       sizeof(buf));

	t_assert(s && *s, "%s: fi_cq_strerror gave %s", what,
		 s ? "an empty string" : "NULL");
	t_assert(strncmp(s, "Unknown error", 13) && strcmp(s, "Success"),
		 "%s: fi_cq_strerror(prov_errno %d) gave \"%s\"", what,
		 e->prov_errno, s);
	printf("%s: err %d (%s), prov_errno %d: \"%s\"\n", what, e->err,
	       fi_strerror(e->err), e->prov_errno, s);
}

void cq_err(void)
{
	struct fx_opts o = { .await = FI_WAIT_UNSPEC };
	const char *what = "error entry, API 1.17";
	struct fi_cq_err_entry e;
	uint8_t data[64];
	void *given;
	int ctx, ctx2;
	ssize_t ret;

	if (!fx_open(&x, &o, what))
		return;
	error_queued(&x, &ctx, what);

	/* The application's buffer for error data. */
	memset(&e, 0xa5, sizeof(e));
	memset(data, 0x5a, sizeof(data));
	e.err_data = data;
	e.err_data_size = sizeof(data);
	ret = fi_cq_readerr(x.a.cq, &e, 0);
	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(e.op_context == &ctx, "%s: op_context %p, expected %p", what,
		 e.op_context, (void *) &ctx);
	t_assert(e.err > 0 && e.olen == 0, "%s: err %d, olen %zu", what,
		 e.err, e.olen);
	t_assert(e.err_data_size <= sizeof(data), "%s: err_data_size %zu from "
		 "a buffer of %zu", what, e.err_data_size, sizeof(data));
	given = e.err_data;
	for (size_t i = e.err_data_size; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: byte %zu of the error data "
			 "buffer written beyond err_data_size %zu", what, i,
			 e.err_data_size);
	strerror_check(x.a.cq, &e, what);
	expect_empty(x.a.cq, what);
	t_ok("%s: -FI_EAVAIL, then fi_cq_readerr into the application's "
	     "buffer (err_data_size %zu)", what, e.err_data_size);

	/* err_data_size 0: the provider's buffer, or none. */
	bad_write(&x, &ctx2);
	memset(&e, 0xa5, sizeof(e));
	e.err_data = data;
	e.err_data_size = 0;
	ret = fi_cq_readerr(x.a.cq, &e, 0);
	t_assert(ret == 1 && e.op_context == &ctx2, "%s: fi_cq_readerr: %zd, "
		 "context %p", what, ret, e.op_context);
	t_assert(e.err_data != data, "%s: err_data_size 0 on input, the "
		 "application's err_data %p kept (fi_cq(3): ignored on input)",
		 what, (void *) data);
	t_assert(!e.err_data_size || e.err_data, "%s: err_data_size %zu with "
		 "err_data NULL", what, e.err_data_size);
	for (size_t i = 0; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: an ignored buffer written", what);
	strerror_check(x.a.cq, &e, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: err_data_size 0: err_data %s, size %zu", what,
	     e.err_data ? "the provider's" : "NULL", e.err_data_size);
	/* Last, to see the rest first: util and sockets keep it. */
	t_assert(given == data, "%s: err_data %p on output, the "
		 "application's buffer was %p (fi_cq(3): the provider fills "
		 "it)", what, given, (void *) data);
	t_ok("%s: err_data still the application's buffer", what);
}

/*
 * An error entry of hmemloop's, read in the layout of an older or a newer
 * API version: 1.0's has no err_data_size, and its err_data is only
 * output; 1.20's ends with src_addr, FI_ADDR_NOTAVAIL here (fi_cq(3)).
 */
static void cq_err_layout(uint32_t version, size_t end)
{
	struct fx_opts o = { .version = version, .await = FI_WAIT_UNSPEC };
	union {
		struct fi_cq_err_entry e;
		uint8_t raw[T_ERR_END_1_20 + 32];
	} u;
	uint8_t data[64];
	char what[64];
	fi_addr_t src;
	ssize_t ret;
	int ctx;

	snprintf(what, sizeof(what), "error entry, API %u.%u",
		 FI_MAJOR(version), FI_MINOR(version));
	if (FI_VERSION_LT(fi_version(), version)) {
		t_case_skip("%s: libfabric %u.%u has no such API", what,
			  FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return;
	}
	if (!fx_open(&x, &o, what))
		return;
	t_assert(x.f.fabric->api_version == version, "%s: fabric api_version "
		 "%#x", what, x.f.fabric->api_version);
	error_queued(&x, &ctx, what);
	memset(&u, 0xa5, sizeof(u));
	memset(data, 0x5a, sizeof(data));
	u.e.err_data = data;
	if (end > T_ERR_END_1_0)
		u.e.err_data_size = 0;
	ret = fi_cq_readerr(x.a.cq, &u.e, 0);
	t_assert(ret == 1, "%s: fi_cq_readerr: %zd", what, ret);
	t_assert(u.e.op_context == &ctx && u.e.err > 0, "%s: context %p, err "
		 "%d", what, u.e.op_context, u.e.err);
	t_err_within(u.raw, sizeof(u.raw), end, what);
	t_assert(u.e.err_data != data, "%s: the application's err_data kept "
		 "(%s)", what, end > T_ERR_END_1_0 ? "err_data_size 0" :
		 "before 1.5 it is the provider's");
	for (size_t i = 0; i < sizeof(data); i++)
		t_assert(data[i] == 0x5a, "%s: the application's error data "
			 "buffer written", what);
	if (end == T_ERR_END_1_20) {
		memcpy(&src, u.raw + T_ERR_END_1_5, sizeof(src));
		t_assert(src == FI_ADDR_NOTAVAIL, "%s: src_addr %#lx, expected "
			 "FI_ADDR_NOTAVAIL", what, (unsigned long) src);
	}
	strerror_check(x.a.cq, &u.e, what);
	expect_empty(x.a.cq, what);
	fx_close(&x);
	t_ok("%s: -FI_EAVAIL, fi_cq_readerr wrote the %zu bytes of its layout "
	     "only", what, end);
}

void cq_err_1_4(void)
{
	cq_err_layout(V(1, 4), T_ERR_END_1_0);
}

void cq_err_1_20(void)
{
	cq_err_layout(V(1, 20), T_ERR_END_1_20);
}
