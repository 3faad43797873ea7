/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An application as in libfabric issue 12328: FI_MR_HMEM in its hints
 * (with -n, not even that), no FI_HMEM, device memory registered as
 * ordinary memory. tests/hmem-hints runs it under each HMEMLOOP_HMEM and
 * reads what hmemloop and the provider logged; this program checks what
 * the application sees: through every symbol version of fi_getinfo the
 * library has, the answer libfabric itself gives (whatever hmemloop asked
 * the provider), registrations that succeed, and a same-process fi_write
 * and fi_inject of device memory with the right bytes (hmemloop's own
 * copy, within the limits the application was given, whatever the
 * provider was given).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN (64 * 1024)

static const char *const versions[] = {
	"FABRIC_1.0", "FABRIC_1.1", "FABRIC_1.2", "FABRIC_1.3", "FABRIC_1.7",
	"FABRIC_1.8", "FABRIC_1.9",
};

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
			  const struct fi_info *, struct fi_info **);

/* Fail at the first line where two fi_tostr texts differ. */
static void same_text(const char *a, const char *b, const char *how, int n)
{
	size_t la, lb;

	for (;; a += la + 1, b += lb + 1) {
		la = strcspn(a, "\n");
		lb = strcspn(b, "\n");
		t_assert(la == lb && !memcmp(a, b, la),
			 "%s: entry %d is not libfabric's own: \"%.*s\" "
			 "through hmemloop, \"%.*s\" from libfabric", how, n,
			 (int) la, a, (int) lb, b);
		if (!a[la])
			return;
	}
}

/* The answer through hmemloop is libfabric's own: the same entries, in
 * the same order, each printed the same by fi_tostr (every attribute). */
static void same_answer(struct fi_info *app, struct fi_info *own,
			const char *how)
{
	int n = 0;

	for (; app && own; app = app->next, own = own->next, n++) {
		char *a = strdup(fi_tostr(app, FI_TYPE_INFO));

		t_assert(a, "out of memory");
		same_text(a, fi_tostr(own, FI_TYPE_INFO), how, n);
		free(a);
	}
	t_assert(!app && !own, "%s: %s entries than libfabric's own answer",
		 how, app ? "more" : "fewer");
}

/* Each version the library exports, as an application bound to it calls
 * it (fi_getinfo and fi_freeinfo of that version), and libfabric's own
 * fi_getinfo of that version. */
static void each_version(struct fi_info *hints)
{
	void *lib = dlopen("libfabric.so.1", RTLD_NOLOAD | RTLD_LAZY);
	int n = 0;

	t_assert(lib, "libfabric.so.1 is not loaded");
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		getinfo_fn getinfo, own_getinfo;
		void (*freeinfo)(struct fi_info *);
		struct fi_info *fi, *own;

		/* What the library has; the application's call goes to
		 * hmemloop when it is preloaded. */
		own_getinfo = dlvsym(lib, "fi_getinfo", versions[i]);
		if (!own_getinfo)
			continue;
		getinfo = dlvsym(RTLD_DEFAULT, "fi_getinfo", versions[i]);
		freeinfo = dlvsym(RTLD_DEFAULT, "fi_freeinfo", versions[i]);
		t_assert(getinfo && freeinfo, "fi_getinfo@%s", versions[i]);
		t_fi(getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi));
		t_fi(own_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints,
				 &own));
		same_answer(fi, own, versions[i]);
		freeinfo(own);
		freeinfo(fi);
		n++;
	}
	dlclose(lib);
	t_ok("fi_getinfo in %d symbol versions: libfabric's own answer", n);
}

/* FI_MR_HMEM in the hints; with -n, not even that. */
static struct t_opts o = {
	.mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		   FI_MR_PROV_KEY | FI_MR_HMEM,
};
static struct t_fabric f;
static struct t_ep a;
static fi_addr_t self;
static struct t_mr src, dst, host;
static char *buf;

static void versions_case(void)
{
	struct fi_info *hints = t_hints(&o);

	each_version(hints);
	fi_freeinfo(hints);
}

/* A same-process fi_write of device memory. */
static void write_case(void)
{
	t_fill(buf, LEN, 7);
	t_dev_put(src.base, buf, LEN);
	memset(buf, 0, LEN);
	t_dev_put(dst.base, buf, LEN);
	t_post(a.cq, fi_write(a.ep, src.base, LEN, src.desc, self,
			      t_raddr(&f, &dst, 0), dst.key, &a));
	t_expect(a.cq, &a, FI_RMA | FI_WRITE, (size_t) -1);
	t_dev_get(buf, dst.base, LEN);
	t_assert(t_check(buf, LEN, 7), "fi_write: wrong bytes at the target");
	t_ok("same-process fi_write of device memory: right bytes");
}

/* fi_inject of device memory to a receive of this process, as large as
 * libfabric tells the application it may be (its answer, which through
 * hmemloop is libfabric's own: the case versions). */
static void inject_case(void)
{
	size_t len = f.info->tx_attr->inject_size;
	int ctx;

	if (len > LEN)
		len = LEN;
	if (!len) {
		printf("note: no inject: %s's inject_size is 0\n", t_prov);
		return;
	}
	t_fill(buf, len, 9);
	t_dev_put(src.base, buf, len);
	t_post(a.cq, fi_recv(a.ep, dst.base, LEN, dst.desc, FI_ADDR_UNSPEC,
			     &ctx));
	t_post(a.cq, fi_inject(a.ep, src.base, len, self));
	t_expect(a.cq, &ctx, FI_RECV | FI_MSG, len);
	t_dev_get(buf, dst.base, len);
	t_assert(t_check(buf, len, 9), "fi_inject: wrong bytes received");
	t_ok("same-process fi_inject of %zu device bytes (inject_size): "
	     "right bytes", len);
}

static const struct t_case cases[] = {
	T_CASE("versions", versions_case),
	T_CASE("write", write_case),
	T_CASE("inject", inject_case),
};

static void no_hmem(int c, const char *arg)
{
	(void) c;
	(void) arg;
	o.mr_mode &= ~(uint64_t) FI_MR_HMEM;
}

/* The endpoint, its own address in its AV, and regions: fi_mr_reg,
 * fi_mr_regattr with FI_HMEM_SYSTEM, and host memory. */
static void setup(void)
{
	struct iovec iov;
	struct fi_mr_attr attr = {
		.mr_iov = &iov, .iov_count = 1,
		.access = FI_REMOTE_WRITE | FI_WRITE | FI_RECV,
		.requested_key = 2,
	};

	buf = malloc(LEN);
	t_assert(buf, "out of memory");
	if (t_try_open(&f, &o) == -FI_ENODATA)
		t_skip("%s: no RDM endpoint with these hints", t_prov);
	t_ep_open(&a, &f, &o);
	self = t_insert(&a, a.name);
	src.base = t_dev_alloc(LEN);
	dst.base = t_dev_alloc(LEN);
	t_reg(&f, src.base, LEN, FI_WRITE | FI_READ, 1, &src);
	iov = (struct iovec) { dst.base, LEN };
	t_fi(fi_mr_regattr(f.domain, &attr, 0, &dst.mr));
	dst.desc = fi_mr_desc(dst.mr);
	dst.key = fi_mr_key(dst.mr);
	t_reg(&f, buf, LEN, FI_WRITE | FI_READ, 3, &host);
	printf("registered: device %p and %p, host %p\n", src.base, dst.base,
	       (void *) buf);
}

static void teardown(void)
{
	t_fi(fi_close(&host.mr->fid));
	t_fi(fi_close(&dst.mr->fid));
	t_fi(fi_close(&src.mr->fid));
	t_dev_free(dst.base);
	t_dev_free(src.base);
	t_ep_close(&a);
	t_close(&f);
	free(buf);
}

T_MAIN(cases, .flags = T_CUDA, .opts = "n", .opt = no_hmem, .setup = setup,
       .teardown = teardown);
