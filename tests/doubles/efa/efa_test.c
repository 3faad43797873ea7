/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The EFA provider double checked against what it stands for: EFA's
 * addresses, registration modes and FI_HMEM rules, host traffic between
 * endpoints of one process (two, and one with itself) with the right
 * bytes, completions and source addresses, and same-process transfers of
 * CUDA device memory failing as they do over EFA's shm path.
 *
 *	FI_PROVIDER_PATH=tests/doubles/efa/.libs \
 *		LD_LIBRARY_PATH=tests/doubles/cuda/.libs \
 *		tests/doubles/efa/efa_test -p efa
 *
 * Each part runs in a child process of its own: some crash by design, and
 * shm's clean-up at exit must not touch another part's regions.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN 8192
#define DOUBLE_VERSION FI_VERSION(9999, 0)
#define BASIC_MAP (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)

/* struct efa_ep_addr, as EFA lays it out. */
struct efa_addr {
	uint8_t gid[16];
	uint16_t qpn;
	uint16_t pad;
	uint32_t qkey;
	void *next;
};

/* ---- fi_getinfo ---- */

static struct fi_info *hints_with(uint64_t caps, uint64_t mr_mode)
{
	struct fi_info *h = fi_allocinfo();

	t_assert(h, "fi_allocinfo");
	h->caps = caps;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = (int) mr_mode;
	h->fabric_attr->prov_name = strdup(t_prov);
	return h;
}

static int getinfo(uint64_t caps, uint64_t mr_mode, struct fi_info **info)
{
	struct fi_info *h = hints_with(caps, mr_mode);
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, info);

	fi_freeinfo(h);
	return ret;
}

static void part_info(void)
{
	const uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA;
	struct fi_info *fi;
	uint64_t mode;

	/* What t_open asks for: FI_MR_LOCAL too, which EFA keeps. */
	t_fi(getinfo(caps, FI_MR_LOCAL | BASIC_MAP, &fi));
	t_assert(!fi->next, "more than one info");
	t_assert(fi->addr_format == FI_ADDR_EFA, "addr_format %u",
		 fi->addr_format);
	t_assert(fi->src_addrlen == 32, "src_addrlen %zu", fi->src_addrlen);
	t_assert(fi->ep_attr->type == FI_EP_RDM, "not RDM");
	t_assert(fi->ep_attr->protocol == FI_PROTO_EFA, "not FI_PROTO_EFA");
	t_assert(!strcmp(fi->fabric_attr->name, "efa"), "fabric %s",
		 fi->fabric_attr->name);
	t_assert(!strcmp(fi->fabric_attr->prov_name, "efa"), "provider %s",
		 fi->fabric_attr->prov_name);
	t_assert(!strcmp(fi->domain_attr->name, "efa0-rdm"), "domain %s",
		 fi->domain_attr->name);
	mode = (uint64_t) fi->domain_attr->mr_mode;
	t_assert(mode == (FI_MR_LOCAL | BASIC_MAP), "mr_mode %s",
		 fi_tostr(&fi->domain_attr->mr_mode, FI_TYPE_MR_MODE));
	t_assert(!(fi->caps & FI_HMEM), "FI_HMEM without asking");
	/* Directions come without asking, primary caps only when asked
	 * for; FI_SOURCE without asking before 2.0 (util's ofi_get_caps). */
	t_assert((fi->caps & (FI_SOURCE | FI_REMOTE_READ | FI_REMOTE_WRITE |
			      FI_READ | FI_WRITE | FI_SEND | FI_RECV)) ==
		 ((FI_MAJOR(fi_version()) < 2 ? FI_SOURCE : 0) |
		  FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE |
		  FI_SEND | FI_RECV),
		 "caps %s", fi_tostr(&fi->caps, FI_TYPE_CAPS));
	t_assert(!(fi->caps & (FI_DIRECTED_RECV | FI_LOCAL_COMM |
			       FI_REMOTE_COMM | FI_ATOMIC)),
		 "caps %s", fi_tostr(&fi->caps, FI_TYPE_CAPS));
	t_assert(fi->tx_attr->rma_iov_limit == 1, "rma_iov_limit %zu",
		 fi->tx_attr->rma_iov_limit);
	t_assert(fi->domain_attr->av_type == FI_AV_TABLE, "av_type");
	fi_freeinfo(fi);
	t_fi(getinfo(caps | FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM |
		     FI_RMA_EVENT | FI_MULTI_RECV, BASIC_MAP, &fi));
	t_assert((fi->caps & (FI_DIRECTED_RECV | FI_LOCAL_COMM |
			      FI_REMOTE_COMM | FI_RMA_EVENT)) ==
		 (FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM |
		  FI_RMA_EVENT), "caps %s", fi_tostr(&fi->caps, FI_TYPE_CAPS));
	fi_freeinfo(fi);
	t_assert(getinfo(caps | FI_REMOTE_COMM, BASIC_MAP, &fi) == -FI_ENODATA,
		 "FI_REMOTE_COMM without FI_LOCAL_COMM: the double has no "
		 "device to use");
	t_ok("info: FI_ADDR_EFA, efa / efa0-rdm, mr_mode LOCAL|VIRT_ADDR|"
	     "ALLOCATED|PROV_KEY, no FI_HMEM");

	t_fi(getinfo(caps, BASIC_MAP, &fi));
	t_assert((uint64_t) fi->domain_attr->mr_mode == BASIC_MAP,
		 "mr_mode %s without FI_MR_LOCAL in the hints",
		 fi_tostr(&fi->domain_attr->mr_mode, FI_TYPE_MR_MODE));
	fi_freeinfo(fi);
	/* FI_MR_HMEM offered without FI_HMEM: not taken. */
	t_fi(getinfo(caps, BASIC_MAP | FI_MR_HMEM | FI_MR_LOCAL, &fi));
	t_assert(!(fi->caps & FI_HMEM) &&
		 !(fi->domain_attr->mr_mode & FI_MR_HMEM),
		 "FI_HMEM or FI_MR_HMEM without FI_HMEM in the hints");
	fi_freeinfo(fi);
	/* Hints with no caps: FI_HMEM is a primary cap, never implied. */
	t_fi(getinfo(0, 0, &fi));
	t_assert(!(fi->caps & FI_HMEM), "FI_HMEM with caps 0 in the hints");
	t_assert(fi->caps & FI_RMA, "no FI_RMA with caps 0 in the hints");
	fi_freeinfo(fi);
	t_ok("mr_mode without FI_MR_LOCAL is exactly ALLOCATED|PROV_KEY|"
	     "VIRT_ADDR; FI_HMEM never unasked");

	t_fi(getinfo(caps | FI_HMEM, BASIC_MAP | FI_MR_HMEM, &fi));
	t_assert(fi->caps & FI_HMEM, "FI_HMEM asked for, not granted");
	t_assert((uint64_t) fi->domain_attr->mr_mode == (BASIC_MAP | FI_MR_HMEM),
		 "mr_mode %s with FI_HMEM",
		 fi_tostr(&fi->domain_attr->mr_mode, FI_TYPE_MR_MODE));
	fi_freeinfo(fi);
	t_assert(getinfo(caps | FI_HMEM, BASIC_MAP, &fi) == -FI_ENODATA,
		 "FI_HMEM without FI_MR_HMEM accepted");
	t_ok("FI_HMEM with FI_MR_HMEM: granted, mr_mode gains FI_MR_HMEM; "
	     "without FI_MR_HMEM: -FI_ENODATA");

	t_assert(getinfo(caps, FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED,
			 &fi) == -FI_ENODATA, "RMA without FI_MR_PROV_KEY");
	t_assert(getinfo(caps, T_MR_SCALABLE, &fi) == -FI_ENODATA,
		 "FI_MR_SCALABLE accepted");
	t_fi(getinfo(caps, T_MR_BASIC, &fi));
	t_assert(fi->domain_attr->mr_mode == T_MR_BASIC, "FI_MR_BASIC");
	fi_freeinfo(fi);
	t_assert(getinfo(caps | FI_ATOMIC, BASIC_MAP, &fi) == -FI_ENODATA,
		 "FI_ATOMIC accepted");
	t_ok("hints: no FI_MR_PROV_KEY, FI_MR_SCALABLE, FI_ATOMIC refused; "
	     "FI_MR_BASIC kept");
}

/* FI_HMEM as shm with CUDA grants it (libfabric 2.6's smr_hmem_info, the
 * same in 1.17): inject_size 0 with it, shm's 4096 without. An endpoint
 * with FI_HMEM and a larger inject_size is refused, as shm's fi_domain and
 * fi_endpoint refuse an info none of their entries takes; with
 * EFA_DOUBLE_HMEM_EP=refuse, every endpoint with FI_HMEM is. */
static void part_hmem_ep(void)
{
	const uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA;
	struct fi_info *fi, *plain;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;

	t_fi(getinfo(caps, BASIC_MAP | FI_MR_HMEM, &plain));
	t_fi(getinfo(caps | FI_HMEM, BASIC_MAP | FI_MR_HMEM, &fi));
	t_assert(plain->tx_attr->inject_size == 4096 &&
		 fi->tx_attr->inject_size == 0,
		 "inject_size %zu without FI_HMEM, %zu with it",
		 plain->tx_attr->inject_size, fi->tx_attr->inject_size);
	t_ok("inject_size 4096 without FI_HMEM, 0 with it");

	t_fi(fi_fabric(fi->fabric_attr, &fabric, NULL));
	t_fi(fi_domain(fabric, fi, &domain, NULL));
	t_fi(fi_endpoint(domain, fi, &ep, NULL));
	t_fi(fi_close(&ep->fid));
	fi->tx_attr->inject_size = plain->tx_attr->inject_size;
	t_assert(fi_endpoint(domain, fi, &ep, NULL) == -FI_ENODATA,
		 "an FI_HMEM endpoint with inject_size %zu opened",
		 fi->tx_attr->inject_size);
	fi->tx_attr->inject_size = 0;
	setenv("EFA_DOUBLE_HMEM_EP", "refuse", 1);
	t_assert(fi_endpoint(domain, fi, &ep, NULL) == -FI_ENODATA,
		 "EFA_DOUBLE_HMEM_EP=refuse: an FI_HMEM endpoint opened");
	t_fi(fi_endpoint(domain, plain, &ep, NULL));
	unsetenv("EFA_DOUBLE_HMEM_EP");
	t_fi(fi_close(&ep->fid));
	t_ok("FI_HMEM endpoint: inject_size 0 opened, 4096 refused; "
	     "EFA_DOUBLE_HMEM_EP=refuse refuses it, not one without FI_HMEM");
	t_fi(fi_close(&domain->fid));
	t_fi(fi_close(&fabric->fid));
	fi_freeinfo(fi);
	fi_freeinfo(plain);
}

/* ---- addresses ---- */

static void part_addr(void)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct efa_addr na, nb, l1, l2, l3;
	char small[8], str[128];
	struct t_fabric f;
	struct t_ep a, b;
	fi_addr_t fa, fb;
	size_t len;
	int ret;

	t_open(&f, NULL);
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	t_assert(a.namelen == 32 && b.namelen == 32, "names of %zu and %zu "
		 "bytes", a.namelen, b.namelen);
	len = sizeof(small);
	ret = fi_getname(&a.ep->fid, small, &len);
	t_assert(ret == -FI_ETOOSMALL && len == 32,
		 "getname into 8 bytes: %d, len %zu", ret, len);
	memcpy(&na, a.name, 32);
	memcpy(&nb, b.name, 32);
	t_assert(!memcmp(na.gid, nb.gid, 16), "GIDs differ");
	t_assert(na.gid[0] == 0xfe && na.gid[1] == 0x80, "not a link-local GID");
	t_assert(na.qpn != nb.qpn, "same QPN %u", na.qpn);
	t_assert(na.qkey != nb.qkey, "same QKEY %#x", na.qkey);
	t_assert(na.next && nb.next, "NULL pointer field in a name");
	t_ok("32-byte names: same GID, QPN %u/%u, QKEY %#x/%#x", na.qpn,
	     nb.qpn, na.qkey, nb.qkey);

	fb = t_insert(&a, b.name);
	fa = t_insert(&a, a.name);
	t_assert(fa != fb, "two endpoints, one fi_addr");
	len = 32;
	t_fi(fi_av_lookup(a.av, fb, &l1, &len));
	t_assert(len == 32, "lookup length %zu", len);
	len = 32;
	t_fi(fi_av_lookup(a.av, fb, &l2, &len));
	len = 64;
	t_fi(fi_av_lookup(a.av, fa, &l3, &len));
	t_assert(len == 32, "lookup into 64 bytes: length %zu", len);
	t_assert(!memcmp(&l1, &nb, 24) && !memcmp(&l2, &nb, 24) &&
		 !memcmp(&l3, &na, 24),
		 "lookup bytes 0-23 differ from the name");
	t_assert(l1.next && l2.next, "NULL pointer field in a lookup");
	t_assert(l1.next != nb.next, "pointer field same in name and lookup");
	t_assert(l1.next != l2.next, "pointer field same in two lookups");
	{
		struct efa_addr again;

		len = sizeof(again);
		t_fi(fi_getname(&b.ep->fid, &again, &len));
		t_assert(!memcmp(&again, &nb, 24), "name changed");
	}
	t_ok("lookup = name but for the pointer field, which differs "
	     "between name and lookup and between lookups");

	len = 32;
	t_assert(fi_av_lookup(a.av, fb + 100, &l1, &len) == -FI_EINVAL,
		 "lookup of an unknown fi_addr");
	len = sizeof(str);
	fi_av_straddr(a.av, &nb, str, &len);
	t_assert(!strncmp(str, "fi_addr_efa://[fe80:", 20), "straddr %s", str);
	t_fi(fi_av_remove(a.av, &fb, 1, 0));
	len = 32;
	t_assert(fi_av_lookup(a.av, fb, &l1, &len) == -FI_EINVAL,
		 "lookup after remove");
	t_ok("unknown or removed fi_addr: -FI_EINVAL; straddr %s", str);

	/* EFA opens every AV as FI_AV_TABLE. */
	{
		struct fid_av *av;

		av_attr.type = FI_AV_MAP;
		t_fi(fi_av_open(f.domain, &av_attr, &av, NULL));
		t_assert(av_attr.type == FI_AV_TABLE, "FI_AV_MAP kept");
		t_fi(fi_close(&av->fid));
	}
	t_ep_close(&a);
	t_ep_close(&b);
	t_close(&f);
}

/* ---- registration ---- */

static void part_mr(void)
{
	static char buf[2][4096];
	struct fid_mr *m1, *m2;
	struct t_fabric f;

	t_open(&f, NULL);
	/* Provider keys: the same requested key twice is no conflict. */
	t_fi(fi_mr_reg(f.domain, buf[0], sizeof(buf[0]), FI_REMOTE_WRITE, 0, 5,
		       0, &m1, NULL));
	t_fi(fi_mr_reg(f.domain, buf[1], sizeof(buf[1]), FI_REMOTE_WRITE, 0, 5,
		       0, &m2, NULL));
	t_assert(fi_mr_key(m1) != fi_mr_key(m2), "same key twice");
	t_assert(fi_mr_key(m1) != 5 && fi_mr_key(m2) != 5,
		 "the requested key was used");
	t_assert(fi_mr_desc(m1) != NULL, "no descriptor");
	t_ok("provider keys %#lx and %#lx for requested key 5",
	     (unsigned long) fi_mr_key(m1), (unsigned long) fi_mr_key(m2));
	t_fi(fi_close(&m1->fid));
	t_fi(fi_close(&m2->fid));
	t_close(&f);
}

/* FI_HMEM_CUDA on a domain without FI_HMEM: host memory, one warning. Run
 * first thing in its own process, so the log level set here applies. */
static void part_mr_cuda(void)
{
	char path[] = "/tmp/efa_test.XXXXXX", line[512];
	int fd = mkstemp(path), saved, warnings = 0;
	struct fid_mr *mr[2];
	struct t_fabric f;
	void *dev[2];
	FILE *log;

	t_assert(fd >= 0, "mkstemp");
	setenv("FI_LOG_LEVEL", "warn", 1);
	setenv("FI_LOG_PROV", t_prov, 1);
	saved = dup(2);
	dup2(fd, 2);
	t_cuda_init();
	t_open(&f, NULL);
	for (int i = 0; i < 2; i++) {
		struct iovec iov = { dev[i] = t_dev_alloc(4096), 4096 };
		struct fi_mr_attr attr = {
			.mr_iov = &iov, .iov_count = 1,
			.access = FI_SEND | FI_RECV | FI_REMOTE_WRITE,
			.iface = FI_HMEM_CUDA, .device.cuda = 0,
		};

		t_fi(fi_mr_regattr(f.domain, &attr, 0, &mr[i]));
	}
	for (int i = 0; i < 2; i++) {
		t_fi(fi_close(&mr[i]->fid));
		t_dev_free(dev[i]);
	}
	t_close(&f);
	fflush(stderr);
	dup2(saved, 2);
	log = fopen(path, "r");
	t_assert(log, "reopen log");
	while (fgets(line, sizeof(line), log))
		if (strstr(line, "FI_HMEM support is disabled, assuming "
			   "FI_HMEM_SYSTEM"))
			warnings++;
	fclose(log);
	unlink(path);
	t_assert(warnings == 1, "%d warnings for two FI_HMEM_CUDA "
		 "registrations", warnings);
	t_ok("FI_HMEM_CUDA without FI_HMEM: registered as host memory, "
	     "one warning");
}

/* ---- host traffic ---- */

struct pair {
	struct t_fabric f;
	struct t_ep a, b;	/* b is a itself in the loopback case */
	struct t_ep other;	/* inserted first, so no fi_addr is 0 */
	fi_addr_t a2b, b2a;	/* b in a's AV, a in b's AV */
	char *src, *dst;
	struct t_mr src_mr, dst_mr;
	bool self;
};

static void pair_open(struct pair *p, bool self)
{
	struct t_opts o = {
		.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV |
			FI_SOURCE,
	};

	memset(p, 0, sizeof(*p));
	p->self = self;
	t_open(&p->f, &o);
	t_assert(p->f.info->caps & FI_SOURCE, "no FI_SOURCE");
	t_ep_open(&p->other, &p->f, &o);
	t_ep_open(&p->a, &p->f, &o);
	t_insert(&p->a, p->other.name);
	if (self) {
		p->b = p->a;
		p->a2b = p->b2a = t_insert(&p->a, p->a.name);
	} else {
		t_ep_open(&p->b, &p->f, &o);
		t_insert(&p->b, p->b.name);
		t_insert(&p->b, p->other.name);
		p->a2b = t_insert(&p->a, p->b.name);
		p->b2a = t_insert(&p->b, p->a.name);
		t_assert(p->a2b != p->b2a, "fi_addr %lu both ways",
			 (unsigned long) p->a2b);
	}
	p->src = malloc(LEN);
	p->dst = malloc(LEN);
	t_reg(&p->f, p->src, LEN, FI_SEND | FI_READ | FI_WRITE | FI_RECV |
	      FI_REMOTE_READ | FI_REMOTE_WRITE, 1, &p->src_mr);
	t_reg(&p->f, p->dst, LEN, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ |
	      FI_SEND | FI_READ | FI_WRITE, 2, &p->dst_mr);
}

static void pair_close(struct pair *p)
{
	t_fi(fi_close(&p->src_mr.mr->fid));
	t_fi(fi_close(&p->dst_mr.mr->fid));
	t_ep_close(&p->a);
	if (!p->self)
		t_ep_close(&p->b);
	t_ep_close(&p->other);
	t_close(&p->f);
	free(p->src);
	free(p->dst);
}

/* A completion the test waits for. len (size_t) -1: any; from
 * FI_ADDR_UNSPEC: not checked (initiator completions have no source). */
struct want {
	void *ctx;
	uint64_t flags;
	size_t len;
	fi_addr_t from;
	uint64_t data, tag;
	bool seen;
};

static struct want W(void *ctx, uint64_t flags, size_t len, fi_addr_t from,
		     uint64_t data, uint64_t tag)
{
	return (struct want) { .ctx = ctx, .flags = flags, .len = len,
			       .from = from, .data = data, .tag = tag };
}

/* Read completions through fi_cq_readfrom until each of n wants is met,
 * in any order (a loopback has one CQ for both sides). */
static void expect_all(const char *what, struct fid_cq *cq, struct want *w,
		       int n)
{
	for (int got = 0; got < n;) {
		struct fi_cq_tagged_entry ent;
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		ssize_t ret;
		int i;

		for (long spin = 0;; spin++) {
			ret = fi_cq_readfrom(cq, &ent, 1, &src);
			if (ret != -FI_EAGAIN || spin > 20000000)
				break;
			t_drive(cq);
		}
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(cq, &err, 0);
			t_fail("%s: error completion %d (%s)", what, err.err,
			       fi_strerror(err.err < 0 ? -err.err : err.err));
		}
		t_assert(ret == 1, "%s: fi_cq_readfrom: %zd", what, ret);
		for (i = 0; i < n; i++)
			if (!w[i].seen && w[i].ctx == ent.op_context &&
			    (ent.flags & w[i].flags) == w[i].flags)
				break;
		t_assert(i < n, "%s: unexpected completion: context %p flags "
			 "%#lx", what, ent.op_context, (unsigned long) ent.flags);
		w[i].seen = true;
		got++;
		t_assert(w[i].len == (size_t) -1 || ent.len == w[i].len,
			 "%s: len %zu, expected %zu", what, ent.len, w[i].len);
		t_assert(w[i].from == FI_ADDR_UNSPEC || src == w[i].from,
			 "%s: source fi_addr %lu, expected %lu", what,
			 (unsigned long) src, (unsigned long) w[i].from);
		if (w[i].flags & FI_REMOTE_CQ_DATA)
			t_assert(ent.data == w[i].data, "%s: data %#lx", what,
				 (unsigned long) ent.data);
		if ((w[i].flags & (FI_TAGGED | FI_RECV)) ==
		    (FI_TAGGED | FI_RECV))
			t_assert(ent.tag == w[i].tag, "%s: tag %#lx", what,
				 (unsigned long) ent.tag);
	}
}

static void expect_one(const char *what, struct fid_cq *cq, struct want w)
{
	expect_all(what, cq, &w, 1);
}

/* The initiator's and the target's completions: on one CQ for a
 * loopback, else on each side's own. */
static void expect_both(struct pair *p, const char *what, struct want ini,
			struct want tgt)
{
	struct want w[2] = { ini, tgt };

	if (p->self) {
		expect_all(what, p->a.cq, w, 2);
	} else {
		expect_all(what, p->a.cq, &w[0], 1);
		expect_all(what, p->b.cq, &w[1], 1);
	}
}

#define ANY ((size_t) -1)

/* fi_write of a's src into b's dst, or fi_read of dst into src: one
 * completion, on a, and the bytes of seed where they went. */
static void rma_one(struct pair *p, const char *how, bool read, int seed)
{
	const char *call = read ? "fi_read" : "fi_write";
	void *from = read ? p->dst : p->src, *to = read ? p->src : p->dst;
	uint64_t raddr = t_raddr(&p->f, &p->dst_mr, 0);
	int c;

	t_fill(from, LEN, seed);
	t_fill(to, LEN, seed + 1);
	if (read)
		t_post(p->a.cq, fi_read(p->a.ep, p->src, LEN, p->src_mr.desc,
					p->a2b, raddr, p->dst_mr.key, &c));
	else
		t_post(p->a.cq, fi_write(p->a.ep, p->src, LEN, p->src_mr.desc,
					 p->a2b, raddr, p->dst_mr.key, &c));
	expect_one(how, p->a.cq, W(&c, FI_RMA | (read ? FI_READ : FI_WRITE),
				   ANY, FI_ADDR_UNSPEC, 0, 0));
	t_assert(t_check(to, LEN, seed), "%s: %s: wrong bytes", how, call);
	t_ok("%s: %s, %d bytes", how, call, LEN);
}

static void traffic(struct pair *p, const char *how)
{
	int c1, c2;

	rma_one(p, how, false, 11);
	rma_one(p, how, true, 13);

	/* fi_writedata: the target's completion has the data, from a */
	t_fill(p->src, LEN, 14);
	t_post(p->a.cq, fi_writedata(p->a.ep, p->src, LEN / 2, p->src_mr.desc,
				     0x5eed, p->a2b,
				     t_raddr(&p->f, &p->dst_mr, 16),
				     p->dst_mr.key, &c1));
	/* shm 2.x, which the double passes on, flags the target's entry
	 * FI_REMOTE_CQ_DATA alone (real EFA adds FI_RMA|FI_REMOTE_WRITE). */
	expect_both(p, how,
		    W(&c1, FI_RMA | FI_WRITE, ANY, FI_ADDR_UNSPEC, 0, 0),
		    W(NULL, FI_REMOTE_CQ_DATA | (FI_MAJOR(fi_version()) < 2 ?
		      FI_RMA | FI_REMOTE_WRITE : 0), ANY, p->b2a, 0x5eed, 0));
	t_assert(t_check(p->dst + 16, LEN / 2, 14), "%s: fi_writedata: bytes",
		 how);
	t_ok("%s: fi_writedata, remote CQ data from fi_addr %lu", how,
	     (unsigned long) p->b2a);

	/* fi_send into a posted fi_recv */
	t_fill(p->src, LEN, 15);
	memset(p->dst, 0, LEN);
	t_post(p->b.cq, fi_recv(p->b.ep, p->dst, LEN, p->dst_mr.desc,
				FI_ADDR_UNSPEC, &c2));
	t_post(p->a.cq, fi_send(p->a.ep, p->src, LEN - 5, p->src_mr.desc,
				p->a2b, &c1));
	expect_both(p, how,
		    W(&c1, FI_MSG | FI_SEND, ANY, FI_ADDR_UNSPEC, 0, 0),
		    W(&c2, FI_MSG | FI_RECV, LEN - 5, p->b2a, 0, 0));
	t_assert(t_check(p->dst, LEN - 5, 15), "%s: fi_send: bytes", how);
	t_ok("%s: fi_send / fi_recv, source fi_addr %lu", how,
	     (unsigned long) p->b2a);

	/* fi_senddata before its fi_recv */
	t_fill(p->src, LEN, 17);
	memset(p->dst, 0, LEN);
	t_post(p->a.cq, fi_senddata(p->a.ep, p->src, 300, p->src_mr.desc,
				    0xda7a, p->a2b, &c1));
	t_post(p->b.cq, fi_recv(p->b.ep, p->dst, LEN, p->dst_mr.desc,
				FI_ADDR_UNSPEC, &c2));
	expect_both(p, how,
		    W(&c1, FI_MSG | FI_SEND, ANY, FI_ADDR_UNSPEC, 0, 0),
		    W(&c2, FI_MSG | FI_RECV | FI_REMOTE_CQ_DATA, 300, p->b2a,
		      0xda7a, 0));
	t_assert(t_check(p->dst, 300, 17), "%s: fi_senddata: bytes", how);
	t_ok("%s: fi_senddata before fi_recv", how);

	/* fi_tsend / fi_trecv, directed */
	t_fill(p->src, LEN, 16);
	memset(p->dst, 0, LEN);
	t_post(p->b.cq, fi_trecv(p->b.ep, p->dst, LEN, p->dst_mr.desc,
				 p->b2a, 0x77, 0, &c2));
	t_post(p->a.cq, fi_tsend(p->a.ep, p->src, 1000, p->src_mr.desc,
				 p->a2b, 0x77, &c1));
	expect_both(p, how,
		    W(&c1, FI_TAGGED | FI_SEND, ANY, FI_ADDR_UNSPEC, 0, 0),
		    W(&c2, FI_TAGGED | FI_RECV, 1000, p->b2a, 0, 0x77));
	t_assert(t_check(p->dst, 1000, 16), "%s: fi_tsend: bytes", how);
	t_ok("%s: fi_tsend / fi_trecv (directed, tag 0x77)", how);
}

static void part_traffic(void)
{
	struct pair p;

	pair_open(&p, false);
	traffic(&p, "two endpoints");
	pair_close(&p);
}

static void part_traffic_self(void)
{
	struct pair p;

	pair_open(&p, true);
	traffic(&p, "endpoint to itself");
	pair_close(&p);
}

/* ---- the rest of the forwarding: waits, counters, options, cancel ---- */

/* FI_OPT_MIN_MULTI_RECV of ep, after setting it to set unless 0. */
static size_t min_multi_recv(struct fid_ep *ep, size_t set)
{
	size_t v = 0, sz = sizeof(v);

	if (set)
		t_fi(fi_setopt(&ep->fid, FI_OPT_ENDPOINT,
			       FI_OPT_MIN_MULTI_RECV, &set, sizeof(set)));
	t_fi(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v,
		       &sz));
	return v;
}

static void part_controls(void)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED,
				      .wait_obj = FI_WAIT_FD };
	const char *fdcq;
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err = { 0 };
	struct fid_cntr *cntr;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct t_fabric f;
	char name[64], buf[64], rbuf[64];
	size_t len = sizeof(name), minrecv;
	uint64_t flags;
	fi_addr_t self;
	int fd = -1, ctx, rctx;
	ssize_t ret;

	t_open(&f, NULL);
	t_fi(fi_endpoint(f.domain, f.info, &ep, NULL));
	/* FI_WAIT_FD: EFA refuses it while shm is in use (-FI_ENOSYS), and
	 * so does shm 1.17; a later shm may take it. */
	ret = fi_cq_open(f.domain, &cq_attr, &cq, NULL);
	t_assert(!ret || ret == -FI_ENOSYS, "FI_WAIT_FD CQ: %zd", ret);
	if (!ret) {
		t_fi(fi_control(&cq->fid, FI_GETWAIT, &fd));
		t_assert(fd >= 0, "FI_GETWAIT fd %d", fd);
		t_fi(fi_close(&cq->fid));
		fdcq = "FI_WAIT_FD CQ with its fd";
	} else {
		fdcq = "FI_WAIT_FD CQ refused as shm does";
	}
	cq_attr.wait_obj = FI_WAIT_UNSPEC;
	t_fi(fi_cq_open(f.domain, &cq_attr, &cq, NULL));
	t_fi(fi_av_open(f.domain, &av_attr, &av, NULL));
	t_fi(fi_cntr_open(f.domain, &cntr_attr, &cntr, NULL));
	t_fi(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	t_fi(fi_ep_bind(ep, &av->fid, 0));
	t_fi(fi_ep_bind(ep, &cntr->fid, FI_SEND));

	/* Options and op flags, before enabling. */
	minrecv = min_multi_recv(ep, 128);
	t_assert(minrecv == 128, "FI_OPT_MIN_MULTI_RECV %zu", minrecv);
	flags = FI_TRANSMIT | FI_COMPLETION;
	t_fi(fi_control(&ep->fid, FI_SETOPSFLAG, &flags));
	flags = FI_TRANSMIT;
	t_fi(fi_control(&ep->fid, FI_GETOPSFLAG, &flags));
	t_assert(flags & FI_COMPLETION, "FI_GETOPSFLAG %#lx",
		 (unsigned long) flags);
	t_fi(fi_enable(ep));
	minrecv = min_multi_recv(ep, 0);
	t_assert(minrecv == 128, "FI_OPT_MIN_MULTI_RECV %zu once enabled",
		 minrecv);
	minrecv = min_multi_recv(ep, 256);
	t_assert(minrecv == 256, "FI_OPT_MIN_MULTI_RECV %zu", minrecv);
	t_ok("FI_OPT_MIN_MULTI_RECV before and after fi_enable, "
	     "FI_SETOPSFLAG/FI_GETOPSFLAG");

	t_fi(fi_getname(&ep->fid, name, &len));
	t_assert(fi_av_insert(av, name, 1, &self, 0, NULL) == 1, "insert");

	/* fi_cancel: the posted receive ends with FI_ECANCELED. */
	t_post(cq, fi_recv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC,
			   &rctx));
	t_fi(fi_cancel(&ep->fid, &rctx));
	for (int i = 0; i < 1000000; i++) {
		ret = fi_cq_read(cq, &ent, 1);
		if (ret != -FI_EAGAIN)
			break;
	}
	t_assert(ret == -FI_EAVAIL, "cancelled receive: %zd", ret);
	t_assert(fi_cq_readerr(cq, &err, 0) == 1, "readerr");
	t_assert(err.err == FI_ECANCELED && err.op_context == &rctx,
		 "cancel: err %d, context %p", err.err, err.op_context);
	t_ok("fi_cancel: FI_ECANCELED for the application's context");

	/* A send to itself, waited for with fi_cq_sread and the counter. */
	memset(buf, 7, sizeof(buf));
	t_post(cq, fi_recv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC,
			   &rctx));
	t_post(cq, fi_send(ep, buf, sizeof(buf), NULL, self, &ctx));
	for (int got = 0; got < 2;) {
		ret = fi_cq_sread(cq, &ent, 1, NULL, 1000);
		if (ret == -FI_EAGAIN)
			continue;
		t_assert(ret == 1, "fi_cq_sread: %zd", ret);
		t_assert(ent.op_context == &ctx || ent.op_context == &rctx,
			 "sread context %p", ent.op_context);
		got++;
	}
	t_assert(!memcmp(rbuf, buf, sizeof(buf)), "bytes");
	t_fi(fi_cntr_wait(cntr, 1, 1000));
	t_assert(fi_cntr_read(cntr) == 1, "counter %lu",
		 (unsigned long) fi_cntr_read(cntr));
	t_fi(fi_cntr_add(cntr, 2));
	t_fi(fi_cntr_adderr(cntr, 3));
	t_assert(fi_cntr_read(cntr) == 3 && fi_cntr_readerr(cntr) == 3,
		 "counter add");
	t_fi(fi_cntr_set(cntr, 10));
	t_fi(fi_cntr_seterr(cntr, 0));
	t_assert(fi_cntr_read(cntr) == 10 && fi_cntr_readerr(cntr) == 0,
		 "counter set");
	t_ok("%s; FI_WAIT_UNSPEC CQ read with fi_cq_sread; a waitable "
	     "counter (wait, add, set, adderr, seterr)", fdcq);

	t_fi(fi_close(&ep->fid));
	t_fi(fi_close(&cntr->fid));
	t_fi(fi_close(&av->fid));
	t_fi(fi_close(&cq->fid));
	t_close(&f);
}

/* ---- device memory ---- */

/* Where a child that may crash writes the names of its shm regions, so
 * that the parent can remove what it left in /dev/shm. */
static int leak_fd = -1;

/* The shm region real EFA (and the double) names after an address. */
static void note_region(const void *name)
{
	const struct efa_addr *a = name;
	char gid[INET6_ADDRSTRLEN], line[128];
	int n;

	if (leak_fd < 0 || !inet_ntop(AF_INET6, a->gid, gid, sizeof(gid)))
		return;
	n = snprintf(line, sizeof(line), "/%s_%04x_%08x_%04x\n", gid, a->qpn,
		     a->qkey, (unsigned) getuid());
	if (write(leak_fd, line, (size_t) n) != n)
		return;
}

static void remove_regions(int fd)
{
	char buf[1024], *line, *save = NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	if (n <= 0)
		return;
	buf[n] = 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		shm_unlink(line);
}

/* A same-process transfer of device memory, as an application that did
 * not ask for FI_HMEM makes it; its outcome is the exit status. */
static int device_op(bool send)
{
	char *host = malloc(LEN);
	struct t_mr src_mr, dst_mr;
	struct t_fabric f;
	struct t_ep a, b;
	void *src, *dst;
	fi_addr_t dest;
	ssize_t ret;
	int c1, c2, st;

	t_cuda_init();
	t_open(&f, NULL);
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	note_region(a.name);
	note_region(b.name);
	dest = t_insert(&a, b.name);
	src = t_dev_alloc(LEN);
	dst = t_dev_alloc(LEN);
	t_fill(host, LEN, 21);
	t_dev_put(src, host, LEN);
	t_fill(host, LEN, 22);
	t_dev_put(dst, host, LEN);
	t_reg(&f, src, LEN, FI_SEND | FI_WRITE | FI_READ, 1, &src_mr);
	t_reg(&f, dst, LEN, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ, 2,
	      &dst_mr);
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	if (send) {
		while ((ret = fi_recv(b.ep, dst, LEN, dst_mr.desc,
				      FI_ADDR_UNSPEC, &c2)) == -FI_EAGAIN)
			t_drive(b.cq);
		if (ret)
			return T_POST_ERR;
		while ((ret = fi_send(a.ep, src, LEN, src_mr.desc, dest,
				      &c1)) == -FI_EAGAIN)
			t_drive(a.cq);
	} else {
		while ((ret = fi_write(a.ep, src, LEN, src_mr.desc, dest,
				       t_raddr(&f, &dst_mr, 0), dst_mr.key,
				       &c1)) == -FI_EAGAIN)
			t_drive(a.cq);
	}
	if (ret)
		return T_POST_ERR;
	st = t_outcome_of(a.cq, &c1, NULL);
	if (!st && send)
		st = t_outcome_of(b.cq, &c2, NULL);
	if (st)
		return st;
	t_dev_get(host, dst, LEN);
	return t_check(host, LEN, 21) ? T_OK : T_BAD_BYTES;
}

static int part_device_write(void) { return device_op(false); }
static int part_device_send(void) { return device_op(true); }

/* ---- driver ---- */

/* Run fn in a child; its exit status, T_CRASH if a signal killed it. */
static int in_child(int (*fn)(void))
{
	int st, fds[2];
	pid_t pid;

	fflush(stdout);
	t_assert(!pipe(fds), "pipe");
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid) {
		close(fds[0]);
		leak_fd = fds[1];
		exit(fn());
	}
	close(fds[1]);
	t_assert(waitpid(pid, &st, 0) == pid, "waitpid");
	/* A child that crashed, or returned without closing, leaves its
	 * 16 MiB regions behind: shm 1.17 only unlinks them on close. */
	remove_regions(fds[0]);
	close(fds[0]);
	if (WIFSIGNALED(st)) {
		printf("killed by signal %d\n", WTERMSIG(st));
		return T_CRASH;
	}
	if (WEXITSTATUS(st) == T_SKIP)
		exit(T_SKIP);
	return WEXITSTATUS(st);
}

#define PART(name) static int run_##name(void) { part_##name(); return 0; }
PART(info)
PART(hmem_ep)
PART(addr)
PART(mr)
PART(mr_cuda)
PART(traffic)
PART(traffic_self)
PART(controls)

/* Is "efa" the double (and not a real EFA provider)? */
static int run_which(void)
{
	struct fi_info *fi;
	int ret = getinfo(FI_MSG, BASIC_MAP, &fi);

	if (ret == -FI_ENODATA)
		t_skip("provider %s not found: set FI_PROVIDER_PATH to the "
		       "double's directory (tests/doubles/efa/.libs)", t_prov);
	t_fi(ret);
	if (strcmp(fi->fabric_attr->prov_name, "efa") ||
	    fi->fabric_attr->prov_version != DOUBLE_VERSION)
		t_skip("%s is not the EFA double (version %u.%u)", t_prov,
		       FI_MAJOR(fi->fabric_attr->prov_version),
		       FI_MINOR(fi->fabric_attr->prov_version));
	fi_freeinfo(fi);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int (*fn)(void); } parts[] = {
		{ "which provider", run_which },
		{ "FI_HMEM_CUDA registration", run_mr_cuda },
		{ "fi_getinfo", run_info },
		{ "FI_HMEM endpoints", run_hmem_ep },
		{ "addresses", run_addr },
		{ "registration", run_mr },
		{ "traffic", run_traffic },
		{ "traffic to itself", run_traffic_self },
		{ "waits, counters, options, cancel", run_controls },
	};
	const char *only = getenv("EFA_TEST_ONLY");
	int failures = 0, st;

	t_prov = "efa";
	t_init(argc, argv, NULL);
	setenv("HMEMLOOP_TEST_WAIT", "3", 0);
	/* EFA_TEST_ONLY=NAME: that part alone, in this process (for gdb). */
	for (size_t i = 0; only && i < sizeof(parts) / sizeof(parts[0]); i++)
		if (!strcmp(only, parts[i].name))
			return parts[i].fn();
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		st = in_child(parts[i].fn);
		if (st) {
			printf("FAIL: %s: exit %d\n", parts[i].name, st);
			failures++;
		}
	}
	/* With CMA (where the kernel allows it) shm moves large messages with
	 * process_vm_writev, which fails on device memory; without it (as in
	 * many containers) shm copies through its bounce buffers with a host
	 * memcpy, which faults: the crash of libfabric issue 12328. */
	for (int i = 0; i < 4; i++) {
		bool send = i & 1, nocma = i & 2;
		const char *op = send ? "fi_send" : "fi_write";
		const char *how = nocma ? "FI_SHM_DISABLE_CMA=1" : "default shm";

		if (nocma)
			setenv("FI_SHM_DISABLE_CMA", "1", 1);
		st = in_child(send ? part_device_send : part_device_write);
		unsetenv("FI_SHM_DISABLE_CMA");
		if (st != T_ERR_CQE && st != T_NO_CQE && st != T_CRASH) {
			printf("FAIL: same-process %s of device memory (%s): %s, "
			       "expected a failure as on EFA's shm path\n", op,
			       how, t_outcome_name(st));
			failures++;
		} else {
			t_ok("same-process %s of device memory (%s) fails as on "
			     "EFA: %s", op, how, t_outcome_name(st));
		}
	}
	return failures ? 1 : 0;
}
