/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The other half of libfabric issue 12328: two processes of one host move
 * device memory through the provider (shm, or EFA's shm path). The
 * application sets FI_MR_HMEM and not FI_HMEM and registers its device
 * buffers as ordinary memory; without FI_HMEM shm's SAR copies touch them
 * with a host memcpy and crash. Through hmemloop with HMEMLOOP_HMEM=auto
 * the provider is given FI_HMEM, and fi_write, fi_read and fi_send into
 * the other process must deliver the right bytes. Then each is timed.
 *
 *   peers [-p PROVIDER] [-s SIZE[,SIZE...]] [-n ITERS]
 *
 * Sizes default to 64 KiB, 1 MiB and 16 MiB: above shm's inject size, so
 * on its SAR path where CMA is off (FI_SHM_DISABLE_CMA=1, or a container
 * without ptrace rights) and on its CUDA IPC path with FI_HMEM. It skips
 * where libfabric cannot register CUDA memory at all (no GPU, or a
 * libfabric without CUDA support): there no provider moves device memory
 * between processes, and hmemloop leaves the hints alone.
 *
 * The parent is the initiator; the child, forked before either touches
 * CUDA or libfabric, is the target and serves commands over a socket,
 * driving its CQ between them.
 */
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

enum cmd { HELLO, FILL, CHECK, RECV, RECVD, QUIT };

struct msg {
	int cmd;
	int status;
	unsigned seed;
	size_t len;
	uint64_t key, addr;
	size_t namelen;
	char name[256];
};

struct side {
	int sock;
	struct t_fabric f;
	struct t_ep e;
	struct t_mr mr;			/* the device buffer */
	char *host;			/* its bytes, to fill and check */
	fi_addr_t peer;
	uint64_t peer_key, peer_addr;
	bool recv_done;			/* target: the posted receive ended */
	int recv_err;
};

static void say(int sock, const struct msg *m)
{
	t_assert(write(sock, m, sizeof(*m)) == sizeof(*m), "socket write");
}

static void hear(int sock, struct msg *m)
{
	t_assert(read(sock, m, sizeof(*m)) == sizeof(*m),
		 "the other process is gone");
}

/* Can this libfabric register CUDA memory? Asked with FI_HMEM, as an
 * application that knows it would. */
static void need_cuda_registrations(void *dev, size_t len)
{
	struct t_opts o = {
		.caps = FI_MSG | FI_RMA | FI_HMEM,
		.mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			   FI_MR_PROV_KEY | FI_MR_HMEM,
	};
	struct iovec iov = { dev, len };
	struct fi_mr_attr attr = {
		.mr_iov = &iov, .iov_count = 1, .access = FI_SEND,
		.iface = FI_HMEM_CUDA,
	};
	struct t_fabric f;
	struct fid_mr *mr;
	int ret;

	if (t_try_open(&f, &o) == -FI_ENODATA)
		t_skip("%s does not grant FI_HMEM here", t_prov);
	ret = fi_mr_regattr(f.domain, &attr, 0, &mr);
	if (ret == -FI_ENOSYS)
		t_skip("libfabric cannot register CUDA memory here: no "
		       "provider moves device memory between processes");
	t_fi(ret);
	t_fi(fi_close(&mr->fid));
	t_close(&f);
}

static void open_side(struct side *s, size_t max)
{
	struct t_opts o = {
		.caps = FI_MSG | FI_RMA,
		.mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
			   FI_MR_PROV_KEY | FI_MR_HMEM,
	};
	struct msg m = { .cmd = HELLO }, peer;

	t_cuda_init();
	s->host = malloc(max);
	t_assert(s->host, "out of memory");
	s->mr.base = t_dev_alloc(max);
	need_cuda_registrations(s->mr.base, max);
	t_open(&s->f, &o);
	t_ep_open(&s->e, &s->f, &o);
	/* As ordinary memory, as in issue 12328. */
	t_reg(&s->f, s->mr.base, max, FI_READ | FI_WRITE | FI_REMOTE_READ |
	      FI_REMOTE_WRITE | FI_SEND | FI_RECV, 1, &s->mr);

	m.key = s->mr.key;
	m.addr = t_raddr(&s->f, &s->mr, 0);
	m.namelen = s->e.namelen;
	memcpy(m.name, s->e.name, s->e.namelen);
	say(s->sock, &m);
	hear(s->sock, &peer);
	s->peer = t_insert(&s->e, peer.name);
	s->peer_key = peer.key;
	s->peer_addr = peer.addr;
}

/* ---- the target ---- */

static void drive(struct side *s)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err = { 0 };
	ssize_t n = fi_cq_read(s->e.cq, &ent, 1);

	if (n == 1 && (ent.flags & FI_RECV)) {
		s->recv_done = true;
	} else if (n == -FI_EAVAIL) {
		fi_cq_readerr(s->e.cq, &err, 0);
		s->recv_done = true;
		s->recv_err = err.err ? err.err : FI_EOTHER;
	}
}

static void serve(struct side *s)
{
	struct pollfd pfd = { .fd = s->sock, .events = POLLIN };
	struct msg m;

	for (;;) {
		drive(s);
		if (poll(&pfd, 1, 0) != 1)
			continue;
		if (read(s->sock, &m, sizeof(m)) != sizeof(m))
			exit(0);	/* the initiator is gone */
		switch (m.cmd) {
		case FILL:
			t_fill(s->host, m.len, m.seed);
			t_dev_put(s->mr.base, s->host, m.len);
			break;
		case RECVD:
			while (!s->recv_done)
				drive(s);
			/* fall through */
		case CHECK:
			t_dev_get(s->host, s->mr.base, m.len);
			m.status = s->recv_err ? -s->recv_err :
				   !t_check(s->host, m.len, m.seed);
			break;
		case RECV:
			s->recv_done = false;
			s->recv_err = 0;
			t_post(s->e.cq, fi_recv(s->e.ep, s->mr.base, m.len,
						s->mr.desc, s->peer, s));
			break;
		case QUIT:
			say(s->sock, &m);
			exit(0);
		}
		say(s->sock, &m);
	}
}

/* ---- the initiator ---- */

static const char *const op_names[] = { "fi_write", "fi_read", "fi_send" };
enum op { WRITE, READ, SEND, NOPS };

static void ask(struct side *s, enum cmd cmd, unsigned seed, size_t len)
{
	struct msg m = { .cmd = cmd, .seed = seed, .len = len };

	say(s->sock, &m);
	hear(s->sock, &m);
	t_assert(m.status == 0, "the target found %s",
		 m.status < 0 ? fi_strerror(-m.status) : "wrong bytes");
}

/* One operation; the seconds from its post to its completion at the
 * initiator, which for a write or send is its delivery: without
 * FI_DELIVERY_COMPLETE tcp;ofi_rxm completes them once sent, and the
 * bytes could land after the next command. */
static double once(struct side *s, enum op op, size_t len)
{
	struct iovec iov = { s->mr.base, len };
	struct fi_rma_iov riov = { s->peer_addr, len, s->peer_key };
	struct fi_msg_rma rma = {
		.msg_iov = &iov, .desc = &s->mr.desc, .iov_count = 1,
		.addr = s->peer, .rma_iov = &riov, .rma_iov_count = 1,
	};
	struct fi_msg msg = {
		.msg_iov = &iov, .desc = &s->mr.desc, .iov_count = 1,
		.addr = s->peer,
	};
	struct fi_context ctx;
	double t0;

	rma.context = msg.context = &ctx;
	if (op == SEND)
		ask(s, RECV, 0, len);
	t0 = t_now();
	if (op == WRITE)
		t_post(s->e.cq, fi_writemsg(s->e.ep, &rma,
					    FI_COMPLETION | FI_DELIVERY_COMPLETE));
	else if (op == READ)
		t_post(s->e.cq, fi_readmsg(s->e.ep, &rma, FI_COMPLETION));
	else
		t_post(s->e.cq, fi_sendmsg(s->e.ep, &msg,
					   FI_COMPLETION | FI_DELIVERY_COMPLETE));
	t_expect(s->e.cq, &ctx, op == SEND ? FI_SEND : FI_RMA, (size_t) -1);
	return t_now() - t0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static void run(struct side *s, enum op op, size_t len, int iters)
{
	unsigned seed = 1 + op * 1000 + len % 997;
	double *t = calloc(iters, sizeof(*t)), med;

	if (op == READ) {
		ask(s, FILL, seed, len);
	} else {
		t_fill(s->host, len, seed);
		t_dev_put(s->mr.base, s->host, len);
	}
	once(s, op, len);
	if (op == READ) {
		t_dev_get(s->host, s->mr.base, len);
		t_assert(t_check(s->host, len, seed), "%s of %zu: wrong bytes",
			 op_names[op], len);
	} else {
		ask(s, op == SEND ? RECVD : CHECK, seed, len);
	}
	for (int i = 0; i < iters; i++)
		t[i] = once(s, op, len);
	if (op == SEND)
		ask(s, RECVD, seed, len);
	qsort(t, iters, sizeof(*t), cmp);
	med = t[iters / 2];
	t_ok("%s %zu B: right bytes; post to completion: median %.1f us, "
	     "%.2f GB/s, of %d", op_names[op], len, med * 1e6,
	     len / med / 1e9, iters);
	free(t);
}

/* -s SIZE[,SIZE...] and -n ITERS. */
static char *list;
static int iters = 20;

static void opt(int c, const char *arg)
{
	if (c == 's')
		list = strdup(arg);
	else
		iters = atoi(arg);
}

static void peers(void)
{
	size_t sizes[16] = { 64 << 10, 1 << 20, 16 << 20 }, max = 0;
	int nsizes = 3, fds[2], st;
	struct side s = { 0 };
	pid_t child;

	if (list)
		nsizes = 0;
	for (char *tok = list ? strtok(list, ",") : NULL; tok && nsizes < 16;
	     tok = strtok(NULL, ","))
		sizes[nsizes++] = strtoull(tok, NULL, 0);
	for (int i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	t_assert(iters > 0 && max > 0, "bad -s or -n");

	t_assert(!socketpair(AF_UNIX, SOCK_STREAM, 0, fds), "socketpair");
	child = fork();
	t_assert(child >= 0, "fork");
	if (!child) {
		close(fds[0]);
		s.sock = fds[1];
		open_side(&s, max);
		serve(&s);
	}
	close(fds[1]);
	s.sock = fds[0];
	open_side(&s, max);
	for (int i = 0; i < nsizes; i++)
		for (int op = 0; op < NOPS; op++)
			run(&s, op, sizes[i], iters);
	ask(&s, QUIT, 0, 0);
	t_assert(waitpid(child, &st, 0) == child && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "the target ended badly: status %#x", st);
	free(list);
}

static const struct t_case cases[] = {
	T_CASE("peers", peers),
};

T_MAIN(cases, .opts = "s:n:", .opt = opt);
