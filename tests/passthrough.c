/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Host-memory traffic, run by the harness with and without hmemloop, its
 * completions and buffers printed as "digest:" lines that must be the
 * same. Between two processes hmemloop passes RMA, messages and tagged
 * messages through: every field of every completion is the provider's,
 * whether or not each endpoint's own address is in its address vector
 * (as MPI puts it there). Between two endpoints of this process hmemloop
 * does them itself (one engine per pair): what fi_cq(3) defines must be
 * what the provider reports (a receive's length, the bytes, the error of
 * a truncated receive, in the layout of each API version), and through
 * hmemloop the fields providers leave to chance must be fi_cq(3)'s too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN 4096

struct side {
	struct t_fabric f;
	struct t_ep e;
	char buf[LEN];
	struct t_mr mr;
	uint64_t caps;
};

/* Where digests go: the peer process keeps its own until the end, so that
 * the order of lines does not depend on scheduling. */
static FILE *out;
/* Between endpoints of this process: the fields fi_cq(3) defines. */
static bool defined_only;

/* What fi_cq(3) defines of an entry's flags: the class of the operation
 * and its direction; its length and tag are a receive's. */
static uint64_t defined_flags(uint64_t flags)
{
	flags &= FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_SEND |
		 FI_RECV | FI_REMOTE_CQ_DATA | FI_MULTI_RECV;
	return flags & FI_TAGGED ? flags & ~(uint64_t) FI_MSG : flags;
}

static void digest(const char *what, struct fid_cq *cq, void *ctx,
		   const void *buf, size_t len)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	int ret = t_wait(cq, &ent, &err);

	if (ret < 0)
		t_fail("%s: no completion", what);
	if (ret > 0) {
		fprintf(out, "digest: %s error %d olen %zu\n", what, err.err,
			err.olen);
		return;
	}
	t_assert(ent.op_context == ctx, "%s: context %p, expected %p", what,
		 ent.op_context, ctx);
	if (defined_only && t_shim_enabled())
		t_assert(ent.flags == defined_flags(ent.flags), "%s: flags %#lx "
			 "beyond fi_cq(3)'s", what, (unsigned long) ent.flags);
	if (defined_only) {
		ent.flags = defined_flags(ent.flags);
		if (!(ent.flags & FI_RECV))
			ent.len = ent.tag = 0;
	}
	fprintf(out, "digest: %s flags %#lx len %zu data %#lx tag %#lx crc %08x\n",
		what, (unsigned long) ent.flags, ent.len,
	       (unsigned long) ent.data, (unsigned long) ent.tag,
	       buf ? t_crc(buf, len) : 0);
}

static void side_open(struct side *s, unsigned seed, const struct t_opts *o)
{
	t_open(&s->f, o);
	t_ep_open(&s->e, &s->f, NULL);
	s->caps = s->f.info->caps;
	t_fill(s->buf, LEN, seed);
	t_reg(&s->f, s->buf, LEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE |
	      FI_REMOTE_READ | FI_REMOTE_WRITE, 7, &s->mr);
}

static void side_close(struct side *s)
{
	t_fi(fi_close(&s->mr.mr->fid));
	t_ep_close(&s->e);
	t_close(&s->f);
}

/* What the initiator needs to know of the target's region. */
struct target {
	uint64_t addr, key;
};

static void rma(struct side *a, fi_addr_t dest, struct target t,
		const char *tag)
{
	char what[64];
	int ctx[3];

	t_fill(a->buf, 256, 11);
	snprintf(what, sizeof(what), "%s write", tag);
	t_post(a->e.cq, fi_write(a->e.ep, a->buf, 256, a->mr.desc, dest,
				 t.addr, t.key, &ctx[0]));
	digest(what, a->e.cq, &ctx[0], NULL, 0);

	snprintf(what, sizeof(what), "%s read", tag);
	t_post(a->e.cq, fi_read(a->e.ep, a->buf + 1024, 512, a->mr.desc, dest,
				t.addr + 128, t.key, &ctx[1]));
	digest(what, a->e.cq, &ctx[1], a->buf + 1024, 512);
}

static void msgs(struct side *a, fi_addr_t dest, bool tagged, const char *tag)
{
	char what[64];
	int ctx;

	snprintf(what, sizeof(what), "%s %s", tag, tagged ? "tsend" : "send");
	if (tagged)
		t_post(a->e.cq, fi_tsend(a->e.ep, a->buf, 300, a->mr.desc, dest,
					 0x1234, &ctx));
	else
		t_post(a->e.cq, fi_send(a->e.ep, a->buf, 300, a->mr.desc, dest,
					&ctx));
	digest(what, a->e.cq, &ctx, NULL, 0);
}

static void recv_one(struct side *b, bool tagged, void *ctx)
{
	if (tagged)
		t_post(b->e.cq, fi_trecv(b->e.ep, b->buf + 2048, 1024, b->mr.desc,
					 FI_ADDR_UNSPEC, 0x1234, 0, ctx));
	else
		t_post(b->e.cq, fi_recv(b->e.ep, b->buf + 2048, 1024, b->mr.desc,
					FI_ADDR_UNSPEC, ctx));
}

static struct target target_of(struct side *b)
{
	return (struct target) { t_raddr(&b->f, &b->mr, 0), b->mr.key };
}

static void same_process(void)
{
	struct side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	fi_addr_t ab;
	int rctx;

	defined_only = true;
	side_open(a, 1, NULL);
	side_open(b, 2, NULL);
	ab = t_insert(&a->e, b->e.name);

	rma(a, ab, target_of(b), "self");
	fprintf(out, "digest: self target crc %08x\n", t_crc(b->buf, LEN));
	for (int tagged = 0; tagged < 2; tagged++) {
		recv_one(b, tagged, &rctx);
		msgs(a, ab, tagged, "self");
		digest(tagged ? "self trecv" : "self recv", b->e.cq, &rctx,
		       b->buf + 2048, 300);
	}
	/* And an endpoint to itself. */
	rma(a, t_insert(&a->e, a->e.name), target_of(a), "loop");
	side_close(a);
	side_close(b);
	free(a);
	free(b);
	defined_only = false;
}

/*
 * The error entry of a receive too short for a message of this process,
 * read in the layout of an API version: 1.0 ends at err_data, 1.5 at
 * err_data_size, 1.20 at src_addr; no byte is written beyond the layout.
 * The provider's err and olen vary (shm: -FI_ETRUNC and 0): hmemloop's
 * are fi_cq(3)'s, FI_ETRUNC and the bytes that did not fit.
 */
static void truncated(uint32_t version, size_t end)
{
	struct t_opts o = {
		.version = version,
		.mr_mode = FI_VERSION_LT(version, FI_VERSION(1, 5)) ?
			   T_MR_BASIC : 0,
	};
	struct side *a, *b;
	struct t_fabric f;
	union {
		struct fi_cq_err_entry e;
		uint8_t raw[128];
	} u;
	struct fi_cq_tagged_entry ent;
	double until = t_now() + t_wait_s();
	struct iovec iov;
	struct fi_msg m;
	char what[32];
	fi_addr_t ab;
	int rctx, sctx;
	ssize_t ret;

	snprintf(what, sizeof(what), "API %u.%u truncated",
		 FI_MAJOR(version), FI_MINOR(version));
	if (!strcmp(t_prov, "udp;ofi_rxd")) {
		fprintf(out, "digest: %s: not compared, udp;ofi_rxd alone "
			"reports no truncation\n", what);
		return;
	}
	/* A provider built against older headers does not serve it. */
	if (FI_VERSION_LT(fi_version(), version) || t_try_open(&f, &o)) {
		fprintf(out, "digest: %s: not served\n", what);
		return;
	}
	t_close(&f);
	defined_only = true;
	a = calloc(1, sizeof(*a));
	b = calloc(1, sizeof(*b));
	side_open(a, 5, &o);
	side_open(b, 6, &o);
	ab = t_insert(&a->e, b->e.name);
	/* fi_recvmsg, as hmemloop posts a receive it records: sockets'
	 * error entries show which call posted it (SOCK_USE_OP_FLAGS). */
	iov = (struct iovec) { b->buf, 100 };
	m = (struct fi_msg) { .msg_iov = &iov, .desc = &b->mr.desc,
			      .iov_count = 1, .addr = FI_ADDR_UNSPEC,
			      .context = &rctx };
	t_post(b->e.cq, fi_recvmsg(b->e.ep, &m, FI_COMPLETION));
	t_post(a->e.cq, fi_send(a->e.ep, a->buf, 300, a->mr.desc, ab, &sctx));
	digest(what, a->e.cq, &sctx, NULL, 0);
	while ((ret = fi_cq_read(b->e.cq, &ent, 1)) == -FI_EAGAIN &&
	       t_now() < until)
		t_drive(b->e.cq);
	if (ret == 1) {
		fprintf(out, "digest: %s: no error, flags %#lx len %zu\n", what,
			(unsigned long) ent.flags, ent.len);
		goto out;
	}
	t_assert(ret == -FI_EAVAIL, "%s: fi_cq_read: %zd (%s)", what, ret,
		 fi_strerror(-ret));
	memset(&u, 0xa5, sizeof(u));
	t_assert(fi_cq_readerr(b->e.cq, &u.e, 0) == 1, "%s: fi_cq_readerr",
		 what);
	t_err_within(u.raw, sizeof(u.raw), end, what);
	t_assert(u.e.op_context == &rctx, "%s: context %p, expected %p", what,
		 u.e.op_context, (void *) &rctx);
	if (t_shim_enabled())
		t_assert(u.e.err == FI_ETRUNC && u.e.olen == 200 &&
			 u.e.len == 100 &&
			 u.e.flags == (FI_MSG | FI_RECV), "%s: err %d, olen "
			 "%zu, len %zu, flags %#lx: not fi_cq(3)'s", what,
			 u.e.err, u.e.olen, u.e.len, (unsigned long) u.e.flags);
	fprintf(out, "digest: %s: error %d\n", what, abs(u.e.err));
out:
	side_close(a);
	side_close(b);
	free(a);
	free(b);
	defined_only = false;
}

static void xread(int fd, void *p, size_t n)
{
	t_assert(read(fd, p, n) == (ssize_t) n, "pipe read");
}

static void xwrite(int fd, const void *p, size_t n)
{
	t_assert(write(fd, p, n) == (ssize_t) n, "pipe write");
}

/* Read one byte, driving progress meanwhile: with manual progress RMA
 * lands only while the target reads its CQ. */
static void await(int fd, struct fid_cq *cq)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	while (poll(&p, 1, 0) == 0)
		t_drive(cq);
	xread(fd, &c, 1);
}

/* With own, each process's endpoint has its own address in its address
 * vector, as MPI puts it there: hmemloop then records its receives. */
static bool own;

/* The peer process: a target for RMA and a receiver of messages. */
static void peer(int rfd, int wfd)
{
	struct side *b = calloc(1, sizeof(*b));
	struct target t;
	char *text;
	size_t size;
	int rctx;

	out = open_memstream(&text, &size);
	side_open(b, 3, NULL);
	if (own)
		t_insert(&b->e, b->e.name);
	t = target_of(b);
	xwrite(wfd, &b->e.namelen, sizeof(b->e.namelen));
	xwrite(wfd, b->e.name, b->e.namelen);
	xwrite(wfd, &t, sizeof(t));
	for (int tagged = 0; tagged < 2; tagged++) {
		recv_one(b, tagged, &rctx);
		xwrite(wfd, "r", 1);
		digest(tagged ? "peer trecv" : "peer recv", b->e.cq, &rctx,
		       b->buf + 2048, 300);
	}
	await(rfd, b->e.cq);
	fprintf(out, "digest: peer target crc %08x\n", t_crc(b->buf, 2048));
	side_close(b);
	fclose(out);
	fputs(text, stdout);
	exit(0);
}

static void two_processes(void)
{
	int to_peer, from_peer, st;
	struct side *a = calloc(1, sizeof(*a));
	char name[256], ready;
	struct target t;
	size_t len;
	fi_addr_t dest;
	pid_t pid;

	pid = t_fork_peer(&from_peer, &to_peer);
	if (!pid)
		peer(from_peer, to_peer);
	xread(from_peer, &len, sizeof(len));
	t_assert(len <= sizeof(name), "peer name too long");
	xread(from_peer, name, len);
	xread(from_peer, &t, sizeof(t));

	side_open(a, 4, NULL);
	if (own)
		t_insert(&a->e, a->e.name);
	dest = t_insert(&a->e, name);
	for (int tagged = 0; tagged < 2; tagged++) {
		xread(from_peer, &ready, 1);
		msgs(a, dest, tagged, "remote");
	}
	rma(a, dest, t, "remote");
	xwrite(to_peer, "g", 1);
	t_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "peer process failed: status %#x", st);
	side_close(a);
	free(a);
}

static void two_processes_own(void)
{
	own = true;
	two_processes();
	own = false;
}

static void truncated_1_4(void)
{
	truncated(FI_VERSION(1, 4), T_ERR_END_1_0);
}

static void truncated_1_17(void)
{
	truncated(FI_VERSION(1, 17), T_ERR_END_1_5);
}

static void truncated_1_20(void)
{
	truncated(FI_VERSION(1, 20), T_ERR_END_1_20);
}

static const struct t_case cases[] = {
	T_CASE("same_process", same_process),
	T_CASE("truncated_1_4", truncated_1_4),
	T_CASE("truncated_1_17", truncated_1_17),
	T_CASE("truncated_1_20", truncated_1_20),
	T_CASE("two_processes", two_processes),
	T_CASE("two_processes_own", two_processes_own),
};

static void to_stdout(void)
{
	out = stdout;
}

static void all_done(void)
{
	t_ok("pass-through traffic on %s", t_prov);
}

T_MAIN(cases, .setup = to_stdout, .teardown = all_done);
